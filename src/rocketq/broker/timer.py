"""Delivery at an arbitrary time: a time-bucketed log beside the store (RocketMQ's timer wheel).

The broker owns one timer and runs it whenever it is master, with or without the gRPC endpoint.
A message due later is stored in the commit log under ``rmq_sys_wheel_timer`` queue 0 (RocketMQ's
timer topic) with its destination in ``REAL_TOPIC`` / ``REAL_QID`` and its due time in
``TIMER_OUT_MS`` (see :mod:`rocketq.broker.timer_messages` for which sends are parked; records
with only ``TIMER_DELIVER_MS`` are read too).  The timer reads that queue in order ("ingest") and
files each message under the bucket of its due time: ``<storePath>/timer/<bucket start ms, 20
digits>``, append-only, 24-byte records, big-endian::

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
bucket files), ``deliveredUntilMs`` (every message due before it was delivered) and ``recalled``
(below), as they were when the write began; the bucket files written before then are fsynced
before it is written, about once a second and at shutdown, and a bucket file is removed once
all of it was delivered.  After a crash, messages due in the last second before the crash or
ingested in it may be delivered twice (at-least-once), never lost; after a clean stop, exactly once.

Recall: :meth:`Timer.recall` stores a marker (``TIMER_DEL_UNIQKEY`` = ``<topic>+<UNIQ_KEY>``) in
the timer topic and keeps the key in a table; a due message whose key is in the table is dropped,
never delivered.  The key counts from the moment the call begins (the delivery loop and the call
share the event loop, so a message due later than the check cannot slip out before it), and the
call returns only after a checkpoint holding the key is on disk, so a recall that was answered
survives any crash.  Markers met while ingesting (written by another broker, or before a crash)
enter the table too; markers are never filed in a bucket.  A key leaves the table once its due
time is below the watermark and ingest has passed its marker (so the message, which was stored
before its marker, was ingested and dropped).  At most ``MAX_PENDING_RECALLS`` keys are held.

On a slave acting master (:mod:`rocketq.broker.acting_master`) the same timer runs with a ``put``
that escapes each due message to another group's master instead of storing it (a slave must not
write its CommitLog); it takes no recalls there.  A slave has no bucket files of its own, so its
timer starts from the master's checkpoint as last copied (``master.json``, written by
:mod:`rocketq.broker.slave_sync`): it re-reads the whole timer queue and skips what that checkpoint
says was delivered - records below its ``ingestOffset`` due before its ``deliveredUntilMs`` - as a
master that returns does with the acting slave's checkpoint (:meth:`Timer.adopt`).  Deliveries in
the last seconds before the checkpoint copied may be made twice (at-least-once), none are lost.
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

from rocketq.broker.timer_messages import (
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_DELIVER_MS,
    TIMER_TOPIC,
    RecallHandle,
    delete_key,
    delete_key_of,
    park,
    parked_due_ms,
    recall_marker,
)
from rocketq.common.aio import cancel_and_wait, wait_event
from rocketq.common.msgid import HostAddress
from rocketq.common.sysflag import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC
from rocketq.store.results import GetStatus, PutMessageResult

log = logging.getLogger(__name__)

__all__ = ["TIMER_TOPIC", "RecallRefused", "Timer", "decode_entries", "encode_entry"]

ENTRY = struct.Struct(">qqiI")
INGEST_BATCH = 256
INGEST_ROUNDS_PER_WAKE = 16      # then deliver and yield the loop before reading on (bounded pauses)
INGEST_BUDGET_S = 0.01           # ... or sooner, once a round took this long
LOAD_CHUNK_ENTRIES = 2048        # bucket-file entries read into the heap per round (~3 ms)
PERSIST_INTERVAL_S = 1.0
MAX_SLEEP_S = 0.5
MAX_PENDING_RECALLS = 100_000    # recalled keys held until their due time has passed
MASTER_CHECKPOINT = "master.json"  # on a slave: the master's progress as last copied
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


class RecallRefused(Exception):
    """A recall the timer cannot take; ``why`` is ``"due"`` (the message is due already: delivered or
    being delivered), ``"full"`` (MAX_PENDING_RECALLS pending) or ``"stopped"`` (the timer does not
    run here: a slave)."""

    def __init__(self, why: str, message: str):
        super().__init__(message)
        self.why = why


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
        self.dropped_recalled = 0
        self._persist_lock = threading.Lock()
        # delete key -> (due ms, timer-queue offset of its marker); see the module docstring
        self._recalled: dict[str, tuple[int, int]] = {}
        self._recalled_json: list | None = None       # the table as the checkpoint writes it (cached)
        self._recalling: set[str] = set()     # recalls whose marker is being stored
        self.running = False
        self.started = False              # ran in this process: its state in memory is current
        self._put = None                  # async (message) -> bool: escape instead of a local put
        self._skip: tuple[int, int] | None = None     # (timer-queue offset, due ms): delivered elsewhere
        self._adopted: tuple[int, int] | None = None

    # -- sending side ------------------------------------------------------------------------------

    @staticmethod
    def wrap(msg):
        """*msg* (with TIMER_DELIVER_MS set) as parked in the timer topic."""
        return park(msg, int(msg.properties[PROPERTY_TIMER_DELIVER_MS]))

    async def recall(self, handle: RecallHandle, *, born_host: HostAddress) -> PutMessageResult:
        """Make sure the message *handle* names is never delivered (see the module docstring).

        Raises :class:`RecallRefused` when it is due already, too many recalls are pending or the timer
        is not running; returns the marker's put result (a failed put recalls nothing); raises OSError
        when the checkpoint that makes the recall durable could not be written."""
        key = delete_key(handle.topic, handle.uniq_key)
        now = self._now_ms()
        if not self.running or self._put is not None:
            raise RecallRefused("stopped", "the timer does not run here (a slave delivers no timer messages, "
                                           "an acting slave takes no recalls)")
        if handle.due_ms <= now:
            raise RecallRefused("due", f"the message was due at {handle.due_ms}, {now - handle.due_ms} ms ago: "
                                       "delivered already, or being delivered")
        if key not in self._recalled and len(self._recalled) + len(self._recalling) >= MAX_PENDING_RECALLS:
            raise RecallRefused("full", f"{MAX_PENDING_RECALLS} recalls are pending already")
        self._recalling.add(key)                  # counts from now on: nothing awaited since the check
        try:
            r = await self._store.put_message_async(recall_marker(handle, born_host=born_host, now_ms=now))
            if r.physical_offset >= 0 and key not in self._recalled:
                self._remember_recall(key, handle.due_ms, r.queue_offset)
        finally:
            self._recalling.discard(key)
        if r.physical_offset >= 0:
            await self._persist_now()
        return r

    @property
    def pending_recalls(self) -> int:
        return len(self._recalled)

    def on_arrival(self, topic: str, _qid: int, _next: int) -> None:
        if topic == TIMER_TOPIC:
            self._loop.call_soon_threadsafe(self._wake.set)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, *, put=None, fresh: bool = False) -> None:
        """Start delivering; with *put* (acting slave) due messages go to it, not to the store, and
        *fresh* drops this directory's own state first (it is older than the master's)."""
        self._root.mkdir(parents=True, exist_ok=True)
        cp = self._root / "checkpoint.json"
        if fresh:
            for p in self._root.iterdir():
                if p.name.isdigit() or p.name == "checkpoint.json":
                    p.unlink(missing_ok=True)
        self._put, self._skip, self._heap, self._seen = put, None, [], set()
        master = self._root / MASTER_CHECKPOINT
        if cp.exists():
            data = json.loads(cp.read_text())
            self.ingest_offset = int(data["ingestOffset"])
            self.watermark_ms = int(data["deliveredUntilMs"])
            self._recalled = {str(k): (int(due), int(qoff)) for k, due, qoff in data.get("recalled", ())}
            skip = data.get("skip")
            self._skip = (int(skip[0]), int(skip[1])) if skip and int(skip[0]) > self.ingest_offset else None
        elif master.exists():                 # a slave: the master's progress, its buckets re-read
            data = json.loads(master.read_text())
            self.ingest_offset = self._store.min_offset(TIMER_TOPIC, 0)
            self.watermark_ms = int(data["deliveredUntilMs"])
            self._skip = (int(data["ingestOffset"]), self.watermark_ms)
        else:
            self.ingest_offset = self._store.min_offset(TIMER_TOPIC, 0)
            self.watermark_ms = self._now_ms()
        if self._adopted is not None:
            self._apply_adopted()
        self._files = {int(p.name) for p in self._root.iterdir() if p.name.isdigit()}
        self._loaded_until = self._bucket(self.watermark_ms)
        self._task = asyncio.create_task(self._run())
        self.running = self.started = True

    def adopt(self, delivered_until_ms: int, ingested_before: int) -> None:
        """Before :meth:`start`: another broker of the group (an acting slave) delivered every message
        due before *delivered_until_ms* among the timer-queue records before *ingested_before*."""
        self._adopted = (delivered_until_ms, ingested_before)

    def _apply_adopted(self) -> None:
        until, before = self._adopted
        self._adopted = None
        if until <= self.watermark_ms:
            return
        self.watermark_ms = until
        if before > self.ingest_offset:
            self._skip = (before, until)

    def checkpoint(self) -> dict | None:
        """This timer's progress (GET_TIMER_CHECK_POINT): in memory once it ran in this process, else
        its last checkpoint on disk; None when it never ran here."""
        if self.started:
            return {"ingestOffset": self.ingest_offset, "deliveredUntilMs": self.watermark_ms}
        cp = self._root / "checkpoint.json"
        try:
            data = json.loads(cp.read_text())
        except FileNotFoundError:
            return None
        return {"ingestOffset": int(data["ingestOffset"]), "deliveredUntilMs": int(data["deliveredUntilMs"])}

    def save_master_checkpoint(self, data: dict) -> None:
        """A slave keeps its master's progress (``master.json``) to start from if it acts as master."""
        doc = {"ingestOffset": int(data["ingestOffset"]), "deliveredUntilMs": int(data["deliveredUntilMs"])}
        self._root.mkdir(parents=True, exist_ok=True)
        path = self._root / MASTER_CHECKPOINT
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)

    async def close(self) -> None:
        """Stop and write the checkpoint; nothing happens for a timer that was never started."""
        if not self.running:
            return
        self.running = False
        await cancel_and_wait(self._task)
        if self._persisting is not None:
            await asyncio.gather(self._persisting, return_exceptions=True)
        self.persist()

    # -- the loop ----------------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            stuck = False
            try:
                self._ingest()
                now = self._now_ms()
                if not self._load_until(self._bucket(now) + 2 * self._bucket_ms):
                    self._wake.set()                    # more of the bucket to read after this round
                stuck = not await self._deliver_due(self._now_ms())
                if time.monotonic() - self._last_persist >= PERSIST_INTERVAL_S and (
                        self._persisting is None or self._persisting.done()):
                    self._forget_recalls()
                    self._persist_in_background()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("timer round failed; trying again")
            sleep = MAX_SLEEP_S
            if self._heap and not stuck:                # a failed put is tried again after MAX_SLEEP_S
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
                due = parked_due_ms(m.properties)
                marker = m.properties.get(PROPERTY_TIMER_DEL_UNIQKEY)
                if marker is not None:
                    if marker not in self._recalled:
                        self._remember_recall(marker, due, m.queue_offset)
                    continue                            # a marker is never filed nor delivered
                if self._skip is not None and m.queue_offset < self._skip[0] and due < self._skip[1]:
                    continue                            # delivered by the master (or an acting slave)
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

    async def _deliver_due(self, now: int) -> bool:
        """Deliver what is due; False when a put failed (the rest waits for the next round)."""
        while self._heap and self._heap[0][0] <= now:
            _due, phy, size = self._heap[0]
            if not await self._deliver(phy, size):
                return False                            # try again next round
            heapq.heappop(self._heap)
            self._seen.discard(phy)
            self.delivered += 1
        # not past a bucket still being read in: its unread entries are due but not delivered
        self.watermark_ms = max(self.watermark_ms, min(now + 1, self._loaded_until))
        for start in [s for s in self._files if s + self._bucket_ms <= self.watermark_ms]:
            self._files.discard(start)
            self._dirty.discard(start)
            (self._root / f"{start:020d}").unlink(missing_ok=True)
        return True

    def _remember_recall(self, key: str, due_ms: int, marker_at: int) -> None:
        self._recalled[key] = (due_ms, marker_at)
        self._recalled_json = None

    def _forget_recalls(self) -> None:
        """Drop the keys whose message was dropped for sure: due below the watermark, marker ingested
        (once a second, before the checkpoint: a scan of the whole table)."""
        done = [k for k, (due, marker_at) in self._recalled.items()
                if due < self.watermark_ms and marker_at < self.ingest_offset]
        for k in done:
            del self._recalled[k]
        if done:
            self._recalled_json = None

    async def _deliver(self, phy: int, size: int) -> bool:
        m = self._store.read_message(phy, size)
        if m is None:
            log.warning("timer entry at commit-log offset %d is gone (expired with its segment); skipped", phy)
            return True
        key = delete_key_of(m.properties)
        if key is not None and (key in self._recalled or key in self._recalling):
            self.dropped_recalled += 1
            return True                                 # recalled: never delivered
        props = dict(m.properties)
        topic = props.pop(PROPERTY_REAL_TOPIC, None)
        qid = int(props.pop(PROPERTY_REAL_QUEUE_ID, "0") or 0)
        if topic is None:
            log.error("timer message at offset %d has no REAL_TOPIC; dropped", phy)
            return True
        msg = m.to_message(topic=topic, properties=props, queue_id=qid)
        if self._put is not None:
            return await self._put(msg)                 # escaped: False keeps it due (retried next round)
        r = await self._store.put_message_async(msg)
        if r.physical_offset < 0:
            log.warning("delivering timer message at offset %d failed: %s", phy, r.status)
            return False
        return True

    def persist(self) -> None:
        """Fsync the bucket files written so far and write the checkpoint (blocking; at shutdown)."""
        self._write_checkpoint(*self._snapshot())

    def _snapshot(self) -> tuple[int, int, list[int], list, tuple[int, int] | None]:
        """The checkpoint as of now and the bucket files to fsync first (on the loop thread)."""
        dirty = list(self._dirty)
        self._dirty.clear()
        self._last_persist = time.monotonic()
        if self._recalled_json is None:
            self._recalled_json = [[k, due, marker_at] for k, (due, marker_at) in self._recalled.items()]
        skip = self._skip if self._skip is not None and self._skip[0] > self.ingest_offset else None
        return self.ingest_offset, self.watermark_ms, dirty, self._recalled_json, skip

    async def _persist_now(self) -> None:
        """Write a checkpoint of the state as of now, after any write under way; raises its error."""
        while self._persisting is not None and not self._persisting.done():
            await asyncio.gather(self._persisting, return_exceptions=True)
        self._persist_in_background()
        await self._persisting

    def _persist_in_background(self) -> None:
        snapshot = self._snapshot()
        self._persisting = asyncio.ensure_future(asyncio.to_thread(self._write_checkpoint, *snapshot))

        def done(fut: asyncio.Future) -> None:
            if not fut.cancelled() and fut.exception() is not None:
                self._dirty.update(s for s in snapshot[2] if s in self._files)    # fsync them next time
                log.error("writing the timer checkpoint failed: %s", fut.exception())
        self._persisting.add_done_callback(done)

    def _write_checkpoint(self, ingest_offset: int, watermark_ms: int, dirty: list[int], recalled: list,
                          skip: tuple[int, int] | None = None) -> None:
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
            doc = {"ingestOffset": ingest_offset, "deliveredUntilMs": watermark_ms, "recalled": recalled}
            if skip is not None:                        # a replay under way (see the module docstring)
                doc["skip"] = list(skip)
            tmp.write_text(json.dumps(doc))
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, self._root / "checkpoint.json")

    @property
    def pending_in_memory(self) -> int:
        return len(self._heap)
