"""A TCP relay in front of a remoting server, for tests that watch or hold what clients send.

Request frames (a 4-byte big-endian length and that many bytes) from each client connection go to
the server one at a time through :meth:`FrameRelay.before_request`, which a subclass may await on
(to hold a frame) before the frame is forwarded and counted in ``forwarded``; answers flow back
unchanged.  The relay runs its own event loop in a thread, so the test's blocking calls (a broker's
start, a Spark read) do not stop it."""

from __future__ import annotations

import asyncio
import threading

START_TIMEOUT_S = 10.0
READ_BYTES = 65_536


class FrameRelay:
    def __init__(self, target: str, name: str = "frame-relay"):
        host, _, port = target.rpartition(":")
        self.target = (host, int(port))
        self.forwarded = 0                # request frames passed on to the server
        self.port = 0
        self._name = name
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> FrameRelay:
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self._loop)
            server = self._loop.run_until_complete(asyncio.start_server(self._relay, "127.0.0.1", 0))
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            self._loop.run_forever()
            server.close()
        self._thread = threading.Thread(target=run, name=self._name, daemon=True)
        self._thread.start()
        if not ready.wait(START_TIMEOUT_S):
            raise RuntimeError(f"the {self._name} did not start")
        return self

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(START_TIMEOUT_S)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def before_request(self) -> None:
        """Awaited before each request frame is forwarded (runs on the relay's loop)."""

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
                await self.before_request()
                writer.write(frame)
                await writer.drain()
                self.forwarded += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def _copy(self, reader, writer) -> None:
        try:
            while data := await reader.read(READ_BYTES):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
