"""The store benchmark behind ``rocketq bench store`` (numbers in BENCHMARKS.md).

Every scenario runs ``runs`` times in a fresh store and reports min / median / max; figures that
the issue compares with a raw reference (4 KiB bodies vs a plain mmap copy, SYNC_FLUSH vs one
fdatasync per message) measure that reference in the same run, so machine noise hits both.
"""

from __future__ import annotations

import gc
import os
import platform
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path

from rocketq.store import Message, MessageStore, StoreConfig

GIB = 1 << 30


def machine_description() -> str:
    return (f"{platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"numpy GC threshold {gc.get_threshold()}")


def _store(root: Path, **kw) -> MessageStore:
    d = Path(tempfile.mkdtemp(dir=root))
    cfg = dict(store_path=d, commitlog_file_size=GIB, warm_mapped_file_enable=True)
    cfg.update(kw)
    return MessageStore(StoreConfig(**cfg)).start()


def _close(store: MessageStore) -> None:
    store.shutdown()
    shutil.rmtree(store.paths.root, ignore_errors=True)


def _messages(n: int, size: int = 128) -> list[Message]:
    body = b"x" * size
    return [Message(topic="BenchTopic", body=body, tags="TagA", keys=[f"key-{i}"]) for i in range(n)]


def batch_append(root: Path, n: int) -> tuple[float, float]:
    """msgs/s for batches of 64 until dispatched, and the dispatch lag in seconds."""
    msgs = _messages(n)
    batches = [msgs[i:i + 64] for i in range(0, n, 64)]
    store = _store(root)
    try:
        t0 = time.perf_counter()
        for b in batches:
            store.put_messages(b)
        t1 = time.perf_counter()
        store.wait_dispatched()
        t2 = time.perf_counter()
        return n / (t2 - t0), t2 - t1
    finally:
        _close(store)


def single_put(root: Path, n: int) -> float:
    msgs = _messages(n)
    store = _store(root)
    try:
        t0 = time.perf_counter()
        for m in msgs:
            store.put_message(m)
        store.wait_dispatched()
        return n / (time.perf_counter() - t0)
    finally:
        _close(store)


def big_bodies(root: Path, n: int) -> tuple[float, float]:
    """(store MB/s, raw mmap copy MB/s) for 4 KiB bodies in batches of 64."""
    msgs = _messages(n, 4096)
    batches = [msgs[i:i + 64] for i in range(0, n, 64)]
    store = _store(root)
    try:
        t0 = time.perf_counter()
        for b in batches:
            store.put_messages(b)
        store.wait_dispatched()
        elapsed = time.perf_counter() - t0
        total = store.commitlog.max_offset()
    finally:
        _close(store)
    return total / elapsed / 1e6, _raw_copy_mb_s(root, total, 64 * 4300)


def _raw_copy_mb_s(root: Path, total: int, chunk: int) -> float:
    import mmap
    import numpy as np
    path = Path(tempfile.mkstemp(dir=root)[1])
    try:
        fd = os.open(path, os.O_RDWR)
        os.posix_fallocate(fd, 0, total + chunk)
        mm = mmap.mmap(fd, total + chunk)
        view = np.frombuffer(mm, dtype=np.uint8)
        view[::4096] = 0          # warmed, like the store's segment
        del view
        data = os.urandom(chunk)
        t0 = time.perf_counter()
        for pos in range(0, total, chunk):
            mm[pos:pos + chunk] = data
        elapsed = time.perf_counter() - t0
        mm.close()
        os.close(fd)
        return total / elapsed / 1e6
    finally:
        path.unlink(missing_ok=True)


def sync_flush(root: Path, seconds: float, writers: int = 64) -> tuple[float, float]:
    """(group-commit msgs/s with *writers* concurrent producers, one-fdatasync-per-message msgs/s).

    The producers are asyncio tasks on one event loop (uvloop when installed, as the broker
    runs), each awaiting its own acknowledgement before sending the next message.
    """
    import asyncio
    try:
        import uvloop
        run_loop = uvloop.run
    except ImportError:
        run_loop = asyncio.run
    store = _store(root, flush_disk_type="SYNC_FLUSH", message_index_enable=False)

    async def produce() -> int:
        deadline = time.perf_counter() + seconds
        done = [0]

        async def writer(i: int) -> None:
            m = Message(topic="SyncTopic", body=b"y" * 128, queue_id=i % 8)
            while time.perf_counter() < deadline:
                if (await store.put_message_async(m)).status == "PUT_OK":
                    done[0] += 1

        await asyncio.gather(*(writer(i) for i in range(writers)))
        return done[0]

    try:
        t0 = time.perf_counter()
        group = run_loop(produce()) / (time.perf_counter() - t0)
    finally:
        _close(store)
    return group, _fsync_per_message(root, seconds)


def _fsync_per_message(root: Path, seconds: float) -> float:
    path = Path(tempfile.mkstemp(dir=root)[1])
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    record = b"z" * 240
    n = 0
    t0 = time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds:
            os.write(fd, record)
            os.fdatasync(fd)
            n += 1
        return n / (time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def read_back(root: Path, n: int) -> float:
    store = _store(root, message_index_enable=False)
    try:
        msgs = _messages(n)
        for i in range(0, n, 64):
            store.put_messages(msgs[i:i + 64])
        store.wait_dispatched()
        t0 = time.perf_counter()
        offset = read = 0
        while offset < n:
            res = store.get_messages("BenchTopic", 0, offset, 32)
            for m in res.messages:
                m.body
                m.queue_offset
            read += len(res.messages)
            offset = res.next_begin_offset
        return read / (time.perf_counter() - t0)
    finally:
        _close(store)


def recovery(root: Path, size: int) -> tuple[float, int]:
    """Seconds to start a store that crashed with *size* bytes of log to re-check."""
    store = _store(root, message_index_enable=False, commitlog_file_size=max(size + (64 << 20), 64 << 20),
                   warm_mapped_file_enable=False)
    path = store.paths.root
    batch = _messages(64)
    while store.commitlog.max_offset() < size:
        store.put_messages(batch)
    cfg = store.config
    store.shutdown()
    # Simulate a crash whose checkpoint predates the whole segment: abort marker back, the
    # checkpoint's three timestamps and the flushed-log offset zeroed, so recovery re-checks every
    # record of the segment (magic, size, offset, CRC).  The consume queues are intact, as after a
    # process kill, so the offset up to which they were flushed is kept.
    (path / "abort").write_bytes(b"0")
    with open(path / "checkpoint", "r+b") as fh:
        logics = struct.unpack_from(">q", fh.read(56), 48)[0]
        fh.seek(0)
        fh.write(struct.pack(">7q", 0, 0, 0, 0, 0, 0, logics))
    gc.collect()
    t0 = time.perf_counter()
    store = MessageStore(cfg).start()
    elapsed = time.perf_counter() - t0
    scanned = store.recovery.scanned_bytes
    _close(store)
    return elapsed, scanned


def _summary(values: list[float]) -> list[float]:
    return [min(values), statistics.median(values), max(values)]


def run_all(*, quick: bool, runs: int, directory: Path | None, say=print) -> list[dict]:
    root = Path(tempfile.mkdtemp(prefix="rocketq-bench-", dir=directory))
    n_batch, n_single, n_big, n_read = (50_000, 20_000, 5_000, 50_000) if quick else \
        (2_000_000, 300_000, 100_000, 1_000_000)
    sync_s, rec_size = (1.0, 64 << 20) if quick else (5.0, GIB)
    rows: dict[str, list] = {k: [] for k in ("batch", "lag", "single", "big", "raw", "sync", "fsync", "read", "rec")}
    try:
        for run in range(1, runs + 1):
            say(f"run {run}/{runs}: batch append"); b, lag = batch_append(root, n_batch)
            rows["batch"].append(b); rows["lag"].append(lag)
            say(f"run {run}/{runs}: single put"); rows["single"].append(single_put(root, n_single))
            say(f"run {run}/{runs}: 4 KiB bodies"); big, raw = big_bodies(root, n_big)
            rows["big"].append(big); rows["raw"].append(raw)
            say(f"run {run}/{runs}: SYNC_FLUSH x64"); g, f = sync_flush(root, sync_s)
            rows["sync"].append(g); rows["fsync"].append(f)
            say(f"run {run}/{runs}: read back"); rows["read"].append(read_back(root, n_read))
            say(f"run {run}/{runs}: crash recovery"); rows["rec"].append(recovery(root, rec_size)[0])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratio_big = [b / r * 100 for b, r in zip(rows["big"], rows["raw"])]
    ratio_sync = [g / f for g, f in zip(rows["sync"], rows["fsync"])]
    mib = rec_size >> 20
    return [
        {"name": f"batch append x64, 128 B + tag + key, dispatched ({n_batch:,} msgs)", "values": _summary(rows["batch"]),
         "unit": "msgs/s", "reference": f"dispatch lag after last append: max {max(rows['lag']):.3f} s",
         "target": ">= 1,000,000"},
        {"name": f"single put_message, 128 B ({n_single:,} msgs)", "values": _summary(rows["single"]),
         "unit": "msgs/s", "target": ">= 300,000"},
        {"name": f"4 KiB bodies x64 ({n_big:,} msgs)", "values": _summary(ratio_big), "unit": "% of raw mmap copy",
         "reference": f"store {statistics.median(rows['big']):,.0f} MB/s vs raw {statistics.median(rows['raw']):,.0f} MB/s",
         "target": ">= 40 %"},
        {"name": "SYNC_FLUSH, 64 concurrent asyncio producers", "values": _summary(ratio_sync), "unit": "x one fsync per message",
         "reference": f"group commit {statistics.median(rows['sync']):,.0f} msgs/s vs "
                      f"{statistics.median(rows['fsync']):,.0f} fsyncs/s", "target": ">= 20x"},
        {"name": f"read back get_messages x32 ({n_read:,} msgs)", "values": _summary(rows["read"]),
         "unit": "msgs/s", "target": ">= 1,000,000"},
        {"name": f"crash recovery scanning {mib} MiB", "values": _summary(rows["rec"]), "unit": "s",
         "reference": f"{rows['rec'][0] * GIB / rec_size:.2f} s per GiB (first run)", "target": "<= 3 s per GiB"},
    ]


def to_markdown(results: list[dict]) -> str:
    lines = ["| scenario | min | median | max | unit | reference (same run) | target |", "|---|---|---|---|---|---|---|"]
    for r in results:
        lo, mid, hi = r["values"]
        lines.append(f"| {r['name']} | {lo:,.2f} | {mid:,.2f} | {hi:,.2f} | {r['unit']} | {r.get('reference', '')} "
                     f"| {r['target']} |")
    return "\n".join(lines) + "\n"
