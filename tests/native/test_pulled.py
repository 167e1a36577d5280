"""The client's native pull-result decoder (``_native.pulled_messages`` / ``RecordView``) against the
pure-Python reader it replaces on the client (``StoredMessage``, the reference), on generated bodies.

Bodies are records the reference encoder writes back to back, as a PULL_MESSAGE answer carries
them: any topic text, empty and maximal (32,767-byte) properties, repeated and odd property items,
IPv4 and IPv6 born / store hosts, the compressed and other SYSFLAG bits, empty and binary bodies.
Every attribute of every decoded message must equal the reference's; damaged bodies (flipped
bytes, cuts) must be refused where the reference walk refuses them, naming the same byte.
"""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import Rec, encode_record

from rocketq import _native
from rocketq.store.record import BLANK_MAGIC, RecordError, StoredMessage, check_record, peek

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_PROPERTIES_BYTES = 32767
IPS = [(bytes([10, 0, 0, 1]), 7), (bytes([192, 168, 1, 200]), 65535), (bytes(15) + b"\x01", 9),
       (bytes(range(16)), -1)]
COMPRESSED, MULTI_TAGS = 0x1, 0x2
FIELDS = ("total_size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset", "sys_flag",
          "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
          "prepared_transaction_offset", "raw", "topic", "properties_string", "properties", "tags", "keys",
          "uniq_key", "msg_id")
TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=8)


@st.composite
def properties(draw) -> bytes:
    """A properties string: well-formed pairs, sometimes an item without a separator or a name, a
    repeated name, no trailing separator, or one maximal value filling the 32,767 bytes."""
    if draw(st.integers(0, 15)) == 0:
        head = "TAGS\x01"
        return (head + "v" * (MAX_PROPERTIES_BYTES - len(head))).encode()
    names = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "RETRY_TOPIC", "a", "ключ", ""])
    items = draw(st.lists(st.tuples(names, TEXT), max_size=6))
    text = "".join(f"{k}\x01{v}\x02" for k, v in items)
    if draw(st.booleans()):
        text += draw(st.sampled_from(["junk\x02", "\x01x\x02", "KEYS\x01 a  b \x02", "KEYS\x01last"]))
    return text.encode()[:MAX_PROPERTIES_BYTES]


@st.composite
def records(draw) -> Rec:
    born_ip, born_port = draw(st.sampled_from(IPS))
    sys_flag = draw(st.sampled_from([0, COMPRESSED, MULTI_TAGS, COMPRESSED | MULTI_TAGS, 0x8, 0x100,
                                     COMPRESSED | 0x300, COMPRESSED | 0x100]))
    body = draw(st.binary(max_size=300))
    if sys_flag & COMPRESSED and draw(st.booleans()):     # deflated as a client does (or as LZ4 says it is not)
        body = zlib.compress(body)
    return Rec(draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=20).filter(
                   lambda t: len(t.encode()) <= 127)),
               draw(st.integers(-2, 1 << 20)), draw(st.integers(-(1 << 31), (1 << 31) - 1)), sys_flag,
               draw(st.integers(0, 1 << 45)), born_ip, born_port, draw(st.integers(0, 16)),
               draw(st.integers(-1, 1 << 40)), body, draw(properties()))


@st.composite
def bodies(draw) -> tuple[bytes, list[int]]:
    """A pull body: records back to back (each with its own log offset and store host), and where each starts."""
    out, positions, pos = [], [], 0
    store_ip, store_port = draw(st.sampled_from(IPS))
    for r in draw(st.lists(records(), min_size=0, max_size=6)):
        raw = encode_record(r, queue_offset=draw(st.integers(0, 1 << 40)), phys=draw(st.integers(0, 1 << 50)),
                            store_ts=draw(st.integers(1, 1 << 45)), store_ip=store_ip, store_port=store_port)
        positions.append(pos)
        out.append(raw)
        pos += len(raw)
    return b"".join(out), positions


def _same(view, ref) -> None:
    for name in FIELDS:
        assert getattr(view, name) == getattr(ref, name), name
    # the body as stored, and as a consumer sees it: a COMPRESSED zlib body inflated (RocketMQ 4.x clients
    # leave the codec bits 0, 5.x set ZLIB 0x300), anything else as stored
    assert view.stored_body == ref.body == ref.stored_body
    zlib_codec = ref.sys_flag & COMPRESSED and ref.sys_flag & 0x700 in (0, 0x300)
    try:
        assert view.body == (zlib.decompress(ref.body) if zlib_codec else ref.body)
    except zlib.error:
        assert view.body == ref.body
    assert view.crc_ok() == ref.crc_ok()
    _same_dict(view, ref)
    kw = {"topic": "RE", "properties": {"A": "b"}, "queue_id": 3, "delay_level": 2}
    assert view.to_message(**kw) == ref.to_message(**kw)


@SETTINGS
@given(body=bodies())
def test_every_attribute_equals_the_reference(body):
    data, positions = body
    views = _native.pulled_messages(data)
    assert len(views) == len(positions)
    for view, pos in zip(views, positions):
        _same(view, StoredMessage(data, pos))
        _same(_native.RecordView(data, pos), StoredMessage(data, pos))


@SETTINGS
@given(body=bodies(), topic=TEXT)
def test_a_set_topic_is_what_both_answer(body, topic):
    data, positions = body
    for view, pos in zip(_native.pulled_messages(data), positions):
        ref = StoredMessage(data, pos)
        view.topic, ref.topic = topic, topic
        assert view.topic == ref.topic == topic
        _same_dict(view, ref)


def _same_dict(view, ref) -> None:
    """``to_dict`` is the reference's, but for the body of an inflated record (the reference's is as stored)."""
    mine, theirs = view.to_dict(), ref.to_dict()
    if view.body != ref.body:
        mine, theirs = ({**d, "body": None, "body_encoding": None} for d in (mine, theirs))
    assert mine == theirs


def _reference_walk(data: bytes) -> tuple[list[int], int | None]:
    """Record starts of a pull body with the store's rules (no log-offset check: a body's records
    keep theirs), and the byte of the first one that does not parse (None: all did)."""
    pos, out = 0, []
    while pos < len(data):
        try:
            size, magic = peek(data, pos, len(data), offset=pos)
            if magic == BLANK_MAGIC:
                return out, pos
            phys = struct.unpack_from(">q", data, pos + 28)[0]
            size = check_record(data, pos, len(data), offset=phys, check_crc=False)
        except RecordError:
            return out, pos
        out.append(pos)
        pos += size
    return out, None


@SETTINGS
@given(body=bodies(), flips=st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(1, 255)), max_size=3),
       cut=st.one_of(st.none(), st.integers(0, 1 << 20)))
def test_a_damaged_body_is_refused_where_the_reference_refuses_it(body, flips, cut):
    data = bytearray(body[0])
    for at, x in flips:
        if data:
            data[at % len(data)] ^= x
    if cut is not None and data:
        del data[cut % len(data):]
    data = bytes(data)
    starts, bad = _reference_walk(data)
    if bad is None:
        views = _native.pulled_messages(data)
        assert [v.raw for v in views] == [StoredMessage(data, p).raw for p in starts]
        for view, pos in zip(views, starts):
            ref = StoredMessage(data, pos)
            for name in ("total_size", "queue_offset", "physical_offset", "sys_flag", "born_host", "store_host",
                         "stored_body", "reconsume_times", "prepared_transaction_offset"):
                assert getattr(view, name) == getattr(ref, name), name
    else:
        with pytest.raises(ValueError, match=f"malformed message record at byte {bad} of a {len(data)}-byte body"):
            _native.pulled_messages(data)


def test_undecodable_text_raises_what_the_reference_raises():
    r = Rec("T", 0, 0, 0, 1, bytes(4), 1, 0, 0, b"x", b"TAGS\x01\xff\x02")
    data = encode_record(r, queue_offset=0, phys=0, store_ts=1, store_ip=bytes(4), store_port=1)
    view, ref = _native.pulled_messages(data)[0], StoredMessage(data)
    for name in ("properties_string", "properties", "tags"):
        with pytest.raises(UnicodeDecodeError):
            getattr(ref, name)
        with pytest.raises(UnicodeDecodeError):
            getattr(view, name)
    assert view.body == ref.body == b"x"


def test_a_record_cut_short_is_no_view():
    r = Rec("T", 0, 0, 0, 1, bytes(4), 1, 0, 0, b"body", b"")
    data = encode_record(r, queue_offset=0, phys=0, store_ts=1, store_ip=bytes(4), store_port=1)
    with pytest.raises(ValueError, match="no record at byte 0"):
        _native.RecordView(data[:-1])
    with pytest.raises(ValueError, match="malformed message record at byte 0 of a 8-byte body"):
        _native.pulled_messages(data[:8])
    assert _native.pulled_messages(b"") == []
