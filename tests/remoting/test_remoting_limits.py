"""ConnectionLimits on a real RemotingServer on 127.0.0.1, on asyncio's loop and on uvloop:
back-pressure on a peer that does not read, the connection limit (plain and TLS, where sockets
still waiting for their first byte count), the idle sweep, and the limits' own arithmetic."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from pathlib import Path

import pytest

from rocketq.remoting import RemotingClient, RemotingCommand, RemotingServer, ResponseCode
from rocketq.remoting.codec import encode
from rocketq.remoting.limits import Admission, ConnectionLimits, default_max_connections
from rocketq.remoting.tls import ServerTls, TlsMode, TlsServerConfig

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pki import new_pki  # noqa: E402

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a declared dependency on Linux
    uvloop = None

HOST = "127.0.0.1"
WAIT_S = 10.0
BIG, BLOCK = 2000, 2001
ANSWER_BYTES = 1 << 20


@pytest.fixture(params=["asyncio", "uvloop"] if uvloop is not None else ["asyncio"])
def run(request):
    factory = uvloop.new_event_loop if request.param == "uvloop" else None

    def runner(coro):
        with asyncio.Runner(loop_factory=factory) as r:
            return r.run(asyncio.wait_for(coro, 60))
    return runner


class Counting:
    """A handler answering BIG with 1 MiB and holding BLOCK until released; counts what it ran."""

    def __init__(self):
        self.handled = 0
        self.release = asyncio.Event()
        self.conns = []

    async def __call__(self, conn, cmd):
        self.handled += 1
        if conn not in self.conns:
            self.conns.append(conn)
        if cmd.code == BLOCK:
            await self.release.wait()
        body = b"x" * ANSWER_BYTES if cmd.code == BIG else b""
        return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, body=body)


async def wait_for(predicate, what: str, timeout_s: float = WAIT_S) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def silent_socket(port: int) -> socket.socket:
    """A peer that sends what it is told and reads nothing (small receive buffer)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    try:
        sock.connect((HOST, port))
    except BlockingIOError:
        pass
    return sock


def is_open(sock: socket.socket) -> bool:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == 1        # ESTABLISHED


def test_a_peer_that_does_not_read_stops_being_served_and_is_reset(run):
    limits = ConnectionLimits(write_high_water_bytes=64 << 10, write_low_water_bytes=16 << 10,
                              write_stall_timeout_s=0.3)

    async def main():
        handler = Counting()
        async with await RemotingServer(handler, HOST, 0, limits=limits).start() as server:
            sock = silent_socket(server.port)
            await asyncio.get_running_loop().sock_sendall(
                sock, b"".join(encode(RemotingCommand(code=BIG, opaque=i)) for i in range(1, 201)))
            await wait_for(lambda: not is_open(sock), "the stuck peer to be reset")
            # the kernel's buffers take a few answers; without back-pressure all 200 (200 MiB) are made
            assert handler.handled <= 16, f"{handler.handled} answers made for a peer that reads nothing"
            async with RemotingClient(HOST, server.port) as client:           # others still served
                assert (await client.invoke(RemotingCommand.create_request(BIG), timeout_s=WAIT_S)).code == 0
            sock.close()
    run(main())


def test_the_connection_limit_is_held_and_refusals_are_logged_once(run, caplog):
    async def main():
        handler = Counting()
        async with await RemotingServer(handler, HOST, 0, limits=ConnectionLimits(max_connections=3)).start() \
                as server:
            socks = [silent_socket(server.port) for _ in range(10)]
            await wait_for(lambda: sum(map(is_open, socks)) == 3 and len(server.connections) == 3,
                           "3 connections held, 7 closed")
            assert server.admission.refused == 7
            for sock in socks:
                sock.close()
            await wait_for(lambda: not server.connections, "the server to see the closes")
            async with RemotingClient(HOST, server.port) as client:           # room again: served
                assert (await client.invoke(RemotingCommand.create_request(BIG), timeout_s=WAIT_S)).code == 0

    with caplog.at_level(logging.WARNING, logger="rocketq.remoting"):
        run(main())
    assert sum("refused since the last report" in r.getMessage() for r in caplog.records) == 1


def test_tls_sockets_waiting_for_their_first_byte_count_against_the_limit(run, tmp_path):
    new_pki(tmp_path)
    tls = ServerTls(TlsServerConfig(TlsMode.PERMISSIVE, str(tmp_path / "server.pem"), str(tmp_path / "server.key")))

    async def main():
        server = RemotingServer(Counting(), HOST, 0, tls=tls, limits=ConnectionLimits(max_connections=3))
        async with await server.start():
            socks = [silent_socket(server.port) for _ in range(8)]          # silent: never handed over
            await wait_for(lambda: sum(map(is_open, socks)) == 3, "3 sockets waiting, 5 closed")
            assert server.admission.refused == 5
            for sock in socks:
                sock.close()
    run(main())


def test_idle_connections_are_closed_and_busy_ones_are_not(run):
    async def main():
        handler = Counting()
        async with await RemotingServer(handler, HOST, 0, limits=ConnectionLimits(idle_timeout_s=0.4)).start() \
                as server:
            async with RemotingClient(HOST, server.port) as client:
                busy = asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=WAIT_S))
                await wait_for(lambda: handler.handled == 1, "the held request to arrive")
                first = silent_socket(server.port)
                await wait_for(lambda: not is_open(first), "an idle connection to be closed")
                second = silent_socket(server.port)       # a whole idle timeout after the busy one's last byte
                await wait_for(lambda: not is_open(second), "a second idle connection to be closed")
                assert not busy.done() and not handler.conns[0].is_closing     # as quiet, but busy
                handler.release.set()
                assert (await busy).code == ResponseCode.SUCCESS
            first.close()
            second.close()
    run(main())


def test_limits_arithmetic_and_validation():
    assert default_max_connections(1 << 20) == ((1 << 20) - (1 << 18)) // 4       # a quarter kept for files
    assert default_max_connections(512) == 64                                     # at least 256 kept
    assert default_max_connections(64) == 16                                      # never below the minimum
    with pytest.raises(ValueError, match="writeBufferLowWaterMark"):
        ConnectionLimits(write_high_water_bytes=10, write_low_water_bytes=10)
    with pytest.raises(ValueError, match="serverChannelMaxIdleTimeSeconds"):
        ConnectionLimits(idle_timeout_s=-1)
    now = [0.0]
    admission = Admission("test port", 2, clock=lambda: now[0])
    assert admission.admit(1) and not admission.admit(2) and not admission.admit(5)
    assert admission.refused == 2
