"""The fused walk and decode (`_native.walk_columns`, the Spark sources' one pass) against the walk of
the reference (:func:`reference.scan`) followed by the decoder at the positions it found (itself held to
:class:`StoredMessage` in test_columns.py), on generated logs that are cut, zero-padded, closed by a
blank record and damaged at random; in chunks of any size, with and without a row filter.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import Rec, encode_log, scan

pa = pytest.importorskip("pyarrow")

from rocketq import _native  # noqa: E402
from rocketq.spark.decode import STORE_SCHEMA, TOPIC_SCHEMA, DecodeError, decode, decode_body, walked_batch  # noqa: E402,E501

BASE = 1 << 20
STORE_MS = 1_800_000_000_000
TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=5)


@st.composite
def records(draw):
    props = "".join(f"{name}\x01{draw(TEXT)}\x02" for name in draw(st.lists(
        st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a"]), max_size=3)))
    body = draw(st.binary(max_size=40))
    flag = draw(st.sampled_from([0, 0, 0x1]))
    if flag:
        body = zlib.compress(body)
    ip = draw(st.sampled_from([bytes([10, 0, 0, 1]), bytes(15) + b"\x01"]))
    return Rec(draw(st.sampled_from(["T", "Topic_2"])), draw(st.integers(0, 3)), 0, flag, 1 << 40, ip, 7, 0, 0,
               body, props.encode())


def _log(recs, data) -> bytes:
    """One log of *recs* (store times STORE_MS + 0..3 ms), then maybe zeros or a closing blank record,
    then maybe damaged bytes and a cut."""
    parts, phys = [], BASE
    for r in recs:
        raw, _ = encode_log([r], phys=phys, store_ts=STORE_MS + data.draw(st.integers(0, 3)),
                            store_ip=data.draw(st.sampled_from([bytes(4), bytes(16)])), store_port=10911,
                            next_offsets={})
        parts.append(raw)
        phys += len(raw)
    log = bytearray(b"".join(parts))
    tail = data.draw(st.sampled_from(["none", "zeros", "blank"]))
    if tail == "zeros":
        log += bytes(data.draw(st.integers(1, 40)))
    elif tail == "blank":
        n = data.draw(st.integers(8, 40))
        log += struct.pack(">iI", n, 0xCBD43194) + bytes(n - 8)
    for _ in range(data.draw(st.integers(0, 2)) if log else 0):
        at = data.draw(st.integers(0, len(log) - 1))
        log[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        log = log[:data.draw(st.integers(0, len(log)))]
    return bytes(log)


def _table(batches, schema=STORE_SCHEMA) -> pa.Table:
    """Compared as Arrow data: damaged timestamps may be out of Python's datetime range."""
    return pa.Table.from_batches(list(batches), schema=schema)


def _walked(buf, hi, max_rows, check_crc, **keep):
    """Every walk_columns call from 0 until it ends: (batches, end, error)."""
    rows, pos = [], 0
    while True:
        cols = _native.walk_columns(buf, BASE, pos, hi, len(buf), max_rows, check_crc=check_crc, **keep)
        assert cols["rows"] <= max_rows
        if cols["rows"]:
            rows.append(walked_batch(cols, "b"))
        assert cols["end"] >= pos
        pos = cols["end"]
        if not cols["more"] or cols["error"] is not None:
            return rows, pos, cols["error"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(records(), min_size=0, max_size=16), data=st.data())
def test_walk_columns_equals_the_reference_walk_then_the_decoder(recs, data):
    buf = _log(recs, data)
    check_crc = data.draw(st.booleans())
    hi = data.draw(st.integers(0, len(buf)))
    max_rows = data.draw(st.integers(1, 6))
    topics = data.draw(st.none() | st.sampled_from([["T"], ["Topic_2", "X"]]))
    lo_ms = data.draw(st.none() | st.integers(STORE_MS, STORE_MS + 3))
    keep = dict(topics=topics, min_store_ms=lo_ms, max_store_ms=None)

    rows, end, error = _walked(buf, hi, max_rows, check_crc, **keep)

    r_pos, _sizes, r_end, _blank, r_error = scan(buf, BASE, 0, len(buf), check_crc=check_crc, torn_from=None)
    mine = [p for p in r_pos if p < hi]
    want = decode(buf, BASE, np.array(mine, dtype=np.int64), np.zeros(len(mine)), broker="b", store_columns=True,
                  topics=None if topics is None else frozenset(topics), min_store_ms=lo_ms)
    assert _table(rows).equals(_table(want))
    assert end == next((p for p in r_pos + [r_end] if p >= hi), r_end)   # the first record at or past hi
    if r_error is not None and r_end < hi:             # damage in the range: named where the walk stopped
        assert error is not None and error[0] == r_error
    else:
        assert error is None


def test_a_chunk_whose_one_topic_is_not_utf8_decodes_as_the_decoder_does():
    """A damaged topic byte (not covered by the body CRC) in a chunk of one topic: the shared topic
    column keeps the bytes unchecked, as the per-row decoder's column does, instead of failing."""
    log, _ = encode_log([Rec("T", 0, 0, 0, 1, bytes(4), 1, 0, 0, b"body", b"")] * 2, phys=BASE, store_ts=STORE_MS,
                        store_ip=bytes(4), store_port=1, next_offsets={})
    damaged = bytearray(log)
    size = len(log) // 2
    for record in (0, size):
        damaged[damaged.index(b"\x01T", record) + 1] = 0x80      # topic length 1, then the topic
    rows, end, error = _walked(bytes(damaged), len(log), 6, True, topics=None, min_store_ms=None, max_store_ms=None)
    want = decode(bytes(damaged), BASE, np.array([0, size], dtype=np.int64), np.zeros(2), broker="b",
                  store_columns=True)
    assert (end, error) == (len(log), None)
    assert _table(rows).equals(_table(want))
    assert rows[0].column("topic").buffers()[2].to_pybytes() == b"\x80\x80"


def test_the_first_chunk_comes_back_without_walking_the_rest():
    recs = [Rec("T", 0, 0, 0, 1, bytes(4), 1, 0, 0, b"x" * 10, b"KEYS\x01k\x02")] * 10
    log, _ = encode_log(recs, phys=BASE, store_ts=STORE_MS, store_ip=bytes(4), store_port=1, next_offsets={})
    damaged = bytearray(log)
    size = len(log) // 10
    damaged[size * 5 + 4] ^= 0xFF                       # the 6th record's magic
    cols = _native.walk_columns(bytes(damaged), BASE, 0, len(log), len(log), 3, check_crc=True)
    assert (cols["rows"], cols["end"], cols["more"], cols["error"]) == (3, 3 * size, True, None)
    cols = _native.walk_columns(bytes(damaged), BASE, 3 * size, len(log), len(log), 3, check_crc=True)
    assert (cols["rows"], cols["end"], cols["more"]) == (2, 5 * size, False)
    assert cols["error"][0] == BASE + 5 * size and "magic" in cols["error"][1]


def test_walk_columns_refuses_ranges_outside_the_buffer():
    with pytest.raises(ValueError, match="outside the buffer"):
        _native.walk_columns(b"\0" * 16, 0, 0, 16, 17, 1, check_crc=False)
    with pytest.raises(ValueError, match="past limit"):
        _native.walk_columns(b"\0" * 16, 0, 9, 16, 8, 1, check_crc=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(records(), min_size=1, max_size=12), phys=st.integers(0, 1 << 40),
       max_rows=st.integers(1, 20))
def test_a_pulled_body_decodes_as_its_records_whatever_their_log_offsets(recs, phys, max_rows):
    body, _ = encode_log(recs, phys=phys, store_ts=STORE_MS, store_ip=bytes(4), store_port=1, next_offsets={})
    r_pos, _sizes, _end, _blank, _error = scan(body, phys, 0, len(body), check_crc=False, torn_from=None)
    want = decode(body, 0, np.array(r_pos, dtype=np.int64), np.zeros(len(r_pos)), broker="b", store_columns=False)
    batches = decode_body(body, broker="b", max_rows=max_rows)
    assert all(b.num_rows <= max_rows for b in batches)
    assert _table(batches, TOPIC_SCHEMA).equals(_table(want, TOPIC_SCHEMA))


def test_a_pulled_body_with_bytes_that_are_no_record_is_refused_naming_where():
    body, _ = encode_log([Rec("T", 0, 0, 0, 1, bytes(4), 1, 0, 0, b"x", b"")] * 2, phys=0, store_ts=5,
                         store_ip=bytes(4), store_port=1, next_offsets={})
    with pytest.raises(DecodeError, match=f"record at byte {len(body) // 2}"):
        decode_body(body[:len(body) // 2] + b"\xff" * (len(body) // 2), broker=None, max_rows=10)
    with pytest.raises(DecodeError, match="ends in 3 bytes that are no record"):
        decode_body(body + b"\0\0\0", broker=None, max_rows=10)
