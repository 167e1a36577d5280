"""Building consume queues and the index from the CommitLog (RocketMQ ``ReputMessageService``).

Theory of operation
-------------------
The dispatcher reads back what the put path appended: it walks the log from ``dispatched_offset``
to the end of the data and feeds each walked run to the sinks.  The walk is one native call per
segment run (:func:`rocketq._native.dispatch_scan`): it parses the records and builds the 20-byte
consume-queue units and the index entries in Rust, with the GIL released, so the writer and the
dispatcher use both cores.  The sinks write long runs without the GIL too (``cq_write``,
``index_put_run``): a batch writer holds the GIL for every batch it appends, so whatever the dispatcher
does while holding it - above all the page faults of fresh queue and index pages - stops the writer.  The same walk serves the live path, recovery's re-dispatch and a
slave's replicated appends: the log is the only input, as in RocketMQ.

The put path only *notifies* (:meth:`Dispatcher.notify_appended`, inside the put lock): how many
messages it appended.  The thread dispatches whatever is there when it wakes.  When it falls
``max_pending_messages`` behind, producers wait: back-pressure.

:meth:`Dispatcher.drive_from` moves the dispatch of small appends onto an event loop (the
broker's): an append of fewer than ``LOOP_BATCH_MAX`` messages schedules one drain callback if none
is pending.  That saves a thread wake-up and two GIL hand-offs per single send, while batch sends
keep the thread.  When a reader waits for an arrival (a held long poll or pop: the *waiting*
predicate of ``drive_from``), the callback runs right behind what is queued (so the producer's answer
goes out first) and the waiter is woken without a timer.  When nobody waits, it runs
``coalesce_s`` later (5 ms), so one-at-a-time sends share a drain instead of paying ~20 us of Python
and a loop wake-up each (RocketMQ's reput looks every 1 ms, but on its own thread; here, at 2,500-3,000
awaited sends a second, 1 ms drained after every third send and 5 ms after every 16th, and the broker's
CPU per send fell by 10-19 %); a reader that asks in between calls
:meth:`Dispatcher.catch_up` first (the broker does before every request that is not a send), so
a client that got its send's answer always finds the message.

A run is dispatched whole or not at all as far as ``dispatched_offset`` is concerned: the sinks skip
what they already hold (units below a queue's end, index entries at or below its newest offset), so
walking a run again after a failure is harmless.  In transient-store-pool mode only bytes committed
to the file are dispatched, as RocketMQ's reput reads only up to the committed position; while the
rest waits for the commit thread, the dispatcher waits too (the commit wakes it, :meth:`Dispatcher.wake`)
instead of walking nothing again and again.

Sinks implement ``dispatch(run)``; the store wires the consume-queue and index sinks of
:mod:`rocketq.store.dispatch_sinks`, and listeners (long polling) get ``(topic, queue_id, next_offset)``.

A sink that fails with an ``OSError`` (a full disk when a consume-queue or index file is created)
*stalls* dispatch instead of stopping it: the run is held with the index of the sink that failed,
the thread tries it again with backoff (``RETRY_FIRST_S`` doubling to ``RETRY_MAX_S``, or at once on
:meth:`Dispatcher.retry_now`), and dispatch goes on from exactly there; sinks skip what they already
hold, so no unit is written twice and none is skipped.  One warning when a stall begins and one line
when it ends, not one per attempt.  While stalled, :attr:`Dispatcher.blocked` says why, and the store
refuses new writes before appending them: every record in the log is dispatched sooner or later (at
the latest from the checkpoint after a restart), so a producer is only ever told "failed" for a
message that was not appended.  Anything else (bytes in the log that are no record, a bug in a sink)
stops dispatch for good and :attr:`Dispatcher.blocked` stays set.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import Callable

from rocketq import _native
from rocketq.store.dispatch_sinks import Sink

log = logging.getLogger(__name__)

LOOP_DRAIN_BYTES = 4 << 20     # per event-loop callback (drive_from), so one drain never holds the loop long
LOOP_BATCH_MAX = 16            # with drive_from, appends smaller than this are dispatched on the loop
LOOP_RETRY_S = 0.001           # the loop's next look when the thread was draining
LOOP_COALESCE_S = 0.005        # with drive_from and nobody waiting for an arrival, small appends are dispatched this late at most
THREAD_DRAIN_BYTES = 64 << 20  # per walk of the thread, so waiters are told about progress in between
UNCOMMITTED_WAIT_S = 0.05      # longest wait for a transient-pool commit (it wakes the thread; this bounds a lost wake)
RETRY_FIRST_S = 0.05           # a stalled dispatch is tried again after this long ...
RETRY_MAX_S = 2.0              # ... doubling up to this (a freed disk is noticed within RETRY_MAX_S)


class DispatchError(RuntimeError):
    """The log holds bytes that are no record where the dispatcher expected one."""


class _Wake:
    """The dispatch thread's wake-up, with ``threading.Event``'s set / wait / clear.

    ``set`` is one C call (a token into a ``queue.SimpleQueue``) where ``Event.set`` takes a
    condition variable in Python, about 1.5 us: the put path sets it once per idle spell of the
    dispatcher, which for single puts is a good share of all puts.  Tokens beyond the first are
    harmless (``clear`` drops them) and few: ``clear`` runs after every ``wait``."""

    __slots__ = ("_tokens", "set")

    def __init__(self) -> None:
        self._tokens = queue.SimpleQueue()
        self.set = functools.partial(self._tokens.put_nowait, None)

    def wait(self, timeout: float | None = None) -> bool:
        try:
            self._tokens.get(timeout=timeout)
        except queue.Empty:
            return False
        return True

    def clear(self) -> None:
        tokens = self._tokens
        while not tokens.empty():
            tokens.get_nowait()


@dataclass(slots=True)
class _Held:
    """A walked run and how far it got: the sinks before ``sink`` have it."""

    run: object
    live: bool                   # walked for the put path (counts toward back-pressure)
    sink: int = 0
    attempts: int = 0
    since: float = 0.0


class Dispatcher:
    """The dispatch thread (or event-loop callbacks) walking the log behind the writer.

    *log* is the CommitLog (its ``files`` and ``max_offset()``); *delay_levels_ms* give the
    schedule topic's units their delivery times.  Whoever dispatches holds ``_drain_lock``, so the
    sinks see the log in order.
    """

    def __init__(self, log, sinks: list[Sink], *, delay_levels_ms: list[int], with_index: bool,
                 max_pending_messages: int):
        self._log = log
        self._sinks = sinks
        self._delay_ms = list(delay_levels_ms)
        self._with_index = with_index
        self._max_pending = max_pending_messages
        self._appended_msgs = 0      # messages the put path appended (single writer: the put lock)
        self._done_msgs = 0          # records walked (under _drain_lock)
        self._drain_lock = threading.Lock()
        self._wake = _Wake()
        self._idle = False
        self._progress = threading.Condition()
        self._waiters = 0
        self._stopped = False
        self._drain_scheduled = False    # a drain callback is queued on the loop
        self._later_scheduled = False    # ... or one runs coalesce_s after an append (nobody waited)
        self._event_loop = None      # set by drive_from
        self._someone_waits = None   # set by drive_from: True when a reader waits for an arrival
        self.coalesce_s = LOOP_COALESCE_S
        self.failure: BaseException | None = None     # bytes that are no record, or a bug in a sink: stopped
        self.blocked: str | None = None               # why dispatch is not moving (stalled or failed)
        self._held: _Held | None = None               # the run a sink failed on, tried again first
        self._retry_s = RETRY_FIRST_S
        self.dispatched_offset = 0
        self._thread = threading.Thread(target=self._loop, name="rocketq-dispatch", daemon=True)

    def start(self, from_offset: int) -> None:
        self.dispatched_offset = from_offset
        self._thread.start()

    def drive_from(self, loop, *, waiting: Callable[[], bool] | None = None) -> None:
        """Dispatch small appends on the asyncio *loop* from now on (the broker's); *waiting* says
        whether a reader waits for an arrival (then at once, else up to ``coalesce_s`` later; None:
        always at once)."""
        self._event_loop = loop
        self._someone_waits = waiting
        if self._behind():
            self._schedule_drain()

    def catch_up(self) -> None:
        """Dispatch what small appends left pending, now (on the loop; a no-op when nothing is):
        a reader is about to look at consume queues or the index."""
        if self._done_msgs < self._appended_msgs and self._held is None and self.failure is None:
            self._drain(LOOP_DRAIN_BYTES, blocking=False)

    def dispatch_range(self, start: int, end: int) -> int:
        """Walk [start, end) now, in the caller's thread (recovery, a slave's replicated bytes), and
        raise what a sink raises; returns how many records were dispatched."""
        with self._drain_lock:
            self.dispatched_offset = max(self.dispatched_offset, start) if self._thread.is_alive() else start
            return self._walk_to(end, limit_bytes=None, live=False, stall=False)

    def notify_appended(self, count: int, *, timeout_s: float = 30.0) -> None:
        """The put path appended *count* messages (called under the put lock, so in log order).

        Never raises: the records are in the log already, and an error here would tell their
        producer "failed" for messages that will be delivered.  Back-pressure waits at most
        *timeout_s*, and not at all while dispatch is stalled (the store refuses new writes then).
        """
        self._appended_msgs += count
        if self._event_loop is not None and count < LOOP_BATCH_MAX:
            if not self._drain_scheduled:
                waiting = self._someone_waits
                if waiting is None or waiting():
                    self._schedule_drain()
                elif not self._later_scheduled:
                    self._schedule_drain(later=True)
        elif self._idle:
            self._idle = False           # one wake-up per idle spell, not one per message
            self._wake.set()
        if self._appended_msgs - self._done_msgs > self._max_pending and self.blocked is None:
            if self._event_loop is not None:
                self._drain()
            else:
                self._wake.set()
                if not self._wait(lambda: self._appended_msgs - self._done_msgs <= self._max_pending
                                  or self.blocked is not None, timeout_s):
                    log.warning("the dispatcher is still more than %d messages behind after %.0f s",
                                self._max_pending, timeout_s)

    def wait_dispatched(self, timeout_s: float = 60.0, *, while_stalled: bool = True) -> bool:
        """Wait until everything appended before this call has reached every sink; False on timeout,
        when dispatch failed for good, or (unless *while_stalled*) as soon as it is stalled."""
        target = self._log.max_offset()
        if self._event_loop is not None and self._held is None:
            self._drain()
        else:
            self._wake.set()
        return self._wait(lambda: self.dispatched_offset >= target or (not while_stalled and self._held is not None),
                          timeout_s) and self.dispatched_offset >= target

    def wake(self) -> None:
        """More of the log became readable (the transient pool's commit moved): look again now."""
        self._wake.set()

    def retry_now(self) -> None:
        """Try a stalled dispatch again now, not at the end of its backoff (space was freed)."""
        if self._held is not None:
            self._wake.set()

    @property
    def stalled_attempts(self) -> int:
        """Failed attempts at the run dispatch is stalled on; 0 while dispatch moves."""
        held = self._held
        return held.attempts if held is not None else 0

    @property
    def lag_messages(self) -> int:
        return max(0, self._appended_msgs - self._done_msgs)

    # -- waiting -------------------------------------------------------------------------------

    def _wait(self, predicate, timeout_s: float) -> bool:
        """Wait for *predicate* (re-checked after every drain); False on timeout, failure or stop."""
        with self._progress:
            self._waiters += 1
            try:
                return self._progress.wait_for(lambda: predicate() or self.failure is not None or self._stopped,
                                               timeout_s) and self.failure is None
            finally:
                self._waiters -= 1

    def _notify(self) -> None:
        with self._progress:
            self._progress.notify_all()

    # -- draining ------------------------------------------------------------------------------

    def _behind(self) -> bool:
        return self.dispatched_offset < self._log.max_offset()

    def _waiting_for_commit(self) -> bool:
        """The bytes after ``dispatched_offset`` are written but not committed yet (transient pool)."""
        if not self._log.pooled:
            return False
        offset = self.dispatched_offset
        mf = self._log.files.find(offset)
        return mf is not None and mf.file_from_offset + mf.committed <= offset < mf.file_from_offset + mf.wrote

    def _schedule_drain(self, *, later: bool = False) -> None:
        """One drain callback on the loop, behind what is queued there already: a put answered in this
        loop iteration has its response write queued behind the put, so hop once more and the
        response goes out before the drain runs.  With *later*, ``coalesce_s`` from now instead."""
        loop = self._event_loop
        try:
            if later:
                self._later_scheduled = True
                if asyncio._get_running_loop() is loop:
                    loop.call_later(self.coalesce_s, self._drain_later)
                else:
                    loop.call_soon_threadsafe(loop.call_later, self.coalesce_s, self._drain_later)
                return
            self._drain_scheduled = True
            if asyncio._get_running_loop() is loop:
                loop.call_soon(loop.call_soon, self._drain_step)
            else:
                loop.call_soon_threadsafe(loop.call_soon, self._drain_step)
        except RuntimeError:             # the loop is closed: whoever waits drains itself
            self._drain_scheduled = self._later_scheduled = False

    def _drain_later(self) -> None:
        """The coalesced drain: whatever the appends of the last ``coalesce_s`` left (maybe nothing,
        when a reader caught up or a waiter's drain took it)."""
        self._later_scheduled = False
        if not self._drain_scheduled:
            self._drain_scheduled = True
            self._drain_step()

    def _drain_step(self) -> None:
        """One loop callback: reset the flag first, so an append racing with this drain schedules another.
        The loop never waits for the thread's drain: when the thread holds the lock, it takes what is
        there, and the loop looks again shortly in case an append arrived just as it finished."""
        self._drain_scheduled = False
        if self._held is not None:       # stalled: the thread retries with backoff, the loop stays out
            return
        if not self._drain(LOOP_DRAIN_BYTES, blocking=False):
            self._drain_scheduled = True
            try:
                self._event_loop.call_later(LOOP_RETRY_S, self._drain_step)
            except RuntimeError:         # the loop is closed: whoever waits drains itself
                self._drain_scheduled = False
            return
        if self._behind() and not self._drain_scheduled and self.blocked is None and not self._waiting_for_commit():
            self._schedule_drain()

    def _loop(self) -> None:
        while self.failure is None:
            if self._held is not None:
                if not self._stopped:
                    self._wake.wait(self._retry_s)
                    self._wake.clear()
                    self._retry_s = min(self._retry_s * 2, RETRY_MAX_S)
                self._drain(THREAD_DRAIN_BYTES)          # the held run first
                if self._held is not None and self._stopped:
                    return                               # the next start dispatches the rest from the checkpoint
                continue
            if not self._behind():
                self._idle = True
                if not self._behind() and not self._stopped:
                    self._wake.wait()
                    self._wake.clear()
                self._idle = False
                if not self._behind() and self._stopped:
                    return
            if self._waiting_for_commit() and not self._stopped:
                self._wake.wait(UNCOMMITTED_WAIT_S)      # the commit wakes us; appends cannot make bytes readable
                self._wake.clear()
                continue
            self._drain(THREAD_DRAIN_BYTES)

    def _drain(self, limit_bytes: int | None = None, *, blocking: bool = True) -> bool:
        """Dispatch the held run, then up to the log's end (at most *limit_bytes* of it); False when not
        *blocking* and someone else is draining."""
        if not self._drain_lock.acquire(blocking):
            return False
        try:
            if self.failure is None and (self._held is None or self._feed(self._held)):
                try:
                    self._done_msgs += self._walk_to(self._log.max_offset(), limit_bytes=limit_bytes, live=True,
                                                     stall=True)
                except BaseException as exc:   # bytes that are no record, or a bug: stop loudly
                    self._fail(exc)
        finally:
            self._drain_lock.release()
        if self._waiters:
            self._notify()
        return True

    def _walk_to(self, end: int, *, limit_bytes: int | None, live: bool, stall: bool) -> int:
        """Feed the sinks the records in [dispatched_offset, end) (caller holds _drain_lock); returns
        how many records were walked.  With *stall*, a sink's OSError holds the run (see the module
        doc) instead of being raised."""
        files = self._log.files
        walked = 0
        offset = self.dispatched_offset
        budget = limit_bytes
        while offset < end and (budget is None or budget > 0):
            mf = files.find(offset)
            if mf is None:
                first = files.min_offset()
                if offset < first:       # expired while we were behind: nothing to dispatch there
                    offset = self.dispatched_offset = first
                    continue
                break
            base = mf.file_from_offset
            limit = min(mf.committed, end - base)
            start = offset - base
            if limit <= start:
                break
            run = _native.dispatch_scan(mf.buffer(), start, limit, base_offset=base, delay_levels_ms=self._delay_ms,
                                        with_index=self._with_index, max_bytes=budget)
            if run.error is not None:
                raise DispatchError(f"{mf.path}: {run.error}")
            if stall:
                if not self._feed_new(run, live):
                    break
            else:
                for sink in self._sinks:
                    sink.dispatch(run)
                self._advance(run)
            walked += run.records
            offset = self.dispatched_offset
            if budget is not None:
                budget -= run.end - start
            if run.end == start and not run.blank:
                break
        return walked

    def _advance(self, run) -> None:
        files_size = self._log.files.file_size
        self.dispatched_offset = run.base_offset + files_size if run.blank else run.end_offset

    def _feed_new(self, run, live: bool) -> bool:
        """Feed a freshly walked *run* to every sink; True when all took it.  The common case makes no
        :class:`_Held`: one is made only when a sink fails, holding the run from that sink on, as
        :meth:`_feed` does (one message per round trip drains a run of one each time)."""
        fed = 0
        try:
            for sink in self._sinks:
                sink.dispatch(run)
                fed += 1
        except OSError as exc:             # a full disk (or the like): hold the run and try again later
            self._stall(_Held(run, live, sink=fed), exc)
            return False
        except BaseException as exc:       # a bug: derived state is now behind the log, stop loudly
            self._fail(exc)
            return False
        self._advance(run)
        return True

    def _feed(self, held: _Held) -> bool:
        """Feed the held run to the sinks from the one it stopped at; True when every sink took it."""
        sinks = self._sinks
        while held.sink < len(sinks):
            try:
                sinks[held.sink].dispatch(held.run)
            except OSError as exc:         # a full disk (or the like): hold the run and try again later
                self._stall(held, exc)
                return False
            except BaseException as exc:   # a bug: derived state is now behind the log, stop loudly
                self._fail(exc)
                return False
            held.sink += 1
        self._advance(held.run)
        if held.live:                      # the stalled run got through: its records count now
            self._done_msgs += held.run.records
        log.warning("dispatch resumed (now at commitlog offset %d) after %.1f s stalled (%d failed attempts)",
                    self.dispatched_offset, time.monotonic() - held.since, held.attempts)
        self._held, self.blocked, self._retry_s = None, None, RETRY_FIRST_S
        return True

    def _stall(self, held: _Held, exc: OSError) -> None:
        held.attempts += 1
        if self._held is None:
            held.since = time.monotonic()
            self._held = held
            why = "the broker's disk is full" if exc.errno == errno.ENOSPC else "a consume-queue or index write failed"
            self.blocked = (f"service not available now: {why} ({exc}); consume queues and index wait for it, "
                            f"and new messages are refused until they can be written")
            log.warning("dispatch stalled at commitlog offset %d: %s; writes are refused until it resumes, "
                        "retrying every %.2f-%.0f s", self.dispatched_offset, exc, RETRY_FIRST_S, RETRY_MAX_S)
            self._wake.set()               # the thread retries (when a loop callback stalled, it waits)

    def _fail(self, exc: BaseException) -> None:
        log.error("dispatch failed at commitlog offset %d; consume queues and index stop here until restart",
                  self.dispatched_offset, exc_info=exc)
        self.failure = exc
        self.blocked = f"the dispatcher stopped on an error: {exc!r}; restart the broker"

    def shutdown(self) -> None:
        self._stopped = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=60)
        self._notify()
