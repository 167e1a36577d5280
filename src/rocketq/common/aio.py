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
