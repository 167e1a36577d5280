"""The crash-recovery scenario: a writer process killed with SIGKILL, then a timed ``start()``.

1. A child process (``python -m rocketq.bench.crash_recovery STORE SEGMENT_BYTES LOG_BYTES``)
   opens a store, appends batches of 64 until the CommitLog holds *LOG_BYTES*, waits until the
   checkpoint on disk says the log and the consume queues are flushed to the end, and prints
   ``READY <end offset> <records>``.  It then blocks; the parent SIGKILLs it, so the store is
   left as a crash leaves it: the ``abort`` marker present, a checkpoint, no clean shutdown.
2. The parent rewrites the checkpoint's first three int64 fields (physicMsgTimestamp,
   logicsMsgTimestamp, indexMsgTimestamp, big-endian at offsets 0, 8, 16) to the store time of
   the first record.  Recovery starts at the newest segment older than that bound, i.e. the
   first, so every record is re-checked (magic, size, physical offset, body CRC).
3. The parent times ``MessageStore(config).start()`` and checks what recovery reports.

The index is off here: rewinding ``indexMsgTimestamp`` would otherwise make start-up rebuild
the whole index, which is a different cost from scanning the log.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rocketq.bench.report import BenchError, Measurement

TOPIC = "BenchRecovery"
BATCH_MESSAGES = 64
BODY_BYTES = 128
CHILD_READY_TIMEOUT_S = 900.0        # writing 1 GiB takes ~15 s; allow a slow, shared machine
CHECKPOINT_WAIT_TIMEOUT_S = 60.0
CHECKPOINT_POLL_S = 0.05
_CHECKPOINT_TIMESTAMPS = struct.Struct(">3q")     # physicMsg-, logicsMsg-, indexMsgTimestamp @0


def config(store_path: Path, segment_bytes: int):
    from rocketq.store import StoreConfig
    # A short thorough-flush interval so the last pages of the log reach the disk (and the
    # checkpoint) promptly; the writer waits for that before it reports ready.
    return StoreConfig(store_path=store_path, commitlog_file_size=segment_bytes, flush_disk_type="ASYNC_FLUSH",
                       warm_mapped_file_enable=False, message_index_enable=False,
                       flush_commitlog_thorough_interval_ms=200, flush_interval_consume_queue_ms=200)


def crash_recovery(root: Path, *, log_bytes: int, segment_bytes: int) -> Measurement:
    """Seconds for ``start()`` to recover a store whose writer was killed after *log_bytes*."""
    from rocketq.store import MessageStore
    path = Path(tempfile.mkdtemp(dir=root, prefix="store-recovery-"))
    try:
        end, records = _write_and_kill(path, segment_bytes=segment_bytes, log_bytes=log_bytes)
        if not (path / "abort").exists():
            raise BenchError(f"{path}: no abort marker after SIGKILL; the crash was not simulated")
        first_ts = _first_store_timestamp(path)
        _rewind_checkpoint(path / "checkpoint", first_ts)
        gc.collect()
        store = MessageStore(config(path, segment_bytes))
        t0 = time.perf_counter()
        store.start()
        elapsed = time.perf_counter() - t0
        report = store.recovery
        store.shutdown()
    finally:
        shutil.rmtree(path, ignore_errors=True)
    if not report.abnormal or report.end_offset != end or report.truncated_bytes or report.scanned_bytes < log_bytes:
        raise BenchError(f"recovery did not re-check the crashed log as set up: {report} "
                         f"(log end {end}, at least {log_bytes} bytes to scan)")
    return Measurement(elapsed, f"scanned {report.scanned_bytes / (1 << 20):,.1f} MiB, "
                                f"{elapsed / (report.scanned_bytes / (1 << 30)):.2f} s/GiB",
                       {"scanned_bytes": report.scanned_bytes, "end_offset": report.end_offset,
                        "records": records, "redispatched_records": report.redispatched_records,
                        "truncated_bytes": report.truncated_bytes, "first_store_timestamp_ms": first_ts})


def _write_and_kill(path: Path, *, segment_bytes: int, log_bytes: int) -> tuple[int, int]:
    """Run the writer child until it reports READY, SIGKILL it; returns (log end, records)."""
    cmd = [sys.executable, "-m", "rocketq.bench.crash_recovery", str(path), str(segment_bytes), str(log_bytes)]
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            line = _read_line(child, CHILD_READY_TIMEOUT_S)
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
            child.stdin.close()
            child.stdout.close()
        if not line.startswith("READY "):
            err.seek(0)
            tail = err.read().decode(errors="replace").strip().splitlines()[-5:]
            raise BenchError(f"crash writer failed before it was ready: {line.strip() or 'no output'}; "
                             + " | ".join(tail))
    _, end, records = line.split()
    return int(end), int(records)


def _read_line(child: subprocess.Popen, timeout_s: float) -> str:
    import selectors
    with selectors.DefaultSelector() as sel:
        sel.register(child.stdout, selectors.EVENT_READ)
        if not sel.select(timeout_s):
            raise BenchError(f"crash writer not ready after {timeout_s:.0f} s")
    return child.stdout.readline()


def _first_store_timestamp(path: Path) -> int:
    from rocketq.store.record import StoredMessage
    first = min((p for p in (path / "commitlog").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    with open(first, "rb") as fh:
        size = int.from_bytes(fh.read(4), "big", signed=True)
        if size <= 0:
            raise BenchError(f"{first}: no record at its start")
        fh.seek(0)
        return StoredMessage(fh.read(size)).store_timestamp


def _rewind_checkpoint(checkpoint: Path, timestamp_ms: int) -> None:
    fd = os.open(checkpoint, os.O_WRONLY)
    try:
        os.pwrite(fd, _CHECKPOINT_TIMESTAMPS.pack(timestamp_ms, timestamp_ms, timestamp_ms), 0)
        os.fdatasync(fd)
    finally:
        os.close(fd)


# -- the child ------------------------------------------------------------------------------


def _child(path: Path, segment_bytes: int, log_bytes: int) -> None:
    from rocketq.store import Message, MessageStore
    store = MessageStore(config(path, segment_bytes)).start()
    body = b"r" * BODY_BYTES
    records = 0
    while store.commitlog.max_offset() < log_bytes:
        batch = [Message(topic=TOPIC, body=body, tags="TagA", keys=[f"key-{records + i}"])
                 for i in range(BATCH_MESSAGES)]
        result = store.put_messages(batch)
        if not result.ok:
            print(f"ERROR put_messages: {result.status} {result.error}", flush=True)
            os._exit(2)
        records += BATCH_MESSAGES
    end = store.commitlog.max_offset()
    if not store.wait_dispatched(CHECKPOINT_WAIT_TIMEOUT_S):
        print("ERROR dispatch did not catch up", flush=True)
        os._exit(2)
    _wait_flushed(path / "checkpoint", end)
    print(f"READY {end} {records}", flush=True)
    sys.stdin.read()          # the parent kills us; if it dies first, stdin closes
    os._exit(1)               # and we leave without a clean shutdown all the same


def _wait_flushed(checkpoint: Path, end: int) -> None:
    """Poll the checkpoint on disk until the log and the consume queues are flushed up to *end*."""
    from rocketq.store.checkpoint import Checkpoint
    deadline = time.monotonic() + CHECKPOINT_WAIT_TIMEOUT_S
    while True:
        cp = Checkpoint.decode(checkpoint.read_bytes())
        if cp.physic_flushed_offset >= end and cp.logics_flushed_offset >= end:
            return
        if time.monotonic() > deadline:
            print(f"ERROR checkpoint not flushed to {end} after {CHECKPOINT_WAIT_TIMEOUT_S:.0f} s: {cp}", flush=True)
            os._exit(2)
        time.sleep(CHECKPOINT_POLL_S)


if __name__ == "__main__":
    _child(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
