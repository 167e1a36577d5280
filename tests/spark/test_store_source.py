"""format("rocketq-store") and the Arrow decoder it shares with format("rocketq").

The decoder is checked against the store's own record parser (StoredMessage) record by record,
for IPv4 and IPv6 hosts, compressed and empty-property records; the Spark source against what
was put, with segments split into ranges, filters, and a damaged record.
"""

from __future__ import annotations

import itertools
import os
import random
import zlib

import pyarrow as pa
import pytest

from rocketq.common.message import Message
from rocketq.common.msgid import HostAddress
from rocketq.common.sysflag import COMPRESSED
from rocketq.spark.decode import STORE_SCHEMA, decode
from rocketq.spark.segments import list_segments
from rocketq.spark.store_reader import DataLossError, read_range
from rocketq.store import StoreConfig
from rocketq.store.message_store import MessageStore
from rocketq.store.record import StoredMessage
from rocketq.store.scan import scan_segment

SEGMENT = 1 << 20


def _write_store(path, count: int, *, seed: int, ipv6_every: int = 0) -> list[Message]:
    rnd = random.Random(seed)
    store = MessageStore(StoreConfig(store_path=path, commitlog_file_size=SEGMENT, consume_queue_entries=10_000,
                                     index_slots=1009, index_max_entries=50_000)).start()
    msgs = []
    try:
        for i in range(count):
            body = rnd.randbytes(rnd.choice([1, 12, 13, 100, 700]))
            m = Message(f"Store{i % 3}", body, queue_id=i % 4, tags=f"t{i % 5}" if i % 6 else None,
                        keys=f"k{i} x{i}" if i % 2 else None, properties={"UNIQ_KEY": f"U{i:08d}"} if i % 7 else {})
            if ipv6_every and i % ipv6_every == 0:
                m.born_host = HostAddress.parse("[::1]:4321")
            if i % 11 == 0:
                m.body, m.sys_flag = zlib.compress(body), COMPRESSED
            msgs.append((m, body))
            result = store.put_message(m)
            assert result.ok
    finally:
        store.shutdown()
    return [m for m, _ in msgs], [b for _, b in msgs]


def test_decoder_agrees_with_the_record_parser_field_by_field(tmp_path):
    seed = random.randrange(1 << 30)
    print("seed", seed)
    _, bodies = _write_store(tmp_path, 3000, seed=seed, ipv6_every=13)
    seen = 0
    for seg in list_segments(str(tmp_path)):
        buf = open(seg.path, "rb").read()
        scan = scan_segment(buf, seg.base, 0, len(buf), check_crc=True)
        batches = decode(buf, seg.base, scan.positions, scan.sizes, broker="b1", store_columns=True)
        assert all(b.schema == STORE_SCHEMA for b in batches)
        rows = {r["physical_offset"]: r for b in batches for r in b.to_pylist()}
        for p, s in zip(scan.positions.tolist(), scan.sizes.tolist()):
            m = StoredMessage(buf[p:p + s])
            r = rows[m.physical_offset]
            i = int(m.properties.get("KEYS", "k-1").split()[0][1:]) if m.properties.get("KEYS") else None
            assert r["topic"] == m.topic and r["queue_id"] == m.queue_id and r["queue_offset"] == m.queue_offset
            assert dict(r["properties"]) == m.properties
            assert r["tags"] == m.tags and r["keys"] == m.properties.get("KEYS")
            assert r["msg_id"] == (m.uniq_key or m.msg_id) and r["sysflag"] == m.sys_flag
            assert r["broker"] == "b1" and r["reconsume_times"] == 0
            assert int(r["store_timestamp"].timestamp() * 1000) == m.store_timestamp
            body = zlib.decompress(m.body) if m.sys_flag & COMPRESSED else m.body
            assert r["body"] == body
            if i is not None:
                assert body == bodies[i]
            seen += 1
        # the source's own path (walk and decode in one pass, in chunks) gives the same rows
        for chunk in (7, 65_536):
            walked = [r for b in read_range(seg, 0, seg.size, max_record=4 << 20, broker="b1", chunk_records=chunk)
                      for r in b.to_pylist()]
            assert walked == [r for b in batches for r in b.to_pylist()]
    assert seen == 3000


def test_decode_of_an_empty_range_is_no_batches():
    assert decode(b"", 0, [], [], broker=None, store_columns=False) == []


def test_store_source_reads_what_was_put_with_split_ranges_and_filters(spark, tmp_path):
    msgs, bodies = _write_store(tmp_path, 4000, seed=7)
    df = spark.read.format("rocketq-store").option("maxBytesPerPartition", str(1 << 20)).load(str(tmp_path))
    segments = list_segments(str(tmp_path))
    assert df.rdd.getNumPartitions() == len(segments) > 1
    whole = spark.read.format("rocketq-store").option("maxBytesPerPartition", str(1 << 20))
    split = spark.read.format("rocketq-store").option("maxBytesPerPartition", str(1 << 20))
    rows = split.load(str(tmp_path)).select("physical_offset", "body", "topic").collect()
    assert len(rows) == 4000 and len({r.physical_offset for r in rows}) == 4000
    assert sorted(r.body for r in rows) == sorted(bodies)
    assert whole.load(str(tmp_path)).count() == 4000

    # ranges smaller than a segment: every record is read once, by the range it starts in
    from rocketq.spark.store_source import plan_ranges
    ranges = plan_ranges(segments, 100_000)
    offsets = [r["physical_offset"] for part in ranges
               for b in read_range(part.segment, part.lo, part.hi, max_record=4 << 20)
               for r in b.select(["physical_offset"]).to_pylist()]
    assert len(offsets) == 4000 and len(set(offsets)) == 4000

    only = spark.read.format("rocketq-store").load(str(tmp_path)).where("topic = 'Store1'")
    assert only.count() == len([m for m in msgs if m.topic == "Store1"])
    assert spark.read.format("rocketq-store").option("topics", "Store2").load(str(tmp_path)).count() == \
        len([m for m in msgs if m.topic == "Store2"])
    later = spark.read.format("rocketq-store").option("startingTimestamp", str(2 ** 42)).load(str(tmp_path))
    assert later.count() == 0


def test_a_damaged_record_fails_the_read_naming_file_and_offset_or_is_skipped(spark, tmp_path):
    _write_store(tmp_path, 500, seed=3)
    seg = list_segments(str(tmp_path))[0]
    buf = open(seg.path, "rb").read()
    scan = scan_segment(buf, seg.base, 0, len(buf), check_crc=True)
    victim = int(scan.positions[200])
    with open(seg.path, "r+b") as f:                         # flip a byte in the body of record 200
        f.seek(victim + 90)
        byte = f.read(1)
        f.seek(victim + 90)
        f.write(bytes([byte[0] ^ 0xFF]))

    with pytest.raises(DataLossError) as e:
        list(read_range(seg, 0, seg.size, max_record=4 << 20))
    assert seg.path in str(e.value) and f"commitlog offset {seg.base + victim}" in str(e.value)

    df = spark.read.format("rocketq-store").load(str(tmp_path))
    with pytest.raises(Exception) as e:
        df.count()
    assert f"commitlog offset {seg.base + victim}" in str(e.value) and "failOnDataLoss" in str(e.value)
    lenient = spark.read.format("rocketq-store").option("failOnDataLoss", "false").load(str(tmp_path))
    assert lenient.count() == 499


def test_a_path_that_is_not_a_store_is_refused_by_name(spark, tmp_path):
    with pytest.raises(Exception) as e:
        spark.read.format("rocketq-store").load(str(tmp_path / "missing")).count()
    assert "does not exist" in str(e.value)
    os.makedirs(tmp_path / "empty")
    with pytest.raises(Exception) as e:
        spark.read.format("rocketq-store").load(str(tmp_path / "empty")).count()
    assert "has no commitlog directory" in str(e.value)


def test_store_source_reads_a_live_servers_store(spark, server):
    from spark_helpers import produce
    produce(server.namesrv, "SparkStoreLive", 300)
    rows = spark.read.format("rocketq-store").option("topics", "SparkStoreLive").load(str(server.store)).collect()
    assert len(rows) == 300 and {r.queue_id for r in rows} <= {0, 1, 2, 3}
    assert pa.array([r.body for r in rows]).null_count == 0


def test_ranges_are_equal_and_their_count_fills_the_last_wave_of_tasks():
    from rocketq.spark.segments import Segment
    from rocketq.spark.store_source import MIN_SPLIT_BYTES, plan_ranges
    mib = 1 << 20
    one = [Segment("s0", 0, 570 * mib)]
    ranges = plan_ranges(one, 128 * mib, slots=2)
    assert len(ranges) == 6                              # 5 ranges of <= 128 MiB would leave a core idle
    assert [(r.lo, r.hi) for r in ranges] == [(570 * mib * j // 6, 570 * mib * (j + 1) // 6) for j in range(6)]
    assert len(plan_ranges(one, 128 * mib, slots=1)) == 5
    assert max(r.hi - r.lo for r in plan_ranges(one, 128 * mib, slots=1)) <= 128 * mib
    several = [Segment("a", 0, 1024 * mib), Segment("b", 1024 * mib, 300 * mib), Segment("c", 1324 * mib, 0)]
    ranges = plan_ranges(several, 256 * mib, slots=4)
    assert len(ranges) % 4 == 0
    for seg in several:                                   # each segment covered once, in order, no gaps
        mine = [(r.lo, r.hi) for r in ranges if r.segment is seg]
        assert mine[0][0] == 0 and mine[-1][1] == seg.size
        assert all(a[1] == b[0] for a, b in itertools.pairwise(mine))
    small = [Segment("s", 0, 6 * mib)]                    # not cut below MIN_SPLIT_BYTES to even out waves
    assert len(plan_ranges(small, 256 * mib, slots=2)) == 1 and 6 * mib // 2 < MIN_SPLIT_BYTES
    live = [Segment("l", 0, 1024 * mib, written=600 * mib)]   # preallocated: tasks for the data, not the zeros
    ranges = plan_ranges(live, 128 * mib, slots=2)
    assert len(ranges) == 6 and ranges[0].hi == 100 * mib and ranges[-1].hi == 1024 * mib


def test_a_segment_knows_where_its_data_ends_and_a_short_hint_loses_nothing(tmp_path):
    import dataclasses

    from rocketq.spark.segments import written_extent
    from rocketq.spark.store_source import plan_ranges
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.write(b"x" * (1 << 20))
        f.truncate(8 << 20)
    assert written_extent(str(sparse)) == 1 << 20        # the hole, or where holes are unknown the zeros

    _write_store(tmp_path / "store", 2000, seed=5)
    segments = [dataclasses.replace(s, written=s.size // 5) for s in list_segments(str(tmp_path / "store"))]
    offsets = [r["physical_offset"] for part in plan_ranges(segments, 1 << 20, slots=3)
               for b in read_range(part.segment, part.lo, part.hi, max_record=4 << 20)
               for r in b.select(["physical_offset"]).to_pylist()]
    assert len(offsets) == 2000 and len(set(offsets)) == 2000


def test_zeros_written_after_the_data_get_no_tasks_so_every_task_reads_its_share(tmp_path):
    """A broker prefaults up to ~72 MiB of zeros ahead of its writer (allocated: SEEK_HOLE does not
    see them); planned over them, the last task of the 2M-message benchmark read a third of the
    records the others read and the last wave of tasks ran on one core."""
    from rocketq.spark.segments import (
        ZERO_SCAN_BLOCK_BYTES,
        ZERO_SCAN_MAX_BYTES,
        written_extent,
    )
    from rocketq.spark.store_source import plan_ranges
    _write_store(tmp_path / "store", 3000, seed=9)
    (seg,) = list_segments(str(tmp_path / "store"))
    with open(seg.path, "rb") as f:
        data = len(f.read().rstrip(b"\0"))                       # the records, then the segment's zeros
    grown = tmp_path / "grown" / "commitlog"
    grown.mkdir(parents=True)
    with open(seg.path, "rb") as src, open(grown / os.path.basename(seg.path), "wb") as out:
        out.write(src.read()[:data])
        out.write(bytes(3 * ZERO_SCAN_BLOCK_BYTES + 12345))       # written zeros, no hole
    (big,) = list_segments(str(tmp_path / "grown"))
    assert big.written == data
    ranges = plan_ranges([big], 128 << 20, slots=3)
    rows = [sum(b.num_rows for b in read_range(r.segment, r.lo, r.hi, max_record=4 << 20)) for r in ranges]
    assert sum(rows) == 3000 and max(rows) - min(rows) < 3000 // 10, rows
    warm = tmp_path / "warm"                                     # zeros past the scan's limit: the hole stays
    with open(warm, "wb") as f:
        f.write(b"x")
        f.write(bytes(ZERO_SCAN_MAX_BYTES + ZERO_SCAN_BLOCK_BYTES))
    assert written_extent(str(warm)) == ZERO_SCAN_MAX_BYTES + ZERO_SCAN_BLOCK_BYTES + 1
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert written_extent(str(empty)) == 0
