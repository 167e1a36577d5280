"""The native Arrow columns of records against :class:`StoredMessage`, field by field.

Records come from the reference encoder: any properties (odd items without a separator, empty
values, a UNIQ_KEY or none), IPv4/IPv6 hosts, bodies compressed with each codec a sysflag names.
"""

from __future__ import annotations

import zlib

import lz4.frame
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import zstandard
from reference import Rec, encode_log

pa = pytest.importorskip("pyarrow")

from rocketq.common.properties import decode_properties  # noqa: E402
from rocketq.spark.decode import decode  # noqa: E402
from rocketq.store.record import StoredMessage  # noqa: E402
from rocketq.store.scan import split_records  # noqa: E402

TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=6)
# long enough to take a properties string past 96 bytes, where the native split switches to SIMD
LONG_TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=40,
                    max_size=80)


# a body as each codec's producer writes it (by sysflag), and back
COMPRESS = {0x1: zlib.compress, 0x301: zlib.compress, 0x101: lz4.frame.compress,
            0x201: zstandard.ZstdCompressor().compress}
DECOMPRESS = {0x1: zlib.decompress, 0x301: zlib.decompress, 0x101: lz4.frame.decompress,
              0x201: lambda b: zstandard.ZstdDecompressor().decompressobj().decompress(b)}

@st.composite
def records(draw):
    items = draw(st.lists(st.sampled_from(["pair", "odd", "tags", "keys", "uniq", "empty_uniq", "long"]), max_size=5))
    text = ""
    for item in items:
        if item == "pair":
            text += f"{draw(TEXT)}\x01{draw(TEXT)}\x02"
        elif item == "long":
            text += f"{draw(TEXT)}\x01{draw(LONG_TEXT)}\x02"
        elif item == "odd":
            text += f"{draw(TEXT)}\x02"
        else:
            name = {"tags": "TAGS", "keys": "KEYS", "uniq": "UNIQ_KEY", "empty_uniq": "UNIQ_KEY"}[item]
            text += f"{name}\x01{'' if item == 'empty_uniq' else draw(TEXT)}\x02"
    body = draw(st.binary(max_size=60))
    flag = draw(st.sampled_from([0, 0x1, 0x301, 0x101, 0x201]))    # plain, zlib (4.x, 5.x), LZ4, ZSTD
    if flag:
        body = COMPRESS[flag](body)
    ip = draw(st.sampled_from([bytes([10, 0, 0, 1]), bytes(15) + b"\x01"]))
    return Rec(draw(st.sampled_from(["T", "Topic_2"])), draw(st.integers(0, 3)), 0, flag, draw(st.integers(1, 1 << 41)),
               ip, 7, draw(st.integers(0, 5)), 0, body, text.encode())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(records(), min_size=1, max_size=20), store_ip=st.sampled_from([bytes(4), bytes(16)]))
def test_columns_equal_stored_messages(recs, store_ip):
    log, _ = encode_log(recs, phys=4096, store_ts=1_800_000_000_250, store_ip=store_ip, store_port=10911,
                        next_offsets={})
    positions, sizes, _ = split_records(log)
    (batch,) = decode(log, 0, positions, sizes, broker="b1", store_columns=True)
    got = batch.to_pylist()
    for row, pos in zip(got, positions.tolist()):
        m = StoredMessage(log, pos)
        props = decode_properties(m.properties_string)
        body = DECOMPRESS[m.sys_flag & 0x701](m.body) if m.sys_flag & 1 else m.body
        want = {"topic": m.topic, "broker": "b1", "queue_id": m.queue_id, "queue_offset": m.queue_offset,
                "keys": props.get("KEYS"), "tags": props.get("TAGS"), "body": body,
                "properties": list(props.items()), "msg_id": props.get("UNIQ_KEY") or m.msg_id,
                "reconsume_times": m.reconsume_times, "physical_offset": m.physical_offset, "sysflag": m.sys_flag}
        assert {k: row[k] for k in want} == want
        assert row["born_timestamp"].timestamp() * 1000 == pytest.approx(m.born_timestamp)
        assert row["store_timestamp"].timestamp() * 1000 == pytest.approx(m.store_timestamp)


def test_columns_name_a_position_that_is_no_record():
    log, _ = encode_log([Rec("T", 0, 0, 0, 1, bytes(4), 1, 0, 0, b"x", b"")] * 2, phys=0, store_ts=5,
                        store_ip=bytes(4), store_port=1, next_offsets={})
    from rocketq.spark.decode import DecodeError
    with pytest.raises(DecodeError, match="position 3"):
        decode(log, 0, np.array([0, 3]), np.array([0, 0]), broker=None, store_columns=False)


def _log_with_store_times(recs_and_ms: list, base_ms: int) -> bytes:
    """Records one after another in one log, each with its own store time (*base_ms* + its delta)."""
    parts, phys = [], 4096
    for rec, delta in recs_and_ms:
        raw, _ = encode_log([rec], phys=phys, store_ts=base_ms + delta, store_ip=bytes(4), store_port=10911,
                            next_offsets={})
        parts.append(raw)
        phys += len(raw)
    return b"".join(parts)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(st.tuples(records(), st.integers(0, 5)), min_size=1, max_size=20),
       topics=st.none() | st.frozensets(st.sampled_from(["T", "Topic_2", "Other"])),
       lo=st.none() | st.integers(0, 6), hi=st.none() | st.integers(0, 6))
def test_the_native_row_filter_keeps_exactly_the_rows_the_reference_keeps(recs, topics, lo, hi):
    base = 1_800_000_000_000
    log = _log_with_store_times(recs, base)
    positions, sizes, _ = split_records(log)
    lo_ms, hi_ms = (None if lo is None else base + lo), (None if hi is None else base + hi)
    got = [r for b in decode(log, 0, positions, sizes, broker=None, store_columns=True, topics=topics,
                             min_store_ms=lo_ms, max_store_ms=hi_ms) for r in b.to_pylist()]
    every = [r for b in decode(log, 0, positions, sizes, broker=None, store_columns=True) for r in b.to_pylist()]
    kept = []
    for row, pos in zip(every, positions.tolist()):
        m = StoredMessage(log, pos)
        if (topics is None or m.topic in topics) and (lo_ms is None or m.store_timestamp >= lo_ms) \
                and (hi_ms is None or m.store_timestamp < hi_ms):
            kept.append(row)
    assert got == kept                   # whole rows: inflated bodies stay with their own row


def test_column_buffers_are_read_only_buffer_exports():
    from rocketq import _native
    log, _ = encode_log([Rec("T", 0, 0, 0, 1, bytes(4), 1, 0, 0, b"xyz", b"")], phys=0, store_ts=5,
                        store_ip=bytes(4), store_port=1, next_offsets={})
    cols = _native.record_columns(log, np.array([0], dtype=np.int64))
    assert cols["rows"] == cols["consumed"] == 1
    body = cols["body"][2]
    view = memoryview(body)
    assert view.readonly and bytes(view) == b"xyz" and len(body) == 3
    with pytest.raises(TypeError):
        view[0] = 0
    assert pa.py_buffer(body).address == np.frombuffer(body, dtype=np.uint8).ctypes.data
    assert np.frombuffer(cols["queue_offset"], dtype="<i8").tolist() == [0]


def test_consumed_counts_the_positions_a_filter_dropped():
    from rocketq import _native
    recs = [Rec(t, 0, 0, 0, 1, bytes(4), 1, 0, 0, b"b", b"") for t in ("A", "B", "A")]
    log, _ = encode_log(recs, phys=0, store_ts=5, store_ip=bytes(4), store_port=1, next_offsets={})
    positions, _, _ = split_records(log)
    cols = _native.record_columns(log, positions, ["B"])
    assert (cols["rows"], cols["consumed"], cols["error"]) == (1, 3, None)


@pytest.mark.parametrize("value_len", [1, 30, 95, 96, 200])
def test_properties_split_alike_below_and_above_the_simd_length(value_len):
    """Short properties strings are split byte by byte, long ones with SIMD: the same pairs."""
    text = (f"KEYS\x01k\x02odd\x02A\x01{'v' * value_len}\x02\x01nameless\x02A\x01last\x01wins\x02"
            f"UNIQ_KEY\x01{'u' * value_len}\x02TAGS\x01t")
    log, _ = encode_log([Rec("T", 0, 0, 0, 1, bytes(4), 1, 0, 0, b"x", text.encode())], phys=0, store_ts=5,
                        store_ip=bytes(4), store_port=1, next_offsets={})
    (batch,) = decode(log, 0, np.array([0]), np.array([len(log)]), broker=None, store_columns=False)
    row = batch.to_pylist()[0]
    assert row["properties"] == list(decode_properties(text).items())
    assert (row["keys"], row["tags"], row["msg_id"]) == ("k", "t", "u" * value_len)
