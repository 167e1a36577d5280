"""A TCP relay in front of a remoting server that lets the first request frame through and holds every
later one (on any connection) until :meth:`HoldingProxy.release`; answers flow freely.  The controller
tests put it between a broker and the controller to hold the broker's heartbeats after its start-up
query - the moment a controller may elect a successor - for as long as the test needs.

It runs its own event loop in a thread, so the test's blocking calls (a broker's start) do not stop it.
A remoting frame is a 4-byte big-endian length and that many bytes."""

from __future__ import annotations

import asyncio
import threading

START_TIMEOUT_S = 10.0


class HoldingProxy:
    def __init__(self, target: str):
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.passed = 0                   # request frames forwarded
        self.held = 0                     # request frames that waited for release()
        self._loop = asyncio.new_event_loop()
        self._released = asyncio.Event()
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> HoldingProxy:
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self._loop)
            server = self._loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", 0))
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()
            server.close()
        self._thread = threading.Thread(target=run, name="holding-proxy", daemon=True)
        self._thread.start()
        if not ready.wait(START_TIMEOUT_S):
            raise RuntimeError("the holding proxy did not start")
        return self

    def release(self) -> None:
        self._loop.call_soon_threadsafe(self._released.set)

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_TIMEOUT_S)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        tasks = [asyncio.ensure_future(self._requests(reader, up_writer)),
                 asyncio.ensure_future(self._copy(up_reader, writer))]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for w in (writer, up_writer):
            w.close()

    async def _requests(self, reader, writer) -> None:
        try:
            while True:
                head = await reader.readexactly(4)
                frame = head + await reader.readexactly(int.from_bytes(head, "big"))
                if self.passed >= 1 and not self._released.is_set():
                    self.held += 1
                    await self._released.wait()
                writer.write(frame)
                await writer.drain()
                self.passed += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def _copy(self, reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
