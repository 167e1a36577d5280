"""The SYNC_FLUSH group commit's promises to producer threads: a producer is let go exactly when an
fsync covers its record (not before, and not only at its timeout), at its syncFlushTimeout when none
does, and at once when the flush thread dies."""

import asyncio
import queue
import threading
import time

from rocketq.store.flush import GroupCommitService

WAIT_S = 10.0


class ScriptedDisk:
    """A flush whose result (the flushed offset) the test hands out one at a time."""

    def __init__(self):
        self.results: queue.Queue = queue.Queue()
        self.calls = 0

    def flush(self) -> int:
        self.calls += 1
        result = self.results.get(timeout=WAIT_S)
        if isinstance(result, BaseException):
            raise result
        return result


def _waiter(service, offset, out):
    t = threading.Thread(target=lambda: out.__setitem__(offset, service.wait_flushed(offset)), daemon=True)
    t.start()
    return t


def _until(what, predicate, timeout_s=WAIT_S):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


def test_each_producer_is_let_go_when_an_fsync_covers_its_record_and_not_before():
    disk = ScriptedDisk()
    service = GroupCommitService(disk.flush, timeout_ms=int(WAIT_S * 1000))
    service.start()
    out: dict = {}
    try:
        threads = {off: _waiter(service, off, out) for off in (10, 20, 30)}
        _until("all three queued", lambda: len(service._gates) == 3)
        disk.results.put(20)
        for off in (10, 20):
            threads[off].join(WAIT_S)
        assert out == {10: True, 20: True}
        assert threads[30].is_alive() and [g[0] for g in service._gates] == [30]
        disk.results.put(30)
        threads[30].join(WAIT_S)
        assert out[30] is True and service._gates == []
        assert service.wait_flushed(25)                     # already on disk: no wait at all
    finally:
        disk.results.put(30)                                # the final flush at shutdown
        service.shutdown()


def test_a_producer_gives_up_at_the_timeout_and_leaves_no_gate_behind():
    disk = ScriptedDisk()
    service = GroupCommitService(disk.flush, timeout_ms=200)
    service.start()
    try:
        t0 = time.monotonic()
        assert service.wait_flushed(100) is False            # the fsync never returns in time
        assert time.monotonic() - t0 >= 0.19 and service._gates == []
    finally:
        disk.results.put(100)
        disk.results.put(100)
        service.shutdown()


def test_producers_are_told_at_once_when_the_flush_thread_dies():
    disk = ScriptedDisk()
    service = GroupCommitService(disk.flush, timeout_ms=60_000)
    service.start()
    out: dict = {}
    threads = [_waiter(service, off, out) for off in (10, 20)]
    _until("both queued", lambda: len(service._gates) == 2)
    t0 = time.monotonic()
    disk.results.put(OSError("the disk went away"))
    for t in threads:
        t.join(WAIT_S)
    assert out == {10: False, 20: False} and time.monotonic() - t0 < WAIT_S and service.broken
    service.shutdown()


# ---- asyncio producers: one future each, resolved a loop at a time ------------------------------

def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, WAIT_S))


def test_async_producers_are_resolved_when_an_fsync_covers_them_in_any_order_of_arrival():
    disk = ScriptedDisk()
    service = GroupCommitService(disk.flush, timeout_ms=int(WAIT_S * 1000))
    service.start()

    async def main():
        loop = asyncio.get_running_loop()
        futs = {off: service.wait_flushed_future(off, loop) for off in (10, 30, 20)}   # 20 after 30
        assert service.waiting() == 3
        disk.results.put(20)
        await asyncio.wait_for(asyncio.gather(futs[10], futs[20]), WAIT_S)
        assert futs[10].result() is futs[20].result() is True and not futs[30].done()
        assert service.waiting() == 1
        disk.results.put(30)
        assert await asyncio.wait_for(futs[30], WAIT_S) is True
        assert service.waiting() == 0
        done = service.wait_flushed_future(25, loop)                 # already on disk
        assert done.done() and done.result() is True

    try:
        _run(main())
    finally:
        disk.results.put(30)
        service.shutdown()


def test_a_burst_of_producers_wakes_the_sleeping_flush_thread_once():
    service = GroupCommitService(ScriptedDisk().flush, timeout_ms=int(WAIT_S * 1000))   # its thread not started
    notified = []
    notify = service._cond.notify
    service._cond.notify = lambda n=1: (notified.append(n), notify(n))
    service._sleeping = True                                       # as the flush thread is while it waits

    async def main():
        loop = asyncio.get_running_loop()
        for offset in range(10, 74):           # 64 sends before the flush thread has the GIL back
            service.wait_flushed_future(offset, loop)

    _run(main())
    assert notified == [1] and service._requested == 73


def test_an_async_producer_no_fsync_covers_is_told_false_at_its_timeout():
    def short_flush():           # every flush reaches only offset 5 (as when the transient buffer's commit lags)
        time.sleep(0.005)
        return 5

    service = GroupCommitService(short_flush, timeout_ms=200)
    service.start()

    async def main():
        loop = asyncio.get_running_loop()
        t0 = time.monotonic()
        covered, uncovered = service.wait_flushed_future(5, loop), service.wait_flushed_future(50, loop)
        assert await covered is True
        assert await uncovered is False
        assert time.monotonic() - t0 >= 0.19 and service.waiting() == 0

    try:
        _run(main())
    finally:
        service.shutdown()


def test_async_producers_of_two_loops_are_each_resolved_on_their_own_loop():
    disk = ScriptedDisk()
    service = GroupCommitService(disk.flush, timeout_ms=int(WAIT_S * 1000))
    service.start()
    seen: dict = {}
    registered = threading.Barrier(3)

    def producer(name, offset):
        async def main():
            fut = service.wait_flushed_future(offset, asyncio.get_running_loop())
            registered.wait(WAIT_S)
            seen[name] = (await fut, threading.current_thread().name)
        _run(main())

    threads = [threading.Thread(target=producer, args=(f"p{i}", off), name=f"p{i}") for i, off in ((1, 10), (2, 20))]
    try:
        for t in threads:
            t.start()
        registered.wait(WAIT_S)
        disk.results.put(20)
        for t in threads:
            t.join(WAIT_S)
        assert seen == {"p1": (True, "p1"), "p2": (True, "p2")}
    finally:
        disk.results.put(20)
        service.shutdown()


def test_async_producers_are_told_false_at_once_when_the_flush_thread_dies():
    disk = ScriptedDisk()
    service = GroupCommitService(disk.flush, timeout_ms=60_000)
    service.start()

    async def main():
        loop = asyncio.get_running_loop()
        futs = [service.wait_flushed_future(off, loop) for off in (10, 20)]
        disk.results.put(OSError("the disk went away"))
        assert await asyncio.wait_for(asyncio.gather(*futs), WAIT_S) == [False, False]

    _run(main())
    assert service.broken
    service.shutdown()
