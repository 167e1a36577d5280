"""Suspended pulls (RocketMQ ``PullRequestHoldService``), woken by the dispatcher.

A pull that finds nothing and carries the SUSPEND flag waits here until a message arrives in its
queue or its ``suspendTimeoutMillis`` runs out.  The store's dispatcher reports arrivals through
:meth:`notify_threadsafe`, which hops onto the event loop unless it already runs there; waiters
are keyed by (topic, queue id), so one arrival wakes only the pulls that can use it.  The number
of held pulls is bounded; past it a pull is answered at once.
"""

from __future__ import annotations

import asyncio

MAX_HELD_PULLS = 10_000


class LongPollingService:
    def __init__(self, loop: asyncio.AbstractEventLoop, *, max_held: int = MAX_HELD_PULLS):
        self._loop = loop
        self._max_held = max_held
        self._waiters: dict[tuple[str, int], list[asyncio.Future]] = {}
        self.held = 0

    async def wait(self, topic: str, queue_id: int, offset: int, timeout_s: float, max_offset) -> bool:
        """Wait until *max_offset()* passes *offset* or *timeout_s*; True when something arrived."""
        if self.held >= self._max_held:
            return False
        key = (topic, queue_id)
        fut = self._loop.create_future()
        self._waiters.setdefault(key, []).append(fut)
        self.held += 1
        try:
            if max_offset() > offset:          # arrived between the read and the registration
                return True
            await asyncio.wait_for(fut, timeout_s)
            return True
        except asyncio.TimeoutError:
            return False
        finally:
            self.held -= 1
            waiters = self._waiters.get(key)
            if waiters is not None and fut in waiters:
                waiters.remove(fut)
                if not waiters:
                    del self._waiters[key]

    def notify(self, topic: str, queue_id: int) -> None:
        for fut in self._waiters.pop((topic, queue_id), ()):
            if not fut.done():
                fut.set_result(True)

    def notify_threadsafe(self, topic: str, queue_id: int, _next_offset: int) -> None:
        if (topic, queue_id) in self._waiters:
            if asyncio._get_running_loop() is self._loop:     # dispatched on the loop: no hop needed
                self.notify(topic, queue_id)
            else:
                self._loop.call_soon_threadsafe(self.notify, topic, queue_id)

    def wake_all(self) -> None:
        for key in list(self._waiters):
            self.notify(*key)
