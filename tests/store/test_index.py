"""IndexFile / IndexService: RocketMQ's exact bytes, chains, rolling, recovery, speed.

The reference model below is a literal per-key transcription of RocketMQ's ``IndexFile.putKey`` and
``selectPhyOffset`` over a bytearray; the vectorised code must leave the same bytes and answer the
same queries.
"""

from __future__ import annotations

import errno
import os
import random
import struct
import time

import numpy as np
import pytest

from rocketq.store.index_file import IndexFile, IndexFileError, index_file_size
from rocketq.store.index_service import IndexService

T0 = 1_700_000_000_000          # 2023-11-14 22:13:20.000 UTC
HEADER = struct.Struct(">qqqqii")
ENTRY = struct.Struct(">iqii")


@pytest.fixture
def utc(monkeypatch):
    """File names are local time; pin the zone so they are predictable."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def java_hash(s: str) -> int:
    h = 0
    for unit in struct.unpack(f"<{len(s.encode('utf-16-le')) // 2}H", s.encode("utf-16-le")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def key_hash(s: str) -> int:
    h = java_hash(s)
    return 0 if h == -(1 << 31) else abs(h)


def service(tmp_path, slots=101, entries=50, clock=T0, **kw) -> IndexService:
    s = IndexService(tmp_path / "index", slot_count=slots, max_entries=entries, clock_ms=lambda: clock, **kw)
    s.load(clean_shutdown=True, checkpoint_ms=0)
    return s


def put(s: IndexService, keys, phys, ts) -> None:
    s.put_batch(list(keys), np.array(phys, dtype=np.int64), np.array(ts, dtype=np.int64))


# ---- reference model: RocketMQ putKey / selectPhyOffset, one key at a time ----------------------

class RefFile:
    def __init__(self, slots: int, entries: int):
        self.slots, self.entries = slots, entries
        self.buf = bytearray(index_file_size(slots, entries))
        HEADER.pack_into(self.buf, 0, 0, 0, 0, 0, 0, 1)

    def _slot_pos(self, h: int) -> int:
        return 40 + (h % self.slots) * 4

    def _entry_pos(self, i: int) -> int:
        return 40 + self.slots * 4 + i * 20

    def put_key(self, h: int, phy: int, ts: int) -> bool:
        b_ts, _e_ts, b_phy, _e_phy, used, count = HEADER.unpack_from(self.buf, 0)
        if count >= self.entries:
            return False
        slot_value = struct.unpack_from(">i", self.buf, self._slot_pos(h))[0]
        if slot_value <= 0 or slot_value > count:
            slot_value = 0
        diff = ts - b_ts
        diff = abs(diff) // 1000 * (1 if diff >= 0 else -1)        # Java long division
        diff = 0 if b_ts <= 0 else min(max(diff, 0), 2**31 - 1)
        ENTRY.pack_into(self.buf, self._entry_pos(count), h, phy, diff, slot_value)
        struct.pack_into(">i", self.buf, self._slot_pos(h), count)
        if count <= 1:
            b_phy, b_ts = phy, ts
        used += slot_value == 0
        HEADER.pack_into(self.buf, 0, b_ts, ts, b_phy, phy, used, count + 1)
        return True

    def select(self, h: int, max_num: int, begin: int, end: int) -> list[int]:
        b_ts, _e, _bp, _ep, _u, count = HEADER.unpack_from(self.buf, 0)
        out: list[int] = []
        nxt = struct.unpack_from(">i", self.buf, self._slot_pos(h))[0]
        if nxt <= 0 or nxt > count or count <= 1:
            return out
        while len(out) < max_num:
            kh, phy, diff, prev = ENTRY.unpack_from(self.buf, self._entry_pos(nxt))
            if diff < 0:
                break
            t = b_ts + diff * 1000
            if kh == h and begin <= t <= end:
                out.append(phy)
            if prev <= 0 or prev > count or prev == nxt or t < begin:
                break
            nxt = prev
        return out


def ref_index(slots, entries, keys, phys, ts) -> list[RefFile]:
    files = [RefFile(slots, entries)]
    for k, p, t in zip(keys, phys, ts):
        if not files[-1].put_key(key_hash(k), p, t):
            files.append(RefFile(slots, entries))
            assert files[-1].put_key(key_hash(k), p, t)
    return files


def ref_query(files: list[RefFile], h: int, max_num: int, begin: int, end: int) -> list[int]:
    out: list[int] = []
    for f in reversed(files):
        b_ts, e_ts, *_ = HEADER.unpack_from(f.buf, 0)
        if b_ts <= end and e_ts >= begin:
            out += f.select(h, max_num - len(out), begin, end)
        if b_ts < begin or len(out) >= max_num:
            break
    return out


# ---- golden bytes ---------------------------------------------------------------------------

def test_golden_bytes(tmp_path, utc):
    assert key_hash("T#k1") == 2539445 and key_hash("T#k8") == 2539452    # both in slot 6 of 7
    assert key_hash("T#k2") == 2539446                                     # slot 0
    s = service(tmp_path, slots=7, entries=10)
    put(s, ["T#k1", "T#k2", "T#k8"], [100, 250, 4096], [T0, T0 + 1500, T0 + 2999])
    s.close()
    raw = (tmp_path / "index" / "20231114221320000").read_bytes()
    assert len(raw) == 40 + 7 * 4 + 10 * 20 == 268
    assert raw[:40] == bytes.fromhex(
        "0000018BCFE56800"          # beginTimestamp 1700000000000
        "0000018BCFE573B7"          # endTimestamp   1700000002999
        "0000000000000064"          # beginPhyOffset 100
        "0000000000001000"          # endPhyOffset   4096
        "00000002"                  # hashSlotCount: slots 6 and 0
        "00000004")                 # indexCount: entries 1..3 written
    slot = lambda i: raw[40 + 4 * i:44 + 4 * i]          # noqa: E731
    entry = lambda i: raw[68 + 20 * i:88 + 20 * i]       # noqa: E731
    assert slot(6) == bytes.fromhex("00000003") and slot(0) == bytes.fromhex("00000002")
    assert all(slot(i) == bytes(4) for i in (1, 2, 3, 4, 5))
    assert entry(0) == bytes(20)                         # entry 0 is never used
    #                          keyHash  phyOffset          timeDiff prevIndex
    assert entry(1) == bytes.fromhex("0026BFB5" "0000000000000064" "00000000" "00000000")
    assert entry(2) == bytes.fromhex("0026BFB6" "00000000000000FA" "00000001" "00000000")
    assert entry(3) == bytes.fromhex("0026BFBC" "0000000000001000" "00000002" "00000001")
    assert raw[68 + 80:] == bytes(268 - 148)


def test_file_name_is_creation_time_and_unique(tmp_path, utc):
    s = service(tmp_path, entries=3)
    (tmp_path / "index" / "20231114221320000").touch()               # name taken already
    put(s, ["T#a", "T#b", "T#c"], [1, 2, 3], [T0] * 3)               # two per file: rolls once
    assert [f.path.name for f in s.files] == ["20231114221320001", "20231114221320002"]
    s.close()


# ---- chains, ranges, limits -----------------------------------------------------------------

def test_chains_within_and_across_batches(tmp_path):
    s = service(tmp_path, slots=1)                                   # every key in one chain
    put(s, ["T#a", "T#b", "T#a"], [10, 20, 30], [T0, T0 + 1000, T0 + 2000])
    put(s, ["T#a", "T#c", "T#a"], [40, 50, 60], [T0 + 3000, T0 + 4000, T0 + 5000])
    assert s.query("T", "a", 10, 0, 2**62).phy_offsets == [60, 40, 30, 10]
    assert s.query("T", "b", 10, 0, 2**62).phy_offsets == [20]
    assert s.query("T", "zz", 10, 0, 2**62).phy_offsets == []
    f = s.files[0]
    assert (f.index_count, f.hash_slot_count) == (7, 1)
    s.close()


def test_java_hash_collisions_are_candidates(tmp_path):
    assert java_hash("T#Aa") == java_hash("T#BB")                    # "Aa" and "BB" collide in Java
    s = service(tmp_path)
    put(s, ["T#Aa", "T#BB"], [1, 2], [T0, T0])
    assert s.query("T", "Aa", 10, 0, 2**62).phy_offsets == [2, 1]    # the caller re-checks the key
    s.close()


def test_time_range_and_max_num(tmp_path):
    s = service(tmp_path)
    put(s, ["T#k"] * 6, [0, 100, 200, 300, 400, 500], [T0 + 1000 * i for i in range(6)])
    q = lambda n, b, e: s.query("T", "k", n, b, e).phy_offsets       # noqa: E731
    assert q(32, T0 + 1000, T0 + 3000) == [300, 200, 100]
    assert q(32, T0 + 1001, T0 + 2999) == [200]
    assert q(2, 0, 2**62) == [500, 400]
    assert q(32, T0 + 6000, 2**62) == []
    r = s.query("T", "k", 1, 0, 2**62)
    assert (r.last_update_timestamp, r.last_update_phy_offset) == (T0 + 5000, 500)
    s.close()


def test_roll_when_full_and_query_across_files(tmp_path):
    s = service(tmp_path, entries=5)                                 # 4 entries per file
    put(s, [f"T#k{i % 3}" for i in range(10)], [100 * i for i in range(10)], [T0 + 1000 * i for i in range(10)])
    files = s.files
    assert [f.index_count for f in files] == [5, 5, 3] and files[0].is_full()
    assert [(f.begin_phy_offset, f.end_phy_offset) for f in files] == [(0, 300), (400, 700), (800, 900)]
    assert files[1].begin_timestamp == T0 + 4000 and files[1].end_timestamp == T0 + 7000
    assert s.query("T", "k0", 32, 0, 2**62).phy_offsets == [900, 600, 300, 0]
    assert s.query("T", "k0", 3, 0, 2**62).phy_offsets == [900, 600, 300]
    assert s.query("T", "k1", 32, T0 + 4000, T0 + 7000).phy_offsets == [700, 400]
    assert s.max_phy_offset == 900
    s.close()


def test_randomised_against_reference(tmp_path):
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rnd = random.Random(seed)
    slots, entries = rnd.choice([1, 7, 13]), rnd.choice([5, 17, 60])
    s = service(tmp_path, slots=slots, entries=entries)
    keys, phys, ts, now, phy = [], [], [], T0, 0
    for _ in range(rnd.randrange(5, 30)):
        n = rnd.choice([rnd.randrange(0, 5), rnd.randrange(5, 25)])   # entry by entry, and vectorised
        batch = [f"T#{rnd.randrange(40)}" for _ in range(n)]
        b_phys, b_ts = [], []
        for _ in range(n):
            phy += rnd.randrange(1, 300)
            now += rnd.choice([0, 1, 999, 1000, 1500, 4000, -2500])      # clocks step back too
            b_phys.append(phy)
            b_ts.append(now)
        put(s, batch, b_phys, b_ts)
        keys += batch
        phys += b_phys
        ts += b_ts
    ref = ref_index(slots, entries, keys, phys, ts)
    s.flush()
    assert [f.path.read_bytes() for f in s.files] == [bytes(r.buf) for r in ref] or not keys
    for _ in range(200):
        k = f"{rnd.randrange(40)}"
        lo, hi = min(T0, now), max(T0, now)
        begin = rnd.choice([0, T0, rnd.randrange(lo, hi + 2)])
        end = rnd.choice([2**62, rnd.randrange(begin, hi + 2000)])
        max_num = rnd.choice([1, 3, 64])
        assert s.query("T", k, max_num, begin, end).phy_offsets == \
            ref_query(ref, key_hash(f"T#{k}"), max_num, begin, end), (k, begin, end, max_num)
    s.close()


# ---- recovery, expiry, errors ---------------------------------------------------------------

def test_load_after_close_continues(tmp_path):
    s = service(tmp_path, entries=5)
    put(s, ["T#a", "T#b", "T#a"], [10, 20, 30], [T0, T0, T0])
    s.close()
    s = service(tmp_path, entries=5, clock=T0 + 60_000)
    assert s.max_phy_offset == 30 and s.query("T", "a", 9, 0, 2**62).phy_offsets == [30, 10]
    put(s, ["T#a", "T#a", "T#a"], [30, 40, 50], [T0, T0, T0])          # 30 is indexed already
    assert [f.index_count for f in s.files] == [5, 2]
    assert s.query("T", "a", 9, 0, 2**62).phy_offsets == [50, 40, 30, 10]
    s.close()


def test_crash_load_deletes_files_after_checkpoint(tmp_path):
    s = service(tmp_path, entries=3)                                 # 2 entries per file
    put(s, ["T#a"] * 6, [1, 2, 3, 4, 5, 6], [T0, T0 + 1, T0 + 5, T0 + 9, T0 - 7, T0 - 8])
    paths = [f.path for f in s.files]
    s.close()
    s = IndexService(tmp_path / "index", slot_count=101, max_entries=3)
    s.load(clean_shutdown=True, checkpoint_ms=T0 + 1)                # clean: checkpoint ignored
    assert len(s.files) == 3
    s.close()
    s = IndexService(tmp_path / "index", slot_count=101, max_entries=3)
    s.load(clean_shutdown=False, checkpoint_ms=T0 + 1)
    # file 2 ends after the checkpoint; file 3 ends before it (clock went back) but follows file 2
    assert [f.path for f in s.files] == paths[:1] and not paths[1].exists() and not paths[2].exists()
    assert s.max_phy_offset == 2
    s.close()
    s = IndexService(tmp_path / "index", slot_count=101, max_entries=3)
    s.load(clean_shutdown=False, checkpoint_ms=0)
    assert s.files == [] and s.max_phy_offset == -1 and s.flush() == 0
    s.close()


def test_bad_files_are_named(tmp_path):
    d = tmp_path / "index"
    d.mkdir()
    (d / "20240101000000000").write_bytes(bytes(100))
    s = IndexService(d, slot_count=101, max_entries=50)
    with pytest.raises(IndexFileError, match="20240101000000000.*100 bytes"):
        s.load(clean_shutdown=True, checkpoint_ms=0)
    (d / "20240101000000000").unlink()
    f = IndexFile(d / "20240101000000001", 101, 50, create=True)
    f.close()
    with open(d / "20240101000000001", "r+b") as fh:
        fh.seek(36)
        fh.write((51).to_bytes(4, "big"))
    with pytest.raises(IndexFileError, match="20240101000000001.*indexCount 51"):
        s.load(clean_shutdown=True, checkpoint_ms=0)


def test_fallocate_failure_leaves_no_file(tmp_path, monkeypatch):
    def no_space(fd, offset, length):
        raise OSError(errno.ENOSPC)
    s = service(tmp_path)
    monkeypatch.setattr(os, "posix_fallocate", no_space)
    with pytest.raises(OSError) as info:
        put(s, ["T#a"], [1], [T0])
    assert info.value.errno == errno.ENOSPC and str(tmp_path / "index") in str(info.value)
    assert list((tmp_path / "index").iterdir()) == [] and s.files == []
    monkeypatch.undo()
    put(s, ["T#a"], [1], [T0])
    assert s.query("T", "a", 1, 0, 2**62).phy_offsets == [1]
    s.close()


def test_delete_expired_keeps_newest(tmp_path):
    s = service(tmp_path, entries=3)
    put(s, ["T#a"] * 5, [100, 200, 300, 400, 500], [T0] * 5)
    paths = [f.path for f in s.files]
    assert s.delete_expired(250) == paths[:1]
    assert s.delete_expired(10**9) == paths[1:2] and s.files[0].path == paths[2]
    assert [p.exists() for p in paths] == [False, False, True]
    s.close()


def test_flush_syncs_only_dirty_files(tmp_path, monkeypatch):
    synced = []
    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", lambda fd: (synced.append(fd), real(fd)))
    s = service(tmp_path, entries=3)
    assert s.flush() == 0
    put(s, ["T#a"] * 3, [1, 2, 3], [T0, T0 + 5, T0 + 9])
    assert s.flush() == T0 + 9 and len(synced) == 2
    put(s, ["T#a"], [4], [T0 + 10])
    assert s.flush() == T0 + 10 and len(synced) == 3
    assert s.flush() == T0 + 10 and len(synced) == 3
    s.close()


# ---- scale ----------------------------------------------------------------------------------

def test_put_batch_fills_a_file_at_scale(tmp_path):
    # Throughput is a benchmark (rocketq bench store), not an assertion; this prints it for reference.
    n, batch = 1_000_000, 4096
    keys = [f"TopicTest#order-{i}" for i in range(n)]
    phys = np.arange(n, dtype=np.int64) * 256
    ts = T0 + np.arange(n, dtype=np.int64) // 20
    s = service(tmp_path, slots=n // 4, entries=n + 1)
    start = time.perf_counter()
    for i in range(0, n, batch):
        s.put_batch(keys[i:i + batch], phys[i:i + batch], ts[i:i + batch])
    rate = n / (time.perf_counter() - start)
    print(f"index put_batch: {rate:,.0f} keys/s ({n:,} keys, batches of {batch})")
    assert len(s.files) == 1 and s.files[0].is_full()
    assert s.query("TopicTest", "order-777777", 4, 0, 2**62).phy_offsets == [777777 * 256]
    s.close()
