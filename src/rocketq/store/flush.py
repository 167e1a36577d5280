"""Getting CommitLog bytes to disk: group commit, periodic flush, and the transient-buffer commit.

Three services, one per RocketMQ mode:

* :class:`GroupCommitService` (``SYNC_FLUSH``): producers wait until the flushed offset passes the
  end of their record.  While one fdatasync runs, later producers queue up behind it and the next
  fdatasync covers all of them: one sync serves many.  A producer that waits longer than
  ``syncFlushTimeout`` is told ``FLUSH_DISK_TIMEOUT`` (its record stays in the log).
* :class:`PeriodicFlushService` (``ASYNC_FLUSH``): every ``flushIntervalCommitLog`` ms, flush when at
  least ``flushCommitLogLeastPages`` pages are dirty, and unconditionally every
  ``flushCommitLogThoroughInterval`` ms.
* :class:`CommitService` (transient store pool): write what producers wrote into the anonymous
  buffer to the file (``pwrite``) every ``commitIntervalCommitLog`` ms (at least
  ``commitCommitLogLeastPages`` pages, or everything at a thorough interval), then wake the flusher.

Each runs on its own daemon thread; the data syncs (msync, fdatasync) release the GIL.  ``on_flushed(offset)`` lets the
store record progress in the checkpoint.  A flush slower than ``SLOW_FLUSH_S`` (RocketMQ logs those
over 500 ms too) means the disk is not keeping up: it is logged as a warning, at most once per
``SLOW_FLUSH_LOG_INTERVAL_S`` with the count since the last one.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from typing import Callable

from rocketq.store.mapped_file import OS_PAGE_SIZE

log = logging.getLogger(__name__)

ASYNC_DEADLINE_CHECK_S = 0.05
SLOW_FLUSH_S = 0.5
SLOW_FLUSH_LOG_INTERVAL_S = 60.0


class _SlowFlushLog:
    """Times one flush call (per flush round, never per message) and warns about slow ones."""

    def __init__(self, what: str):
        self._what = what
        self._slow, self._worst, self._next_log = 0, 0.0, 0.0

    def timed(self, flush: Callable[[], int]) -> int:
        t0 = time.monotonic()
        result = flush()
        took = time.monotonic() - t0
        if took >= SLOW_FLUSH_S:
            self._slow, self._worst = self._slow + 1, max(self._worst, took)
            if t0 >= self._next_log:
                log.warning("%s: %d flush(es) took %.2f s or more (slowest %.2f s); the disk is not keeping up",
                            self._what, self._slow, SLOW_FLUSH_S, self._worst)
                self._slow, self._worst, self._next_log = 0, 0.0, t0 + SLOW_FLUSH_LOG_INTERVAL_S
        return result


class _Service:
    name = "service"

    def __init__(self):
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name=f"rocketq-{self.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wakeup(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def _loop(self) -> None:
        try:
            while not self._stopped:
                self._run_once()
            self._final()
        except Exception:   # a dead flusher must be loud: producers would otherwise hang
            log.exception("%s thread died", self.name)
            self._failed()

    def _run_once(self) -> None:
        raise NotImplementedError

    def _final(self) -> None:
        pass

    def _failed(self) -> None:
        pass


class GroupCommitService(_Service):
    """Only the flush thread waits on the service's condition; a producer thread waits on a lock
    of its own (a gate), an asyncio producer on a future.

    After each fsync the flush thread opens the gates of the producers it covered, and only theirs:
    a woken producer returns at once.  (With a shared condition, ``notify_all`` woke all 64
    producers of the benchmark to queue up for the condition's lock one after the other, each
    handing the GIL on, before any could send its next message.)

    The asyncio producers of one event loop wait in that loop's :class:`_LoopWaiters`, in the
    order they appended (a loop runs one producer at a time, and appends are serialised by the
    put lock), so their offsets and deadlines only grow: after an fsync the ones it covered are a
    prefix, cut off with one bisect and resolved with one call into the loop.  A producer only
    signals the flush thread when that thread sleeps: while it flushes, it looks again before it
    sleeps, and the wake-up would cost every producer a system call for nothing.
    """

    name = "group-commit"

    def __init__(self, flush: Callable[[], int], timeout_ms: int):
        super().__init__()
        # a plain lock under the condition: producers take it with acquire / release, cheaper than
        # ``with`` on a Condition (two Python frames around the lock's own, per send)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._flush = flush
        self._timeout_s = timeout_ms / 1000
        self._requested = 0
        self._gates: list[tuple[int, threading.Lock]] = []     # (offset, held lock) of waiting threads
        self._loops: dict = {}                                  # event loop -> its _LoopWaiters
        self._sleeping = False                                  # the flush thread waits for a request
        self._slow_log = _SlowFlushLog("SYNC_FLUSH group commit")
        self.flushed = 0
        self.broken = False
        self.syncs = 0                 # flushes run, and seconds spent in them (metrics; once per fsync)
        self.sync_seconds = 0.0

    def waiting(self) -> int:
        """Producers on an event loop waiting for a flush (a snapshot, for metrics)."""
        return sum(len(w.offsets) for w in list(self._loops.values()))

    def _request(self, offset: int) -> None:
        """Ask for a flush up to *offset* (the caller holds the condition).  The producer that wakes
        the flush thread marks it awake: until that thread has the GIL back, every later producer
        would otherwise notify a condition nobody waits on any more (~1 us of Python each)."""
        if offset > self._requested:
            self._requested = offset
            if self._sleeping:
                self._sleeping = False
                self._cond.notify()

    def wait_flushed(self, offset: int) -> bool:
        """Block until bytes before *offset* are on disk; False on timeout."""
        if self.flushed >= offset:
            return True
        gate = threading.Lock()
        gate.acquire()
        with self._cond:
            if self.flushed >= offset:
                return True
            self._gates.append((offset, gate))
            self._request(offset)
        if not gate.acquire(timeout=self._timeout_s):
            with self._cond:
                if (offset, gate) in self._gates:
                    self._gates.remove((offset, gate))
        return self.flushed >= offset and not self.broken

    def wait_flushed_future(self, offset: int, loop):
        """An asyncio future (of *loop*) that resolves True once *offset* is flushed.

        The flush thread resolves all futures of a loop with one ``call_soon_threadsafe``, so an
        event loop with thousands of producers pays one wake-up per fsync, not one per producer.
        """
        fut = loop.create_future()
        if self.flushed >= offset:
            fut.set_result(True)
            return fut
        lock = self._lock
        lock.acquire()
        try:
            waiters = self._loops.get(loop)
            if waiters is None:
                waiters = self._loops[loop] = _LoopWaiters()
            waiters.add(offset, fut, time.monotonic() + self._timeout_s)
            self._request(offset)
        finally:
            lock.release()
        return fut

    def _run_once(self) -> None:
        with self._cond:
            self._sleeping = True
            self._cond.wait_for(lambda: self._requested > self.flushed or self._stopped,
                                ASYNC_DEADLINE_CHECK_S if self._loops else 10.0)
            self._sleeping = False
        if self._requested > self.flushed:
            started = time.monotonic()
            flushed = self._slow_log.timed(self._flush)
            self.syncs += 1
            self.sync_seconds += time.monotonic() - started
        else:
            flushed = self.flushed
        if flushed > self.flushed:
            self.flushed = flushed
        self._open_gates(self.flushed)
        self._resolve_async(flushed)

    def _open_gates(self, flushed: int, *, everyone: bool = False) -> None:
        """Wake the threads waiting for offsets up to *flushed* (all of them with *everyone*)."""
        with self._cond:
            if not self._gates:
                return
            if everyone:
                opened, self._gates = self._gates, []
            else:
                opened = [g for g in self._gates if g[0] <= flushed]
                self._gates = [g for g in self._gates if g[0] > flushed]
        for _offset, gate in opened:
            gate.release()

    def _resolve_async(self, flushed: int, *, result: bool = True) -> None:
        """Resolve flushed waiters True, expired ones False (``FLUSH_DISK_TIMEOUT``), per loop at once;
        with *result* False, every waiter False."""
        now = time.monotonic()
        calls = []
        with self._cond:
            for loop, waiters in list(self._loops.items()):
                done, late = waiters.take(flushed if result else -1, now if result else float("inf"))
                if not waiters.offsets:
                    del self._loops[loop]
                if done:
                    calls.append((loop, done, True))
                if late:
                    calls.append((loop, late, False))
        for loop, futs, value in calls:
            loop.call_soon_threadsafe(_resolve_all, futs, value)

    def _final(self) -> None:
        self.flushed = max(self.flushed, self._flush())
        self._open_gates(self.flushed, everyone=True)
        self._resolve_async(self.flushed)
        self._resolve_async(self.flushed, result=False)

    def _failed(self) -> None:
        self.broken = True
        self._open_gates(0, everyone=True)
        self._resolve_async(0, result=False)


class _LoopWaiters:
    """The asyncio producers of one event loop waiting for a flush, by offset (the order they
    appended in, see :class:`GroupCommitService`: the insert is an append)."""

    __slots__ = ("offsets", "futures", "deadlines")

    def __init__(self):
        self.offsets: list[int] = []
        self.futures: list = []
        self.deadlines: list[float] = []

    def add(self, offset: int, future, deadline: float) -> None:
        at = bisect.bisect_right(self.offsets, offset)
        self.offsets.insert(at, offset)
        self.futures.insert(at, future)
        self.deadlines.insert(at, deadline)

    def take(self, flushed: int, now: float) -> tuple[list, list]:
        """Remove and return (the futures of waiters at or below *flushed*, those of the rest whose
        deadline is *now* or earlier)."""
        covered = bisect.bisect_right(self.offsets, flushed)
        done = self.futures[:covered]
        del self.offsets[:covered], self.futures[:covered], self.deadlines[:covered]
        late = []
        if self.deadlines and self.deadlines[0] <= now:      # the flushes are late: rare, scan
            keep = [i for i, d in enumerate(self.deadlines) if d > now]
            late = [f for d, f in zip(self.deadlines, self.futures) if d <= now]
            self.offsets = [self.offsets[i] for i in keep]
            self.futures = [self.futures[i] for i in keep]
            self.deadlines = [self.deadlines[i] for i in keep]
        return done, late


def _resolve_all(futures, result: bool) -> None:
    for fut in futures:
        if not fut.done():
            fut.set_result(result)


class _ThresholdService(_Service):
    """Every interval, act when at least ``least_pages`` pages are pending, or on any pending
    bytes once ``thorough_interval`` has passed since the last action (RocketMQ's two knobs)."""

    def __init__(self, pending_bytes: Callable[[], int], *, interval_ms: int, least_pages: int,
                 thorough_interval_ms: int):
        super().__init__()
        self._pending = pending_bytes
        self._interval_s = interval_ms / 1000
        self._least_bytes = least_pages * OS_PAGE_SIZE
        self._thorough_s = thorough_interval_ms / 1000
        self._last_thorough = time.monotonic()

    def _act(self) -> None:
        raise NotImplementedError

    def _run_once(self) -> None:
        with self._cond:
            self._cond.wait(self._interval_s)
        now = time.monotonic()
        pending = self._pending()
        thorough = now - self._last_thorough >= self._thorough_s
        if pending > 0 and (thorough or pending >= self._least_bytes):
            self._last_thorough = now
            self._act()

    def _final(self) -> None:
        self._act()


class PeriodicFlushService(_ThresholdService):
    name = "flush"

    def __init__(self, flush: Callable[[], int], dirty_bytes: Callable[[], int], **knobs):
        super().__init__(dirty_bytes, **knobs)
        self._flush = flush
        self._slow_log = _SlowFlushLog("CommitLog flush")

    def _act(self) -> None:
        self._slow_log.timed(self._flush)


class CommitService(_ThresholdService):
    name = "commit"

    def __init__(self, commit: Callable[[], bool], uncommitted_bytes: Callable[[], int],
                 after_commit: Callable[[], None], **knobs):
        super().__init__(uncommitted_bytes, **knobs)
        self._commit = commit
        self._after = after_commit

    def _act(self) -> None:
        if self._commit():
            self._after()
