"""Building consume queues and the index from appended records (RocketMQ ``ReputMessageService``).

Theory of operation
-------------------
The put path hands every appended batch to :meth:`Dispatcher.submit` (a bounded queue: when the
dispatcher falls ``max_pending`` messages behind, producers wait).  The dispatcher thread drains
everything queued, merges it into one columnar :class:`DispatchBatch` and feeds each sink once
per drain, so per-call overheads (numpy, file lookups) are paid per thousands of records, not
per record.  Recovery feeds the same sinks with batches parsed back from the log, so the live
path and the rebuild path share one code path below the queue.

RocketMQ's dispatcher re-reads each record from the log; rocketq passes the fields the append
path already holds in memory instead, which saves re-parsing every record in Python.  The log
stays the source of truth: after a restart the sinks are re-fed from the log from the last
checkpoint, and both sinks skip what they already hold, so a re-dispatch is idempotent.

Sinks implement ``dispatch(batch)``; the store wires :class:`ConsumeQueueSink` and
:class:`IndexSink`, and listeners (long polling) get ``(topic, queue_id, next_offset)``.

A sink that fails with an ``OSError`` (a full disk when a consume-queue or index file is created)
*stalls* dispatch instead of stopping it: the failed batch is held with the index of the sink that
failed, the thread tries it again with backoff (``RETRY_FIRST_S`` doubling to ``RETRY_MAX_S``, or at
once on :meth:`Dispatcher.retry_now`), and dispatch goes on from exactly there; sinks skip what they
already hold, so no unit is written twice and none is skipped.  One warning when a stall begins and
one line when it ends, not one per attempt.  While stalled, :attr:`Dispatcher.blocked` says why, and
the store refuses new writes before appending them: every record in the log is dispatched sooner or
later (at the latest from the checkpoint after a restart), so a producer is only ever told "failed"
for a message that was not appended.  Any other exception is a bug: dispatch stops for good and
:attr:`Dispatcher.blocked` stays set.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass
from itertools import chain
from typing import Callable, Iterable, Protocol

import numpy as np

from rocketq.common.javahash import tag_hash
from rocketq.common.properties import decode_properties
from rocketq.common.sysflag import PROPERTY_DELAY, SCHEDULE_TOPIC
from rocketq.store.commitlog import AppendedBatch
from rocketq.store.consume_queue import CQ_DTYPE, CQ_UNIT

log = logging.getLogger(__name__)

MAX_DRAIN_MESSAGES = 65_536
LOOP_DRAIN_MESSAGES = 8_192   # per event-loop callback (drive_from), so one drain never holds the loop long
LOOP_BATCH_MAX = 16           # with drive_from, batches smaller than this are dispatched on the loop
SMALL_BATCH_MAX = 4           # rows written with struct / Python ints instead of numpy (fixed costs)
LOOP_RETRY_S = 0.001          # the loop's next look when the thread was draining
RETRY_FIRST_S = 0.05          # a stalled dispatch is tried again after this long ...
RETRY_MAX_S = 2.0             # ... doubling up to this (a freed disk is noticed within RETRY_MAX_S)
NOT_CONSUMABLE = 0x4          # PREPARED (0x4) and ROLLBACK (0xC) share this bit; COMMIT (0x8) does not
ROLLBACK = 0xC


@dataclass(slots=True)
class DispatchBatch:
    """Columns for records in log order."""

    phys: np.ndarray             # int64 physical offsets
    sizes: np.ndarray            # int64 record sizes
    queue_offsets: list[int]
    store_ts: np.ndarray         # int64 ms
    topics: tuple
    queue_ids: tuple
    sys_flags: tuple
    tags: tuple
    keys: tuple
    uniq_keys: tuple
    props_text: tuple            # only read for delayed (schedule-topic) records

    @property
    def end_offset(self) -> int:
        return int(self.phys[-1] + self.sizes[-1]) if len(self.phys) else 0

    def __len__(self) -> int:
        return len(self.phys)

    @classmethod
    def from_appended(cls, batches: list[AppendedBatch]) -> "DispatchBatch":
        if len(batches) == 1 and batches[0].row is not None:      # one single put: no numpy merging
            b = batches[0]
            return cls(np.array([b.first_offset], dtype=np.int64), np.array(b.sizes, dtype=np.int64),
                       list(b.queue_offsets), np.array([b.store_timestamp], dtype=np.int64),
                       *_row_columns(b.row))
        counts = [len(b.sizes) for b in batches]
        sizes = np.fromiter(chain.from_iterable(b.sizes for b in batches), dtype=np.int64, count=sum(counts))
        excl = np.cumsum(sizes) - sizes
        starts = np.cumsum([0] + counts[:-1])
        base = np.repeat(np.array([b.first_offset for b in batches], dtype=np.int64) - excl[starts], counts)
        store_ts = np.repeat(np.array([b.store_timestamp for b in batches], dtype=np.int64), counts)
        if all(b.row is not None for b in batches):       # a run of single puts
            rows = list(zip(*(b.row for b in batches)))
            cols = [rows[i] for i in ROW_COLUMNS]
        elif len(batches) == 1:
            cols = [tuple(c) for c in batches[0].columns]
        else:
            cols = [tuple(chain.from_iterable(c)) for c in zip(*(b.columns or _row_columns(b.row) for b in batches))]
        return cls(excl + base, sizes, list(chain.from_iterable(b.queue_offsets for b in batches)), store_ts, *cols)


# Positions of (topic, queue id, sysflag, tags, keys, uniq key, properties) in a prepare_one() row.
ROW_COLUMNS = (0, 2, 4, 13, 14, 15, 16)


def _row_columns(row: tuple) -> tuple:
    return tuple((row[i],) for i in ROW_COLUMNS)


class Sink(Protocol):
    def dispatch(self, batch: DispatchBatch) -> None: ...


class ConsumeQueueSink:
    """Writes one 20-byte unit per consumable record into its topic/queue's consume queue."""

    def __init__(self, queue_for: Callable[[str, int], object], delay_levels_ms: list[int],
                 on_arrival: Callable[[str, int, int], None] | None = None,
                 on_written: Callable[[object], None] | None = None):
        self._queue_for = queue_for
        self._delay_ms = delay_levels_ms
        self.on_arrival = on_arrival
        self.on_written = on_written        # told after units are written (marks the queue dirty)

    def dispatch(self, batch: DispatchBatch) -> None:
        for (topic, qid), rows in _group_rows(batch):
            if rows is None:
                rows = np.arange(len(batch))
            if topic == SCHEDULE_TOPIC:
                codes = [self._deliver_time(batch, int(i)) for i in rows]
            else:
                tags = batch.tags
                if tags.count(None) == len(tags):
                    codes = 0                                   # no message has a tag (hash 0)
                elif len(rows) != len(batch):
                    codes = [tag_hash(tags[i]) for i in rows]
                else:
                    codes = list(map(tag_hash, tags))
            qoffs = batch.queue_offsets
            first, last = qoffs[int(rows[0])], qoffs[int(rows[-1])]
            cq = self._queue_for(topic, qid)
            if len(rows) <= SMALL_BATCH_MAX and last - first == len(rows) - 1:
                self._put_few(cq, batch, rows, codes, first)
            else:
                units = np.empty(len(rows), dtype=CQ_DTYPE)
                units["phy"] = batch.phys[rows]
                units["size"] = batch.sizes[rows]
                units["tag"] = codes
                if last - first == len(rows) - 1:
                    cq.put(units, first)
                else:   # not contiguous (only after a damaged table); write unit by unit
                    for j, i in enumerate(rows):
                        cq.put(units[j:j + 1], qoffs[int(i)])
            if self.on_written is not None:
                self.on_written(cq)
            if self.on_arrival is not None:
                self.on_arrival(topic, qid, last + 1)

    @staticmethod
    def _put_few(cq, batch: DispatchBatch, rows: np.ndarray, codes, first: int) -> None:
        """A few contiguous units packed with ``struct`` (numpy's fixed costs were most of a single send's
        consume-queue write); the same bytes as the numpy path."""
        phys, sizes = batch.phys[rows].tolist(), batch.sizes[rows].tolist()
        codes = codes if isinstance(codes, list) else [codes] * len(rows)
        data = b"".join(map(CQ_UNIT.pack, phys, sizes, codes))
        cq.put_bytes(data, first, phys[-1] + sizes[-1])

    def _deliver_time(self, batch: DispatchBatch, i: int) -> int:
        level = int(decode_properties(batch.props_text[i]).get(PROPERTY_DELAY, "0") or 0)
        level = max(1, min(level, len(self._delay_ms)))
        return int(batch.store_ts[i]) + self._delay_ms[level - 1]


def _group_rows(batch: DispatchBatch) -> Iterable[tuple[tuple[str, int], np.ndarray | None]]:
    """((topic, queue id), row indices) for consumable rows; rows None means 'all rows'."""
    topics, qids, flags = batch.topics, batch.queue_ids, batch.sys_flags
    n = len(topics)
    uniform = topics.count(topics[0]) == n and qids.count(qids[0]) == n
    consumable_all = flags.count(0) == n or not any(map(NOT_CONSUMABLE.__and__, flags))
    if uniform and consumable_all:
        yield (topics[0], qids[0]), None
        return
    groups: dict[tuple[str, int], list[int]] = {}
    for i, (t, q, f) in enumerate(zip(topics, qids, flags)):
        if not f & NOT_CONSUMABLE:
            groups.setdefault((t, q), []).append(i)
    for key, rows in groups.items():
        yield key, np.array(rows, dtype=np.int64)


class IndexSink:
    """Feeds ``topic#key`` for every KEYS word and the UNIQ_KEY to the index service."""

    def __init__(self, index_service):
        self._index = index_service

    def dispatch(self, batch: DispatchBatch) -> None:
        keys, uniqs, topics, flags = batch.keys, batch.uniq_keys, batch.topics, batch.sys_flags
        if self._dispatch_uniform(batch):
            return
        full: list[str] = []
        rows: list[int] = []
        for i, (topic, k, u, f) in enumerate(zip(topics, keys, uniqs, flags)):
            if f & ROLLBACK == ROLLBACK:
                continue
            for word in (k.split() if k else ()):
                full.append(f"{topic}#{word}")
                rows.append(i)
            if u:
                full.append(f"{topic}#{u}")
                rows.append(i)
        if full:
            idx = np.array(rows, dtype=np.int64)
            self._index.put_batch(full, batch.phys[idx], batch.store_ts[idx])

    def _dispatch_uniform(self, batch: DispatchBatch) -> bool:
        """The common shapes without a loop per message: one topic, no rolled-back records, and
        either every message or none with one key word, and either every message or none with a
        unique key.  Returns False for anything else."""
        keys, uniqs, topics = batch.keys, batch.uniq_keys, batch.topics
        n = len(topics)
        flags = batch.sys_flags
        if topics.count(topics[0]) != n or (flags.count(0) != n and ROLLBACK in map(ROLLBACK.__and__, flags)):
            return False
        with_keys = all(keys) and " " not in "".join(keys)
        with_uniqs = all(uniqs)
        if not (with_keys or keys.count(None) == n) or not (with_uniqs or uniqs.count(None) == n):
            return False
        prefix = topics[0] + "#"
        if with_keys and with_uniqs:                 # a message's keys, then its unique key
            both = [None] * (2 * n)
            both[0::2], both[1::2] = keys, uniqs
            if n <= SMALL_BATCH_MAX // 2:
                phys = [p for p in batch.phys.tolist() for _ in range(2)]
                ts = [t for t in batch.store_ts.tolist() for _ in range(2)]
            else:
                phys, ts = np.repeat(batch.phys, 2), np.repeat(batch.store_ts, 2)
            self._index.put_batch(both, phys, ts, prefix=prefix)
        elif with_keys or with_uniqs:
            self._index.put_batch(list(keys if with_keys else uniqs), batch.phys, batch.store_ts, prefix=prefix)
        return True


@dataclass(slots=True)
class _Held:
    """A drained batch and how far it got: the sinks before ``sink`` have it."""

    batch: DispatchBatch
    batches: int                 # AppendedBatches merged into it
    messages: int
    sink: int = 0
    attempts: int = 0
    since: float = 0.0


class Dispatcher:
    """The dispatch thread (or event-loop callbacks) and its bounded hand-off queue.

    ``submit`` is called by the CommitLog *inside its put lock*, so batches enter the queue in
    log order (two producers' batches for one queue must reach the consume queue in offset
    order) and the queue has a single writer: a deque append and a counter, no lock.  Draining
    takes ``_drain_lock``, so whoever drains (the thread, a loop callback, a waiter) feeds the
    sinks in log order.  The thread sleeps on an event only when the queue is empty, so under
    load producers never signal it.  It dispatches as soon as it wakes: RocketMQ's reput thread
    naps 1 ms between scans, and a 1 ms nap here measured +1.1 ms end-to-end latency at 1,000
    msgs/s with no gain in single-put throughput (under load batches form anyway).  When it falls
    ``max_pending`` messages behind, ``submit`` waits: back-pressure.

    :meth:`drive_from` moves the dispatch of small batches onto an event loop (the broker's): a
    submit of fewer than ``LOOP_BATCH_MAX`` messages schedules one drain callback if none is
    pending (behind the callbacks already queued, so the producer's answer goes out first), and a
    callback dispatches at most ``LOOP_DRAIN_MESSAGES`` before yielding to the loop; larger batches
    still wake the thread.  That saves a thread wake-up and two GIL hand-offs per single send,
    which is what one-at-a-time sends and a message's end-to-end latency wait on (measured: sync
    sends 2.4k -> 4.0k/s, end-to-end p50 at 5,000/s 2.5 -> 1.7 ms), while batch sends keep the
    thread (on the loop they lost ~7 %).  Back-pressure in that mode drains in the submitter
    instead of waiting (a submit on the loop thread could never see the loop drain).
    """

    def __init__(self, sinks: list[Sink], *, max_pending_messages: int):
        self._sinks = sinks
        self._max_pending = max_pending_messages
        self._queue: deque[AppendedBatch] = deque()
        self._submitted = 0          # batches / messages handed over (single writer: the put lock)
        self._submitted_msgs = 0
        self._done = 0               # batches / messages dispatched (under _drain_lock)
        self._done_msgs = 0
        self._drain_lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = False
        self._progress = threading.Condition()
        self._waiters = 0
        self._stopped = False
        self._drain_scheduled = False
        self._event_loop = None      # set by drive_from
        self.failure: BaseException | None = None     # a bug in a sink: dispatch stopped for good
        self.blocked: str | None = None               # why dispatch is not moving (stalled or failed)
        self._held: _Held | None = None               # the batch a sink failed on, tried again first
        self._retry_s = RETRY_FIRST_S
        self.dispatched_offset = 0
        self._thread = threading.Thread(target=self._loop, name="rocketq-dispatch", daemon=True)

    def start(self, from_offset: int) -> None:
        self.dispatched_offset = from_offset
        self._thread.start()

    def drive_from(self, loop) -> None:
        """Dispatch small batches on the asyncio *loop* from now on (the broker's)."""
        self._event_loop = loop
        if self._queue:
            self._schedule_drain()

    def dispatch_now(self, batch: DispatchBatch) -> None:
        """Feed the sinks synchronously (recovery, before the thread starts)."""
        for sink in self._sinks:
            sink.dispatch(batch)
        self.dispatched_offset = max(self.dispatched_offset, batch.end_offset)

    def submit(self, batch: AppendedBatch, *, timeout_s: float = 30.0) -> None:
        """Queue *batch* (caller holds the put lock, so calls arrive in log order).

        Never raises: the records are in the log already, and an error here would tell their
        producer "failed" for messages that will be delivered.  Back-pressure waits at most
        *timeout_s*, and not at all while dispatch is stalled (the store refuses new writes then).
        """
        self._queue.append(batch)
        self._submitted += 1
        self._submitted_msgs += len(batch.sizes)
        if self._event_loop is not None and len(batch.sizes) < LOOP_BATCH_MAX:
            if not self._drain_scheduled:
                self._schedule_drain()
        elif self._idle:
            self._wake.set()
        if self._submitted_msgs - self._done_msgs > self._max_pending and self.blocked is None:
            if self._event_loop is not None:
                self._drain()
            elif not self._wait(lambda: self._submitted_msgs - self._done_msgs <= self._max_pending
                                or self.blocked is not None, timeout_s):
                log.warning("the dispatcher is still more than %d messages behind after %.0f s",
                            self._max_pending, timeout_s)

    def wait_dispatched(self, timeout_s: float = 60.0, *, while_stalled: bool = True) -> bool:
        """Wait until everything submitted before this call has reached every sink; False on timeout,
        when dispatch failed for good, or (unless *while_stalled*) as soon as it is stalled."""
        target = self._submitted
        if self._event_loop is not None and self._held is None:
            self._drain()
        return self._wait(lambda: self._done >= target or (not while_stalled and self._held is not None),
                          timeout_s) and self._done >= target

    def _wait(self, predicate, timeout_s: float) -> bool:
        """Wait for *predicate* (re-checked after every drain); False on timeout, failure or stop."""
        with self._progress:
            self._waiters += 1
            try:
                return self._progress.wait_for(lambda: predicate() or self.failure is not None or self._stopped,
                                               timeout_s) and self.failure is None
            finally:
                self._waiters -= 1

    def retry_now(self) -> None:
        """Try a stalled dispatch again now, not at the end of its backoff (space was freed)."""
        if self._held is not None:
            self._wake.set()

    @property
    def stalled_attempts(self) -> int:
        """Failed attempts at the batch dispatch is stalled on; 0 while dispatch moves."""
        held = self._held
        return held.attempts if held is not None else 0

    @property
    def lag_messages(self) -> int:
        return self._submitted_msgs - self._done_msgs

    def _schedule_drain(self) -> None:
        """One drain callback on the loop, behind what is queued there already: a put answered in this
        loop iteration has its response write queued behind the put, so hop once more and the
        response goes out before the drain runs."""
        loop = self._event_loop
        self._drain_scheduled = True
        try:
            if asyncio._get_running_loop() is loop:
                loop.call_soon(loop.call_soon, self._drain_step)
            else:
                loop.call_soon_threadsafe(loop.call_soon, self._drain_step)
        except RuntimeError:             # the loop is closed: whoever waits drains itself
            self._drain_scheduled = False

    def _drain_step(self) -> None:
        """One loop callback: reset the flag first, so a submit racing with this drain schedules another.

        The loop never waits for the thread's drain (a large batch can take tens of ms): when the
        thread holds the lock, it takes what is queued, and the loop looks again shortly in case a
        batch arrived just as the thread finished.
        """
        self._drain_scheduled = False
        if self._held is not None:       # stalled: the thread retries with backoff, the loop stays out
            return
        if not self._drain(LOOP_DRAIN_MESSAGES, blocking=False):
            self._drain_scheduled = True
            try:
                self._event_loop.call_later(LOOP_RETRY_S, self._drain_step)
            except RuntimeError:         # the loop is closed: whoever waits drains itself
                self._drain_scheduled = False
            return
        if self._queue and not self._drain_scheduled and self.blocked is None:
            self._schedule_drain()

    def _loop(self) -> None:
        queue = self._queue
        while self.failure is None:
            if self._held is not None:
                if not self._stopped:
                    self._wake.wait(self._retry_s)
                    self._wake.clear()
                    self._retry_s = min(self._retry_s * 2, RETRY_MAX_S)
                self._drain(MAX_DRAIN_MESSAGES)          # the held batch first
                if self._held is not None and self._stopped:
                    return                               # the next start dispatches the rest from the checkpoint
                continue
            if not queue:
                self._idle = True
                if not queue and not self._stopped:
                    self._wake.wait()
                    self._wake.clear()
                self._idle = False
                if not queue and self._stopped:
                    return
            self._drain(MAX_DRAIN_MESSAGES)

    def _drain(self, limit: int | None = None, *, blocking: bool = True) -> bool:
        """Dispatch the held batch, then queued batches in log order, at most *limit* messages (all when
        None); False when not *blocking* and someone else is draining."""
        queue = self._queue
        if not self._drain_lock.acquire(blocking):
            return False
        try:
            if self._held is not None and not self._feed(self._held):
                return True
            left = limit if limit is not None else 1 << 62
            while queue and left > 0 and self.blocked is None:
                batches = []
                count = 0
                while queue and count < min(left, MAX_DRAIN_MESSAGES):
                    b = queue.popleft()
                    batches.append(b)
                    count += len(b.sizes)
                left -= count
                try:
                    batch = DispatchBatch.from_appended(batches)
                except BaseException as exc:   # a bug: derived state is now behind the log, stop loudly
                    self._fail(exc)
                    break
                done_sinks = 0       # the common path inline: _Held and _feed only once a sink failed
                try:
                    for sink in self._sinks:
                        sink.dispatch(batch)
                        done_sinks += 1
                except OSError as exc:         # a full disk (or the like): hold the batch and try again later
                    self._stall(_Held(batch, len(batches), count, done_sinks), exc)
                    break
                except BaseException as exc:   # a bug: derived state is now behind the log, stop loudly
                    self._fail(exc)
                    break
                self.dispatched_offset = batch.end_offset
                self._done_msgs += count
                self._done += len(batches)
                if self._waiters:
                    self._notify()
        finally:
            self._drain_lock.release()
        if self._waiters:
            self._notify()
        return True

    def _feed(self, held: "_Held") -> bool:
        """Feed the held batch to the sinks from the one it stopped at; True when every sink took it
        (then dispatch resumes)."""
        sinks = self._sinks
        while held.sink < len(sinks):
            try:
                sinks[held.sink].dispatch(held.batch)
            except OSError as exc:         # a full disk (or the like): hold the batch and try again later
                self._stall(held, exc)
                return False
            except BaseException as exc:   # a bug: derived state is now behind the log, stop loudly
                self._fail(exc)
                return False
            held.sink += 1
        self.dispatched_offset = held.batch.end_offset
        self._done_msgs += held.messages
        self._done += held.batches
        log.warning("dispatch resumed at commitlog offset %d after %.1f s stalled (%d failed attempts)",
                    int(held.batch.phys[0]), time.monotonic() - held.since, held.attempts)
        self._held, self.blocked, self._retry_s = None, None, RETRY_FIRST_S
        return True

    def _stall(self, held: "_Held", exc: OSError) -> None:
        held.attempts += 1
        if self._held is None:
            held.since = time.monotonic()
            self._held = held
            why = "the broker's disk is full" if exc.errno == errno.ENOSPC else "a consume-queue or index write failed"
            self.blocked = (f"service not available now: {why} ({exc}); consume queues and index wait for it, "
                            f"and new messages are refused until they can be written")
            log.warning("dispatch stalled at commitlog offset %d: %s; writes are refused until it resumes, "
                        "retrying every %.2f-%.0f s", int(held.batch.phys[0]), exc, RETRY_FIRST_S, RETRY_MAX_S)
            self._wake.set()               # the thread retries (when a loop callback stalled, it waits)

    def _fail(self, exc: BaseException) -> None:
        log.error("dispatch failed; consume queues and index stop here until restart", exc_info=exc)
        self.failure = exc
        self.blocked = f"the dispatcher stopped on an error: {exc!r}; restart the broker"

    def _notify(self) -> None:
        with self._progress:
            self._progress.notify_all()

    def shutdown(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        self._notify()
