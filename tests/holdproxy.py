"""A TCP relay in front of a remoting server that lets the first request frame through and holds every
later one (on any connection) until :meth:`HoldingProxy.release`; answers flow freely.  The controller
tests put it between a broker and the controller to hold the broker's heartbeats after its start-up
query - the moment a controller may elect a successor - for as long as the test needs; the broker's
tests between a broker and its NameServer, to hold the registrations after its start-up one.

It is a :class:`relay.FrameRelay` (tests/relay.py): its own event loop in a thread."""

from __future__ import annotations

import asyncio

from relay import FrameRelay


class HoldingProxy(FrameRelay):
    def __init__(self, target: str):
        super().__init__(target, name="holding proxy")
        self.held = 0                     # request frames that waited for release()
        self._released = asyncio.Event()

    @property
    def passed(self) -> int:
        """Request frames forwarded."""
        return self.forwarded

    def release(self) -> None:
        self._loop.call_soon_threadsafe(self._released.set)

    async def before_request(self) -> None:
        if self.forwarded >= 1 and not self._released.is_set():
            self.held += 1
            await self._released.wait()
