"""Delivery at an arbitrary time: a time-bucketed log beside the store (DELAY messages of gRPC).

A message due later is stored in the commit log under ``rmq_sys_wheel_timer`` queue 0 (RocketMQ's
timer topic) with its destination in ``REAL_TOPIC`` / ``REAL_QID`` and its due time in
``TIMER_DELIVER_MS``.  The timer reads that queue in order ("ingest") and files each message under
the bucket of its due time: ``<storePath>/timer/<bucket start ms, 20 digits>``, append-only,
24-byte records, big-endian::

    off  size  field
      0     8  due time, ms since the epoch
      8     8  commit-log offset of the timer-topic record
     16     4  record size
     20     4  CRC-32 (zlib) of bytes 0..19

Only the buckets up to the next one are in memory (a heap by due time), so memory is bounded by
the messages due within two bucket widths, whatever is scheduled for next week.  The delivery
loop sleeps until the earliest due time (or an ingest wakes it) and re-puts each due message
under its real topic and queue, normally within a few milliseconds of its time.  Nothing the
loop does between two deliveries takes long: ingest stops after ``INGEST_BUDGET_S``, the next
bucket is read into the heap ``LOAD_CHUNK_ENTRIES`` at a time (it is loaded a bucket width ahead),
and the checkpoint is written by a worker thread while deliveries go on.

``<storePath>/timer/checkpoint.json`` holds ``ingestOffset`` (timer-queue entries before it are in
bucket files) and ``deliveredUntilMs`` (every message due before it was delivered), as they were when
the write began; the bucket files written before then are fsynced before it is written, about once
a second and at shutdown, and a bucket file is removed once
all of it was delivered.  After a crash, messages due in the last second before the crash or
ingested in it may be delivered twice (at-least-once), never lost; after a clean stop, exactly once.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import logging
import os
import struct
import threading
import time
import zlib
from pathlib import Path

from rocketq.common.aio import cancel_and_wait, wait_event
from rocketq.common.sysflag import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from rocketq.grpc_endpoint.convert import PROPERTY_TIMER_DELIVER_MS
from rocketq.store.results import GetStatus

log = logging.getLogger(__name__)

TIMER_TOPIC = "rmq_sys_wheel_timer"
ENTRY = struct.Struct(">qqiI")
INGEST_BATCH = 256
INGEST_ROUNDS_PER_WAKE = 16      # then deliver and yield the loop before reading on (bounded pauses)
INGEST_BUDGET_S = 0.01           # ... or sooner, once a round took this long
LOAD_CHUNK_ENTRIES = 2048        # bucket-file entries read into the heap per round (~3 ms)
PERSIST_INTERVAL_S = 1.0
MAX_SLEEP_S = 0.5
_PROGRESS = (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING)


def encode_entry(due_ms: int, phy: int, size: int) -> bytes:
    head = struct.pack(">qqi", due_ms, phy, size)
    return head + struct.pack(">I", zlib.crc32(head))


def decode_entries(data: bytes, *, path: str) -> list[tuple[int, int, int]]:
    """Entries of a bucket file; a torn last entry is dropped, a bad CRC elsewhere is corruption."""
    out = []
    whole = len(data) - len(data) % ENTRY.size
    for pos in range(0, whole, ENTRY.size):
        due, phy, size, crc = ENTRY.unpack_from(data, pos)
        if zlib.crc32(data[pos:pos + 20]) != crc:
            if pos + ENTRY.size == whole:
                break                                  # torn by a crash mid-write
            raise ValueError(f"{path}: timer entry at byte {pos} fails its CRC")
        out.append((due, phy, size))
    return out


class Timer:
    def __init__(self, store, root: Path, *, bucket_ms: int, clock=time.time):
        self._store = store
        self._root = Path(root)
        self._bucket_ms = bucket_ms
        self._clock = clock
        self.ingest_offset = 0
        self.watermark_ms = 0            # every entry due before this was delivered
        self._loaded_until = 0
        self._files: set[int] = set()     # bucket starts with a file on disk
        self._dirty: set[int] = set()
        self._heap: list[tuple[int, int, int]] = []
        self._seen: set[int] = set()      # commit-log offsets in the heap (re-ingest after a crash)
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task | None = None
        self._last_persist = 0.0
        self._load_pos = 0                # bytes of bucket _loaded_until already in the heap
        self._persisting: asyncio.Future | None = None
        self.delivered = 0
        self._persist_lock = threading.Lock()

    # -- sending side ------------------------------------------------------------------------------

    @staticmethod
    def wrap(msg):
        """*msg* (with TIMER_DELIVER_MS set) as parked in the timer topic."""
        msg.properties[PROPERTY_REAL_TOPIC] = msg.topic
        msg.properties[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
        msg.topic, msg.queue_id = TIMER_TOPIC, 0
        return msg

    def on_arrival(self, topic: str, _qid: int, _next: int) -> None:
        if topic == TIMER_TOPIC:
            self._loop.call_soon_threadsafe(self._wake.set)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        self._root.mkdir(parents=True, exist_ok=True)
        cp = self._root / "checkpoint.json"
        if cp.exists():
            data = json.loads(cp.read_text())
            self.ingest_offset = int(data["ingestOffset"])
            self.watermark_ms = int(data["deliveredUntilMs"])
        else:
            self.ingest_offset = self._store.min_offset(TIMER_TOPIC, 0)
            self.watermark_ms = self._now_ms()
        self._files = {int(p.name) for p in self._root.iterdir() if p.name.isdigit()}
        self._loaded_until = self._bucket(self.watermark_ms)
        self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        if self._persisting is not None:
            await asyncio.gather(self._persisting, return_exceptions=True)
        self.persist()

    # -- the loop ----------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                self._ingest()
                now = self._now_ms()
                if not self._load_until(self._bucket(now) + 2 * self._bucket_ms):
                    self._wake.set()                    # more of the bucket to read after this round
                await self._deliver_due(self._now_ms())
                if time.monotonic() - self._last_persist >= PERSIST_INTERVAL_S and (
                        self._persisting is None or self._persisting.done()):
                    self._persist_in_background()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer round failed; trying again")
            sleep = MAX_SLEEP_S
            if self._heap:
                sleep = min(sleep, max(0.0, (self._heap[0][0] - self._now_ms()) / 1000))
            self._wake.clear()
            await wait_event(self._wake, sleep)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _bucket(self, ms: int) -> int:
        return ms - ms % self._bucket_ms

    def _ingest(self) -> None:
        began = time.perf_counter()
        for _ in range(INGEST_ROUNDS_PER_WAKE):
            if time.perf_counter() - began >= INGEST_BUDGET_S:
                break
            res = self._store.get_messages(TIMER_TOPIC, 0, self.ingest_offset, INGEST_BATCH)
            if res.status == GetStatus.OFFSET_TOO_SMALL:
                self.ingest_offset = res.next_begin_offset
                continue
            by_bucket: dict[int, list[bytes]] = {}
            for m in res.messages:
                due = int(m.properties.get(PROPERTY_TIMER_DELIVER_MS, "0") or 0)
                if due >= self.watermark_ms:
                    by_bucket.setdefault(self._bucket(due), []).append(encode_entry(due, m.physical_offset,
                                                                                    m.total_size))
                if due < self._loaded_until or due < self.watermark_ms:
                    self._push(due, m.physical_offset, m.total_size)
            for start, entries in by_bucket.items():
                with open(self._root / f"{start:020d}", "ab") as f:
                    f.write(b"".join(entries))
                self._files.add(start)
                self._dirty.add(start)
            if res.status not in _PROGRESS or res.next_begin_offset <= self.ingest_offset:
                return
            self.ingest_offset = res.next_begin_offset
        self._wake.set()                # more to read: go on after delivering what is due

    def _push(self, due: int, phy: int, size: int) -> None:
        if phy not in self._seen:
            self._seen.add(phy)
            heapq.heappush(self._heap, (due, phy, size))

    def _load_until(self, limit: int) -> bool:
        """Read the bucket files below *limit* into the heap, at most LOAD_CHUNK_ENTRIES entries per
        call; True once done.  ``_loaded_until`` (bucket-aligned) moves past a bucket only when all of
        its file was read, so until then ingest files new entries for it there, and they are read too."""
        budget = LOAD_CHUNK_ENTRIES
        while self._loaded_until < limit:
            start = self._loaded_until
            if start not in self._files:
                later = [s for s in self._files if start < s < limit]
                self._loaded_until, self._load_pos = (min(later) if later else limit), 0
                continue
            if budget <= 0:
                return False
            path = self._root / f"{start:020d}"
            try:
                with open(path, "rb") as f:
                    f.seek(self._load_pos)
                    data = f.read(budget * ENTRY.size)
                    at_end = f.tell() >= os.fstat(f.fileno()).st_size
            except FileNotFoundError:
                data, at_end = b"", True
            entries = decode_entries(data, path=str(path))
            whole = len(data) - len(data) % ENTRY.size
            if len(entries) * ENTRY.size < whole and not at_end:
                raise ValueError(f"{path}: timer entry at byte {self._load_pos + len(entries) * ENTRY.size} "
                                 "fails its CRC")
            for due, phy, size in entries:
                if due >= self.watermark_ms:
                    self._push(due, phy, size)
            budget -= len(entries)
            self._load_pos += whole
            if not at_end:
                continue                                # more of this bucket (next round if over budget)
            self._loaded_until, self._load_pos = start + self._bucket_ms, 0
        return True

    async def _deliver_due(self, now: int) -> None:
        while self._heap and self._heap[0][0] <= now:
            _due, phy, size = self._heap[0]
            if not await self._deliver(phy, size):
                return                                  # try again next round
            heapq.heappop(self._heap)
            self._seen.discard(phy)
            self.delivered += 1
        # not past a bucket still being read in: its unread entries are due but not delivered
        self.watermark_ms = max(self.watermark_ms, min(now + 1, self._loaded_until))
        for start in [s for s in self._files if s + self._bucket_ms <= self.watermark_ms]:
            self._files.discard(start)
            self._dirty.discard(start)
            (self._root / f"{start:020d}").unlink(missing_ok=True)

    async def _deliver(self, phy: int, size: int) -> bool:
        m = self._store.read_message(phy, size)
        if m is None:
            log.warning("timer entry at commit-log offset %d is gone (expired with its segment); skipped", phy)
            return True
        props = dict(m.properties)
        topic = props.pop(PROPERTY_REAL_TOPIC, None)
        qid = int(props.pop(PROPERTY_REAL_QUEUE_ID, "0") or 0)
        if topic is None:
            log.error("timer message at offset %d has no REAL_TOPIC; dropped", phy)
            return True
        r = await self._store.put_message_async(m.to_message(topic=topic, properties=props, queue_id=qid))
        if r.physical_offset < 0:
            log.warning("delivering timer message at offset %d failed: %s", phy, r.status)
            return False
        return True

    def persist(self) -> None:
        """Fsync the bucket files written so far and write the checkpoint (blocking; at shutdown)."""
        self._write_checkpoint(*self._snapshot())

    def _snapshot(self) -> tuple[int, int, list[int]]:
        """The checkpoint as of now and the bucket files to fsync first (on the loop thread)."""
        dirty = list(self._dirty)
        self._dirty.clear()
        self._last_persist = time.monotonic()
        return self.ingest_offset, self.watermark_ms, dirty

    def _persist_in_background(self) -> None:
        snapshot = self._snapshot()
        self._persisting = asyncio.ensure_future(asyncio.to_thread(self._write_checkpoint, *snapshot))

        def done(fut: asyncio.Future) -> None:
            if not fut.cancelled() and fut.exception() is not None:
                self._dirty.update(s for s in snapshot[2] if s in self._files)    # fsync them next time
                log.error("writing the timer checkpoint failed: %s", fut.exception())
        self._persisting.add_done_callback(done)

    def _write_checkpoint(self, ingest_offset: int, watermark_ms: int, dirty: list[int]) -> None:
        with self._persist_lock:
            for start in dirty:
                try:
                    fd = os.open(self._root / f"{start:020d}", os.O_RDONLY)
                except FileNotFoundError:
                    continue                            # all delivered and removed meanwhile
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            tmp = self._root / "checkpoint.json.tmp"
            tmp.write_text(json.dumps({"ingestOffset": ingest_offset, "deliveredUntilMs": watermark_ms}))
            os.replace(tmp, self._root / "checkpoint.json")

    @property
    def pending_in_memory(self) -> int:
        return len(self._heap)
