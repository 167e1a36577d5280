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
under its real topic and queue, normally within a few milliseconds of its time.

``<storePath>/timer/checkpoint.json`` holds ``ingestOffset`` (timer-queue entries before it are in
bucket files) and ``deliveredUntilMs`` (every message due before it was delivered); bucket files are
fsynced before it is written, about once a second and at shutdown, and a bucket file is removed once
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
        self.persist()

    # -- the loop ----------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                self._ingest()
                now = self._now_ms()
                self._load_until(self._bucket(now) + 2 * self._bucket_ms)
                await self._deliver_due(now)
                if time.monotonic() - self._last_persist >= PERSIST_INTERVAL_S:
                    await asyncio.to_thread(self.persist)
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
        for _ in range(INGEST_ROUNDS_PER_WAKE):
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

    def _load_until(self, limit: int) -> None:
        if limit <= self._loaded_until:
            return
        for start in sorted(s for s in self._files if self._loaded_until <= s < limit):
            path = self._root / f"{start:020d}"
            for due, phy, size in decode_entries(path.read_bytes(), path=str(path)):
                if due >= self.watermark_ms:
                    self._push(due, phy, size)
        self._loaded_until = limit

    async def _deliver_due(self, now: int) -> None:
        while self._heap and self._heap[0][0] <= now:
            _due, phy, size = self._heap[0]
            if not await self._deliver(phy, size):
                return                                  # try again next round
            heapq.heappop(self._heap)
            self._seen.discard(phy)
            self.delivered += 1
        self.watermark_ms = max(self.watermark_ms, now + 1)
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
        with self._persist_lock:
            self._persist()

    def _persist(self) -> None:
        for start in list(self._dirty):
            path = self._root / f"{start:020d}"
            if path.exists():
                fd = os.open(path, os.O_RDONLY)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        self._dirty.clear()
        tmp = self._root / "checkpoint.json.tmp"
        tmp.write_text(json.dumps({"ingestOffset": self.ingest_offset, "deliveredUntilMs": self.watermark_ms}))
        os.replace(tmp, self._root / "checkpoint.json")
        self._last_persist = time.monotonic()

    @property
    def pending_in_memory(self) -> int:
        return len(self._heap)
