"""Golden bytes for every on-disk format the store writes (PROTOCOLS.md F.1, F.2, F.4, F.6).

Each expected value is built here by hand, field by field, from the layout tables - not from the
store's own encoder - and compared with the bytes the store left in its files.
"""

from __future__ import annotations

import random
import struct

import pytest
from store_helpers import FakeClock, new_seed, small_config

from rocketq import _native
from rocketq.common.javahash import index_hash, java_hash, tag_hash
from rocketq.common.message import Message as CommonMessage
from rocketq.common.msgid import HostAddress, decode_offset_msg_id, offset_msg_id
from rocketq.common.properties import (
    IllegalPropertyError,
    decode_properties,
    encode_properties,
)
from rocketq.store import Message, MessageStore
from rocketq.store.checkpoint import CHECKPOINT_SIZE, Checkpoint, CheckpointFile
from rocketq.store.consume_queue import CQ_DTYPE
from rocketq.store.record import Blank, RecordError, StoredMessage, check_record

STORE_MS = 1_800_000_000_250                 # the fake clock's time, exactly representable in seconds
STORE_HOST = "10.0.0.7:10911"
STORE_HOST_BYTES = bytes([10, 0, 0, 7]) + (10911).to_bytes(4, "big")
SEGMENT = 64 * 1024
MAGIC_V1 = bytes.fromhex("DAA320A7")
BLANK_MAGIC = bytes.fromhex("CBD43194")


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def hand_record(*, body: bytes, topic: str, props: bytes, queue_id: int, queue_offset: int, phys: int,
                born_ts: int, born_host: bytes, store_host: bytes = STORE_HOST_BYTES, sys_flag: int = 0,
                flag: int = 0, reconsume: int = 0, prepared: int = 0, body_crc: int | None = None) -> bytes:
    """A CommitLog record per PROTOCOLS.md F.1, one field after the other (V1 magic)."""
    crc = body_crc if body_crc is not None else __import__("zlib").crc32(body) & 0x7FFFFFFF
    t = topic.encode()
    rest = b"".join([
        MAGIC_V1,                       # 4   MAGICCODE
        i32(crc),                       # 8   BODYCRC
        i32(queue_id),                  # 12  QUEUEID
        i32(flag),                      # 16  FLAG
        i64(queue_offset),              # 20  QUEUEOFFSET
        i64(phys),                      # 28  PHYSICALOFFSET
        i32(sys_flag),                  # 36  SYSFLAG
        i64(born_ts),                   # 40  BORNTIMESTAMP
        born_host,                      # 48  BORNHOST ip + port (8 or 20)
        i64(STORE_MS),                  # ..  STORETIMESTAMP
        store_host,                     # ..  STOREHOST ip + port (8 or 20)
        i32(reconsume),                 # ..  RECONSUMETIMES
        i64(prepared),                  # ..  PREPARED TRANSACTION OFFSET
        i32(len(body)), body,           # ..  BODY
        bytes([len(t)]), t,             # ..  TOPIC (1-byte length, V1)
        struct.pack(">h", len(props)), props,   # PROPERTIES (int16 length)
    ])
    return i32(4 + len(rest)) + rest    # 0   TOTALSIZE, the whole record


def open_golden_store(path, **kw) -> MessageStore:
    cfg = small_config(path, store_host=kw.pop("store_host", STORE_HOST), **kw)
    return MessageStore(cfg, clock=FakeClock(STORE_MS / 1000)).start()


def segment_bytes(path, offset: int = 0) -> bytes:
    return (path / "commitlog" / f"{offset:020d}").read_bytes()


# ---- F.1 CommitLog record ------------------------------------------------------------------------

def test_ipv4_records_field_by_field(tmp_path):
    store = open_golden_store(tmp_path)
    r1 = store.put_message(Message(
        topic="TopicTest", body=b"Hello RocketMQ", queue_id=2, tags="TagA", keys=["k1", "k2"],
        properties={"UNIQ_KEY": "AC1100010001000000000000000A"}, flag=7, born_timestamp=1_799_999_999_000,
        born_host=HostAddress.parse("192.168.1.9:55000")))
    # empty body, a committed transaction record, reconsume count, born time defaulting to store time
    r2 = store.put_message(Message(topic="TopicTest", body=b"", queue_id=2, sys_flag=0x8,
                                   prepared_transaction_offset=12345, reconsume_times=3,
                                   born_host=HostAddress.parse("1.2.3.4:5")))
    r3 = store.put_message(Message(topic="Other", body=b"\x00\xff", queue_id=0))
    store.shutdown()
    raw = segment_bytes(tmp_path)

    want1 = hand_record(
        body=b"Hello RocketMQ", topic="TopicTest",
        props=b"UNIQ_KEY\x01AC1100010001000000000000000A\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02",
        queue_id=2, queue_offset=0, phys=0, born_ts=1_799_999_999_000,
        born_host=bytes([192, 168, 1, 9]) + (55000).to_bytes(4, "big"), flag=7,
        body_crc=1774740973)             # java.util.zip.CRC32("Hello RocketMQ") & 0x7FFFFFFF, from a JVM
    assert raw[:len(want1)] == want1
    assert (r1.physical_offset, r1.queue_offset, r1.wrote_bytes) == (0, 0, len(want1))

    want2 = hand_record(body=b"", topic="TopicTest", props=b"", queue_id=2, queue_offset=1, phys=len(want1),
                        born_ts=STORE_MS, born_host=bytes([1, 2, 3, 4]) + i32(5), sys_flag=0x8, reconsume=3,
                        prepared=12345, body_crc=0)
    assert raw[len(want1):len(want1) + len(want2)] == want2
    assert (r2.physical_offset, r2.queue_offset) == (len(want1), 1)

    p3 = len(want1) + len(want2)
    want3 = hand_record(body=b"\x00\xff", topic="Other", props=b"", queue_id=0, queue_offset=0, phys=p3,
                        born_ts=STORE_MS, born_host=bytes([127, 0, 0, 1]) + i32(0))
    assert raw[p3:p3 + len(want3)] == want3
    assert (r3.physical_offset, r3.queue_offset) == (p3, 0)
    assert raw[p3 + len(want3):] == bytes(SEGMENT - p3 - len(want3))       # nothing else was written

    # and the decoder reads every field back
    m = StoredMessage(want1)
    assert (m.total_size, m.magic, m.body_crc, m.queue_id, m.flag, m.queue_offset, m.physical_offset,
            m.sys_flag, m.born_timestamp, str(m.born_host), m.store_timestamp, str(m.store_host),
            m.reconsume_times, m.prepared_transaction_offset, m.body, m.topic) == (
        len(want1), 0xDAA320A7, 1774740973, 2, 7, 0, 0, 0, 1_799_999_999_000, "192.168.1.9:55000", STORE_MS,
        STORE_HOST, 0, 0, b"Hello RocketMQ", "TopicTest")
    assert m.tags == "TagA" and m.keys == ["k1", "k2"] and m.uniq_key == "AC1100010001000000000000000A"
    assert check_record(want1, 0, len(want1), offset=0) == len(want1)


def test_ipv6_born_host_takes_20_bytes_and_sets_sysflag_0x10(tmp_path):
    store = open_golden_store(tmp_path)
    r = store.put_message(Message(topic="T6", body=b"v6", tags="x", born_timestamp=42,
                                  born_host=HostAddress.parse("[2001:db8::1]:40000")))
    store.shutdown()
    raw = segment_bytes(tmp_path)
    born = bytes.fromhex("20010db8000000000000000000000001") + (40000).to_bytes(4, "big")
    want = hand_record(body=b"v6", topic="T6", props=b"TAGS\x01x\x02", queue_id=0, queue_offset=0, phys=0,
                       born_ts=42, born_host=born, sys_flag=0x10)
    assert raw[:len(want)] == want
    assert r.wrote_bytes == len(want) == 88 + 12 + 2 + 1 + 2 + 2 + len(b"TAGS\x01x\x02")
    assert struct.unpack_from(">q", raw, 68)[0] == STORE_MS                # STORETIMESTAMP moved from 56 to 68
    m = StoredMessage(raw[:len(want)])
    assert str(m.born_host) == "[2001:db8::1]:40000" and m.store_timestamp == STORE_MS and m.body == b"v6"


def test_ipv6_store_host_sets_sysflag_0x20_and_a_56_char_message_id(tmp_path):
    store = open_golden_store(tmp_path, store_host="[2001:db8::7]:10911")
    r0 = store.put_message(Message(topic="T", body=b"a"))
    r1 = store.put_message(Message(topic="T", body=b"b", born_host=HostAddress.parse("[::1]:9")))
    store.shutdown()
    raw = segment_bytes(tmp_path)
    store_host = bytes.fromhex("20010db8000000000000000000000007") + (10911).to_bytes(4, "big")
    want0 = hand_record(body=b"a", topic="T", props=b"", queue_id=0, queue_offset=0, phys=0, born_ts=STORE_MS,
                        born_host=bytes([127, 0, 0, 1]) + i32(0), store_host=store_host, sys_flag=0x20)
    want1 = hand_record(body=b"b", topic="T", props=b"", queue_id=0, queue_offset=1, phys=len(want0),
                        born_ts=STORE_MS, born_host=bytes(15) + b"\x01" + i32(9), store_host=store_host,
                        sys_flag=0x30)
    assert raw[:len(want0) + len(want1)] == want0 + want1
    assert r0.msg_id == "20010DB8000000000000000000000007" + "00002A9F" + "0000000000000000"
    assert r1.msg_id == "20010DB8000000000000000000000007" + "00002A9F" + f"{len(want0):016X}"
    assert decode_offset_msg_id(r1.msg_id) == (HostAddress.parse("[2001:db8::7]:10911"), len(want0))


def test_batch_records_are_the_same_bytes_as_single_puts(tmp_path):
    single, batch = tmp_path / "single", tmp_path / "batch"
    msgs = [Message(topic="B", body=b"m%d" % i, queue_id=i % 2, tags=f"t{i}", keys=[f"k{i}"],
                    born_timestamp=1000 + i) for i in range(5)]
    s = open_golden_store(single)
    for m in msgs:
        s.put_message(m)
    s.shutdown()
    b = open_golden_store(batch)
    rs = b.put_messages(msgs)
    b.shutdown()
    assert rs.status == "PUT_OK"
    assert segment_bytes(single) == segment_bytes(batch)
    want = b""
    for i in range(5):
        want += hand_record(body=b"m%d" % i, topic="B", props=f"TAGS\x01t{i}\x02KEYS\x01k{i}\x02".encode(),
                            queue_id=i % 2, queue_offset=i // 2, phys=len(want), born_ts=1000 + i,
                            born_host=bytes([127, 0, 0, 1]) + i32(0))
    assert segment_bytes(batch)[:len(want)] == want
    assert [r.physical_offset for r in rs] == [0] + [sum(x.wrote_bytes for x in list(rs)[:i]) for i in range(1, 5)]


# ---- end of segment -------------------------------------------------------------------------------

def _record_size(body_len: int) -> int:
    return 88 + 4 - 4 + body_len + 1 + 1 + 2        # header (88, BODY length included) + body + topic "T" + props


def test_blank_record_when_a_record_does_not_fit(tmp_path):
    store = open_golden_store(tmp_path)
    first = store.put_message(Message(topic="T", body=b"a" * 60_000))
    assert first.wrote_bytes == _record_size(60_000)
    left = SEGMENT - first.wrote_bytes
    # needs left - 7 bytes with its 8-byte end marker: one byte too many, so it opens segment 2
    second = store.put_message(Message(topic="T", body=b"b" * (left - 7 - _record_size(0))))
    store.shutdown()
    seg0 = segment_bytes(tmp_path)
    assert seg0[first.wrote_bytes:first.wrote_bytes + 8] == i32(left) + BLANK_MAGIC      # size + 0xCBD43194
    assert second.physical_offset == SEGMENT and second.queue_offset == 1
    seg1 = segment_bytes(tmp_path, SEGMENT)
    assert seg1[:second.wrote_bytes] == hand_record(
        body=b"b" * (left - 7 - _record_size(0)), topic="T", props=b"", queue_id=0, queue_offset=1, phys=SEGMENT,
        born_ts=STORE_MS, born_host=bytes([127, 0, 0, 1]) + i32(0))
    assert check_record(seg0, first.wrote_bytes, SEGMENT, offset=first.wrote_bytes) == Blank(left)


def test_a_record_leaving_exactly_eight_bytes_fits_and_the_next_gets_an_eight_byte_blank(tmp_path):
    store = open_golden_store(tmp_path)
    first = store.put_message(Message(topic="T", body=b"a" * 1000))
    left = SEGMENT - first.wrote_bytes
    exact = store.put_message(Message(topic="T", body=b"c" * (left - 8 - _record_size(0))))
    assert exact.physical_offset == first.wrote_bytes and exact.wrote_bytes == left - 8
    third = store.put_message(Message(topic="T", body=b"d"))
    store.shutdown()
    seg0 = segment_bytes(tmp_path)
    assert seg0[SEGMENT - 8:] == i32(8) + BLANK_MAGIC
    assert third.physical_offset == SEGMENT and third.queue_offset == 2


def test_a_batch_never_straddles_segments(tmp_path):
    store = open_golden_store(tmp_path)
    first = store.put_message(Message(topic="T", body=b"a" * 63_000))
    rs = store.put_messages([Message(topic="T", body=b"x" * 300) for _ in range(5)])   # ~1.5 KiB, 2.4 KiB left
    store.put_messages([Message(topic="T", body=b"y" * 300) for _ in range(3)])
    store.shutdown()
    seg0 = segment_bytes(tmp_path)
    end = first.wrote_bytes + sum(r.wrote_bytes for r in rs)
    assert rs[0].physical_offset == first.wrote_bytes
    # the second batch (3 x 394 + 8 bytes) did not fit in what was left: blank, then segment 2
    assert seg0[end:end + 8] == i32(SEGMENT - end) + BLANK_MAGIC
    assert segment_bytes(tmp_path, SEGMENT)[28:36] == i64(SEGMENT)          # PHYSICALOFFSET of its first


# ---- F.2 consume-queue unit -----------------------------------------------------------------------

def test_stored_message_reads_in_place_at_any_position_of_a_shared_buffer(tmp_path):
    """Records back to back (IPv4 and IPv6 hosts mixed) read in place equal the same records copied out."""
    store = open_golden_store(tmp_path)
    v6 = HostAddress.parse("[2001:db8::1]:40000")
    results = [store.put_message(Message(topic=f"T{i}", body=bytes([i]) * i, tags=f"t{i}", keys=[f"k{i}"],
                                         born_host=v6 if i % 2 else HostAddress.parse("10.0.0.1:7")))
               for i in range(1, 6)]
    store.shutdown()
    raw = segment_bytes(tmp_path)
    for r in results:
        copied = StoredMessage(raw[r.physical_offset:r.physical_offset + r.wrote_bytes])
        in_place = StoredMessage(raw, r.physical_offset)
        assert in_place.raw == copied.raw and len(in_place.raw) == r.wrote_bytes
        assert in_place.to_dict() == copied.to_dict()
        assert (in_place.topic, in_place.tags, in_place.keys) == (copied.topic, copied.tags, copied.keys)


def test_consume_queue_units_are_offset_size_taghash(tmp_path):
    store = open_golden_store(tmp_path)
    tags = ["TagA", None, "标签", "polygenelubricants", ""]
    rs = [store.put_message(Message(topic="Q", body=b"x" * 10, tags=t)) for t in tags]
    store.shutdown()
    cq = (tmp_path / "consumequeue" / "Q" / "0" / f"{0:020d}").read_bytes()
    assert len(cq) == 100 * 20                                             # consume_queue_entries units
    want_codes = [2598919, 0, 857175, -2147483648, 0]      # String.hashCode from a JVM; no/empty tag -> 0
    for i, (r, code) in enumerate(zip(rs, want_codes)):
        assert cq[i * 20:(i + 1) * 20] == i64(r.physical_offset) + i32(r.wrote_bytes) + i64(code), i
    assert cq[len(rs) * 20:] == bytes(20 * (100 - len(rs)))
    units = __import__("numpy").frombuffer(cq[:len(rs) * 20], dtype=CQ_DTYPE)
    assert units["tag"].tolist() == want_codes and CQ_DTYPE.itemsize == 20


def test_schedule_topic_unit_holds_the_delivery_time(tmp_path):
    store = open_golden_store(tmp_path, message_delay_level="1s 2s")
    r = store.put_message(Message(topic="Real", body=b"later", tags="TagA", delay_level=2))
    store.shutdown()
    cq = (tmp_path / "consumequeue" / "SCHEDULE_TOPIC_XXXX" / "1" / f"{0:020d}").read_bytes()
    assert cq[:20] == i64(r.physical_offset) + i32(r.wrote_bytes) + i64(STORE_MS + 2000)


# ---- F.6 message ids ------------------------------------------------------------------------------

def test_offset_message_id_is_32_upper_hex_of_ip_port_offset(tmp_path):
    store = open_golden_store(tmp_path)
    store.put_message(Message(topic="T", body=b"a" * 63_000))
    r = store.put_message(Message(topic="T", body=b"b" * 5000))           # rolls to offset 65536
    store.shutdown()
    assert r.physical_offset == 0x10000
    assert r.msg_id == "0A000007" + "00002A9F" + "0000000000010000"
    assert offset_msg_id(HostAddress.parse("192.168.0.1:10911"), 0x0123456789AB) == \
        "C0A80001" "00002A9F" "00000123456789AB"
    assert decode_offset_msg_id("C0A8000100002A9F00000123456789AB") == \
        (HostAddress(bytes([192, 168, 0, 1]), 10911), 0x0123456789AB)
    assert decode_offset_msg_id("c0a8000100002a9f00000123456789ab")[1] == 0x0123456789AB   # lower case read too


# ---- F.4 checkpoint -------------------------------------------------------------------------------

def test_checkpoint_page_layout():
    page = Checkpoint(physic_msg_timestamp=1, logics_msg_timestamp=2, index_msg_timestamp=3,
                      master_flushed_offset=4, confirm_phy_offset=5, physic_flushed_offset=6,
                      logics_flushed_offset=7).encode()
    assert len(page) == CHECKPOINT_SIZE == 4096
    assert page[:56] == b"".join(i64(v) for v in range(1, 8)) and page[56:] == bytes(4096 - 56)
    assert Checkpoint.decode(page) == Checkpoint(1, 2, 3, 4, 5, 6, 7)
    assert Checkpoint.decode(page[:24]) == Checkpoint(1, 2, 3, 0, 0, 0, 0)     # a 4.x three-field page


def test_checkpoint_file_written_by_a_clean_shutdown(tmp_path):
    store = open_golden_store(tmp_path)
    rs = [store.put_message(Message(topic="T", body=b"x" * 100)) for _ in range(3)]
    store.shutdown()
    end = rs[-1].physical_offset + rs[-1].wrote_bytes
    page = (tmp_path / "checkpoint").read_bytes()
    assert len(page) == 4096
    assert page[0:8] == i64(STORE_MS)           # physicMsgTimestamp: store time of the last flushed record
    assert page[8:16] == i64(STORE_MS)          # logicsMsgTimestamp
    assert page[16:24] == i64(0)                # indexMsgTimestamp (index disabled)
    assert page[24:40] == bytes(16)             # HA fields
    assert page[40:48] == i64(end)              # physicFlushedOffset
    assert page[48:56] == i64(end)              # logicsFlushedOffset
    assert page[56:] == bytes(4096 - 56)
    cp = CheckpointFile(tmp_path / "checkpoint")
    assert cp.existed and cp.value.physic_flushed_offset == end
    cp.close()


# ---- properties string ----------------------------------------------------------------------------

def test_properties_string_has_a_trailing_separator():
    assert encode_properties({"a": "1", "KEYS": "k1 k2"}) == "a\x011\x02KEYS\x01k1 k2\x02"
    assert encode_properties({}) == ""
    assert decode_properties("a\x011\x02KEYS\x01k1 k2\x02") == {"a": "1", "KEYS": "k1 k2"}
    assert decode_properties("a\x011\x02b\x012") == {"a": "1", "b": "2"}          # without the trailing one
    assert decode_properties("junk\x02a\x011\x02") == {"a": "1"}                  # items without \x01 ignored
    m = CommonMessage(topic="T", tags="TagA", keys=["k1", "k2"], properties={"UNIQ_KEY": "U"}, delay_level=3)
    assert m.properties_string() == "UNIQ_KEY\x01U\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02DELAY\x013\x02"
    for bad in ({"a\x01": "1"}, {"a": "1\x02"}, {"a": "x\x01y"}):
        with pytest.raises(IllegalPropertyError):
            encode_properties(bad)


# ---- Java String.hashCode -------------------------------------------------------------------------

@pytest.mark.parametrize("text, want", [
    ("", 0),
    ("a", 97),
    ("Aa", 2112), ("BB", 2112),                        # the classic collision
    ("TagA", 2598919),                                 # 84*31^3 + 97*31^2 + 103*31 + 65
    ("hello world", 1794106052),
    ("polygenelubricants", -2147483648),               # wraps to Integer.MIN_VALUE
    ("ä", 228),                                        # one UTF-16 unit, not the two UTF-8 bytes
    ("ä€", 228 * 31 + 8364),                           # = 15432
    ("中文", 0x4E2D * 31 + 0x6587),                     # = 646394
    ("😀", 0xD83D * 31 + 0xDE00),                       # surrogate pair: two units (1772899), not 0x1F600
])
def test_java_hash_known_values(text, want):
    assert java_hash(text) == want
    assert _native.java_hash(text) == want


def test_index_hash_is_abs_with_min_value_mapped_to_zero():
    assert index_hash("polygenelubricants") == 0
    assert index_hash("T#k1") == 2539445
    neg = next(s for s in (f"key{i}" for i in range(1000)) if java_hash(s) < 0)
    assert index_hash(neg) == -java_hash(neg)
    assert tag_hash(None) == 0 and tag_hash("") == 0 and tag_hash("TagA") == 2598919


def _reference_hash(s: str) -> int:
    units = struct.unpack(f"<{len(s.encode('utf-16-le')) // 2}H", s.encode("utf-16-le"))
    h = 0
    for u in units:
        h = (h * 31 + u) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


def test_native_java_hash_matches_the_reference_on_random_strings():
    seed = new_seed()
    rng = random.Random(seed)
    alphabet = "abcXYZ019#%_- " + "äöü€中文标签" + "😀𝄞"
    for trial in range(20):
        strings = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40))) for _ in range(50)]
        prefix = rng.choice(["", "Topic#", "主题#"])
        want = [_reference_hash(prefix + s) for s in strings]
        assert [_native.java_hash(prefix + s) for s in strings] == want, f"seed {seed} trial {trial}"
        assert [java_hash(prefix + s) for s in strings] == want, f"seed {seed} trial {trial}"


def test_check_record_names_what_is_wrong():
    good = hand_record(body=b"abc", topic="T", props=b"", queue_id=0, queue_offset=0, phys=100, born_ts=1,
                       born_host=bytes(8))
    assert check_record(good, 0, len(good), offset=100) == len(good)
    with pytest.raises(RecordError, match="physical offset 100"):
        check_record(good, 0, len(good), offset=200)
    flipped = bytearray(good)
    flipped[88] ^= 1                                      # first body byte
    with pytest.raises(RecordError, match="body CRC"):
        check_record(bytes(flipped), 0, len(good), offset=100)
    with pytest.raises(RecordError, match="bad magic"):
        check_record(bytes(4) + b"\x00\x00\x00\x01" + good[8:], 0, len(good), offset=100)


@pytest.mark.parametrize("count", [5, 40])          # formatted one by one, and vectorised
@pytest.mark.parametrize("host", ["10.1.2.3:10911", "[2001:db8::7]:10911"])
def test_batch_message_ids_are_the_offset_ids_of_each_record(tmp_path, host, count):
    store = open_golden_store(tmp_path, store_host=host)
    store.put_messages([Message(topic="T", body=b"y" * 70_000)] * 300)     # offsets past 2**24
    rs = store.put_messages([Message(topic="T", body=b"x" * (i + 1)) for i in range(count)])
    store.shutdown()
    assert rs.msg_ids == [offset_msg_id(HostAddress.parse(host), r.physical_offset) for r in rs]
    assert rs.joined_msg_ids() == ",".join(rs.msg_ids)
    assert [decode_offset_msg_id(m)[1] for m in rs.msg_ids] == [r.physical_offset for r in rs]


def test_message_ids_of_an_empty_or_failed_batch():
    from rocketq.store.results import BatchPutResult, PutStatus
    host = HostAddress.parse("10.1.2.3:10911")
    assert BatchPutResult(PutStatus.PUT_OK, store_host=host).msg_ids == []
    failed = BatchPutResult(PutStatus.MESSAGE_ILLEGAL, count=40, store_host=host)
    assert failed.msg_ids == [offset_msg_id(host, -1)] * 40
