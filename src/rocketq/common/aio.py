"""Small asyncio helpers shared by the servers and the client."""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """Wait for *event* at most *timeout_s*; True if it was set.

    ``asyncio.timeout`` instead of ``asyncio.wait_for``: on Python 3.11, ``wait_for`` can swallow a
    cancellation that arrives just as the event is set, and a loop around it then never stops
    (seen: a broker shutdown hanging on its timer task)."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
        return True
    except TimeoutError:
        return False


async def cancel_and_wait(task: asyncio.Task | None, *, retry_s: float = 0.5, give_up_s: float = 10.0) -> None:
    """Cancel *task* and wait for it to end, cancelling again if a cancellation was swallowed
    (the same Python 3.11 ``wait_for`` race); gives up after *give_up_s*."""
    if task is None or task.done():
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + give_up_s
    while not task.done() and loop.time() < deadline:
        task.cancel()
        await asyncio.wait([task], timeout=retry_s)


def start_eagerly(loop: asyncio.AbstractEventLoop, coro) -> asyncio.Task | None:
    """Run *coro* up to its first suspension here and now (Python 3.12's eager tasks, by hand); None
    when it finished without waiting, else the task that goes on running it. An exception it raises
    before its first wait propagates to the caller."""
    try:
        waited_on = coro.send(None)
    except StopIteration:
        return None
    return loop.create_task(_resume(coro, waited_on))


async def _resume(coro, waited_on):
    return await _Started(coro, waited_on)


class _Started:
    """``await _Started(coro, waited_on)`` finishes *coro*, a coroutine already run up to a wait
    (it yielded *waited_on*: a future, or None for a bare yield): the awaiting task takes that yield
    as its own, as ``yield from`` a fresh coroutine would, and passes values, exceptions and
    cancellation through."""

    __slots__ = ("_coro", "_waited_on")

    def __init__(self, coro, waited_on) -> None:
        self._coro, self._waited_on = coro, waited_on

    def __await__(self):
        coro, value = self._coro, self._waited_on
        while True:
            try:
                sent = yield value
            except BaseException as exc:          # noqa: BLE001 - the task's cancellation (or close) goes to coro
                try:
                    value = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as stop:
                    return stop.value
