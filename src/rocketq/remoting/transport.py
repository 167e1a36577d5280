"""Remoting server and client: listening, connecting and reconnecting around :class:`RemotingConnection`.

The transport is asyncio only; it never imports uvloop.  Whoever runs it picks the loop
(``asyncio.run(main())`` or ``uvloop.run(main())``) and the transport works on either.

Server::

    server = RemotingServer(handler, "0.0.0.0", 10911)
    await server.start()                 # server.port is the bound port (useful with port 0)
    ...
    await server.close()                 # stops listening, closes connections, cancels handlers

    async def handler(conn, cmd):        # conn: RemotingConnection, cmd: RemotingCommand
        if cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC: ...
        return not_supported_response(cmd)   # what Java answers for codes nobody handles

A handler returns the response (its opaque and RESPONSE flag are set for it), or ``None`` to
answer later with ``conn.send_response`` or not at all.  An exception from it is logged and
answered SYSTEM_ERROR with the exception as remark; :class:`RemotingCommandError` (a bad header
field) is answered the same way but logged briefly.  ``conn.send_request`` /
``conn.send_oneway`` send server-to-client requests (CHECK_TRANSACTION_STATE,
GET_CONSUMER_RUNNING_INFO, ...).

Client::

    client = RemotingClient("127.0.0.1", 9876)
    response = await client.invoke(RemotingCommand.create_request(105, {"topic": "T"}), timeout_s=3)
    await client.close()

Limits (:class:`~rocketq.remoting.limits.ConnectionLimits`, one per server): past
``max_connections`` a new connection is accepted and closed at once (refusals logged once per
interval); a sweeper closes connections idle for ``idle_timeout_s``; the listen backlog is
``backlog``.  A server connection whose answers queue past ``write_high_water_bytes`` stops being
read - no new request is taken from it, and the requests already read wait before their handlers -
until they drain below ``write_low_water_bytes``, as RocketMQ turns auto-read off on a channel that
is not writable; one whose peer takes no byte for ``write_stall_timeout_s`` is aborted.  So what one
connection makes the server hold is about the high-water mark plus one answer, whatever it sends.

The client connects on first use and again on the first use after the connection dropped;
``timeout_s`` bounds the whole call, connecting included.  Opaques come from one counter per
client, so they stay unique across reconnections.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
import sys
from typing import Callable

from rocketq.remoting.codec import DEFAULT_MAX_FRAME_BYTES
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.connection import (
    DEFAULT_MAX_INFLIGHT,
    DEFAULT_MAX_PENDING,
    DEFAULT_REQUEST_TIMEOUT_S,
    Handler,
    OpaqueCounter,
    RemotingConnection,
)
from rocketq.remoting.errors import RemotingConnectError, RemotingConnectionClosedError, RemotingTimeoutError
from rocketq.remoting.limits import IDLE_SWEEPS_PER_TIMEOUT, Admission, ConnectionLimits, IntervalLog
from rocketq.remoting.tls import ServerTls, TlsListener, TlsMode

log = logging.getLogger("rocketq.remoting")

DEFAULT_CONNECT_TIMEOUT_S = 3.0
SHUTDOWN_GRACE_S = 2.0               # how long close() lets connections flush before aborting them
LINGER_RESET = struct.pack("ii", 1, 0)   # SO_LINGER on, 0 s: close() resets the connection
TCP_INFO_BYTES = 128                 # struct tcp_info up to tcpi_bytes_acked (Linux 4.1+)
TCP_INFO_BYTES_ACKED = slice(120, 128)   # __u64 tcpi_bytes_acked, host byte order


class RemotingServer:
    """Listens on ``host:port`` and serves every connection with ``handler``."""

    def __init__(self, handler: Handler, host: str = "0.0.0.0", port: int = 0, *,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 max_inflight_per_connection: int = DEFAULT_MAX_INFLIGHT,
                 max_pending_per_connection: int = DEFAULT_MAX_PENDING,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                 on_connect: Callable[[RemotingConnection], object] | None = None,
                 tls: ServerTls | None = None, limits: ConnectionLimits = ConnectionLimits(),
                 what: str = "remoting server", eager_codes: frozenset[int] = frozenset()) -> None:
        self._handler = handler
        self._eager_codes = eager_codes                    # see RemotingConnection
        self.limits = limits
        self.what = what                                   # names the port in logs
        self.admission: Admission | None = None            # made at start(): the limit may come from RLIMIT_NOFILE
        self.stall_resets = IntervalLog()                   # connections reset for reading nothing
        self._sweeper: asyncio.Task | None = None
        self._tls = tls if tls is not None and tls.mode != TlsMode.DISABLED else None
        self._listener: TlsListener | None = None          # TLS modes: our own accept loop
        self.host = host
        self._port = port
        self._max_frame_bytes = max_frame_bytes
        self._max_inflight = max_inflight_per_connection
        self._max_pending = max_pending_per_connection
        self._request_timeout_s = request_timeout_s
        self._on_connect = on_connect
        self._server: asyncio.Server | None = None
        self.connections: set[RemotingConnection] = set()

    @property
    def port(self) -> int:
        """The bound port (the real one when constructed with port 0)."""
        if self._listener is not None:
            return self._listener.port
        if self._server is None or not self._server.sockets:
            return self._port
        return self._server.sockets[0].getsockname()[1]

    async def start(self, *, serving: bool = True) -> "RemotingServer":
        """Bind and listen; calling it again on a started server does nothing.  With
        ``serving=False`` the port is bound (so :attr:`port` is known) but connections are only
        accepted after :meth:`serve`."""
        if self._server is not None or self._listener is not None:
            return self
        loop = asyncio.get_running_loop()
        self.admission = Admission(self.what, self.limits.connections_limit())
        if self.limits.idle_timeout_s > 0:
            self._sweeper = asyncio.create_task(self._sweep_idle(self.limits.idle_timeout_s))
        if self._tls is not None:
            self._listener = TlsListener(self._tls, self.host, self._port, self._new_connection, what=self.what,
                                         backlog=self.limits.backlog, admit=self._admit_handshake).bind()
            log.info("%s bound to %s:%d (TLS %s)", self.what, self.host, self.port, self._tls.mode.value)
            if serving:
                await self.serve()
            return self
        self._server = await loop.create_server(self._new_connection, self.host, self._port, reuse_address=True,
                                                backlog=self.limits.backlog, start_serving=serving)
        log.info("%s bound to %s:%d (at most %d connections)", self.what, self.host, self.port, self.admission.limit)
        return self

    async def serve(self) -> None:
        """Start accepting connections on a server started with ``serving=False``."""
        if self._listener is not None:
            self._listener.serve()
            return
        if self._server is None:
            raise RuntimeError("serve() before start()")
        await self._server.start_serving()

    async def close(self) -> None:
        """Stop listening, close every connection (abort those that do not flush in time),
        and cancel handlers still running."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        if self._server is not None:
            self._server.close()
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        connections = list(self.connections)
        for conn in connections:
            conn.close()
        await _wait_or_abort(connections, SHUTDOWN_GRACE_S)
        tasks = [task for conn in connections for task in conn.cancel_handlers()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> "RemotingServer":
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def _new_connection(self) -> RemotingConnection:
        conn = _ServerConnection(self, self._handler, max_frame_bytes=self._max_frame_bytes,
                                 max_inflight=self._max_inflight, max_pending=self._max_pending,
                                 request_timeout_s=self._request_timeout_s, eager_codes=self._eager_codes)
        return conn

    def _admit_handshake(self, handing_over: int) -> bool:
        """TLS modes: may a socket just accepted wait for its first byte (counting those that do)?"""
        return self.admission.admit(len(self.connections) + handing_over)

    async def _sweep_idle(self, timeout_s: float) -> None:
        """Close connections that carried nothing and had nothing in flight for *timeout_s*."""
        while True:
            await asyncio.sleep(timeout_s / IDLE_SWEEPS_PER_TIMEOUT)
            idle = [conn for conn in list(self.connections) if conn.idle_sweep(IDLE_SWEEPS_PER_TIMEOUT)]
            for conn in idle:
                conn.close()
            if idle:
                log.info("%s: closed %d idle connection(s): no traffic for %g s (serverChannelMaxIdleTimeSeconds)",
                         self.what, len(idle), timeout_s)

    def _connected(self, conn: RemotingConnection) -> None:
        self.connections.add(conn)
        conn.on_close(self.connections.discard)
        if self._on_connect is not None:
            try:
                self._on_connect(conn)
            except Exception:
                log.exception("on_connect callback failed for %s", conn.peer)


class _ServerConnection(RemotingConnection):
    """A server's connection: admitted (or closed at once) and tracked by its server; stops reading
    while its peer does not read the answers, and is aborted if the peer takes nothing for the
    stall timeout."""

    def __init__(self, server: RemotingServer, handler: Handler, **kwargs) -> None:
        super().__init__(handler, **kwargs)
        self._server = server
        self._stall_timer: asyncio.TimerHandle | None = None
        self._progress_at_check = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._server.admission.admit(len(self._server.connections)):
            transport.abort()                          # accepted and closed: the backlog keeps draining
            return
        super().connection_made(transport)
        limits = self._server.limits
        transport.set_write_buffer_limits(high=limits.write_high_water_bytes,  # type: ignore[attr-defined]
                                          low=limits.write_low_water_bytes)
        self._server._connected(self)

    def pause_writing(self) -> None:
        super().pause_writing()
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.pause_reading()                  # no new request until the answers drain
            self._progress_at_check = self._progress()
            self._stall_timer = self._loop.call_later(self._server.limits.write_stall_timeout_s, self._check_stall)

    def resume_writing(self) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        transport = self._transport
        if transport is not None and not transport.is_closing():
            transport.resume_reading()
        super().resume_writing()

    def _progress(self) -> int:
        """Bytes the peer acknowledged (TCP_INFO): they grow exactly while it reads.  The transport's
        own count (bytes the kernel took from it) is the fallback where TCP_INFO is missing; it is
        a poor one - the kernel's send queue can hold megabytes, taking bytes from a peer that reads
        none and holding back from a slow reader until a third of it is free."""
        acked = _acked_bytes(self._transport)
        return self.sent_bytes if acked is None else acked

    def connection_lost(self, exc: Exception | None) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None
        super().connection_lost(exc)

    def _check_stall(self) -> None:
        """The peer took no byte since the last check: it is stuck, not slow - abort."""
        self._stall_timer = None
        if not self._write_paused or self._closing:
            return
        progress, timeout_s = self._progress(), self._server.limits.write_stall_timeout_s
        if progress != self._progress_at_check:        # a slow reader: back-pressure, not an end
            self._progress_at_check = progress
            self._stall_timer = self._loop.call_later(timeout_s, self._check_stall)
            return
        queued, what, peer = self._transport.get_write_buffer_size(), self._server.what, self.peer
        self._server.stall_resets(lambda n: log.warning(
            "%s: reset %d connection(s) since the last report that read nothing for %g s "
            "(serverWriteStallTimeoutSeconds); the last, from %s, left %d bytes unread",
            what, n, timeout_s, peer, queued))
        _reset_on_close(self._transport)
        self.abort()


class RemotingClient:
    """Requests to one address over one connection, made when first needed and remade after a drop."""

    def __init__(self, host: str, port: int, *, handler: Handler | None = None,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 max_pending_requests: int = DEFAULT_MAX_PENDING,
                 max_inflight: int = DEFAULT_MAX_INFLIGHT, ssl_context: ssl.SSLContext | None = None) -> None:
        self.host = host
        self._ssl = ssl_context
        self.port = port
        self._handler = handler
        self._connect_timeout_s = connect_timeout_s
        self._max_frame_bytes = max_frame_bytes
        self._max_pending = max_pending_requests
        self._max_inflight = max_inflight
        self._opaques = OpaqueCounter()
        self._conn: RemotingConnection | None = None
        self._connect_lock = asyncio.Lock()
        self._closed = False

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connection(self) -> RemotingConnection | None:
        """The current connection, if one is open."""
        conn = self._conn
        return conn if conn is not None and not conn.is_closing else None

    async def connect(self, timeout_s: float | None = None) -> RemotingConnection:
        """The open connection, connecting first if there is none."""
        conn = self.connection
        if conn is not None:
            return conn
        timeout_s = self._connect_timeout_s if timeout_s is None else min(timeout_s, self._connect_timeout_s)
        async with self._connect_lock:
            conn = self.connection
            if conn is None:
                conn = await self._open(timeout_s)
                self._conn = conn
            return conn

    async def invoke(self, cmd: RemotingCommand, timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> RemotingCommand:
        """Send *cmd* (its opaque is assigned here) and return the response."""
        conn = self._conn
        if conn is not None and not conn.is_closing:        # connected: no deadline arithmetic, no connect()
            return await conn.send_request(cmd, timeout_s=timeout_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        conn = await self.connect(timeout_s)
        return await conn.send_request(cmd, timeout_s=max(deadline - loop.time(), 0.0))

    async def invoke_oneway(self, cmd: RemotingCommand, timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        """Send *cmd* with the ONEWAY flag; returns once it is written (or buffered below the high-water mark)."""
        conn = await self.connect(timeout_s)
        try:
            async with asyncio.timeout(timeout_s):
                await conn.send_oneway(cmd)
        except TimeoutError:
            raise RemotingTimeoutError(f"could not write oneway request code {cmd.code} to {self.address} "
                                       f"within {timeout_s}s") from None

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            await _wait_or_abort([conn], SHUTDOWN_GRACE_S)

    async def __aenter__(self) -> "RemotingClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _open(self, timeout_s: float) -> RemotingConnection:
        if self._closed:
            raise RemotingConnectionClosedError(f"client for {self.address} is closed")
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout_s):
                _, conn = await loop.create_connection(self._new_connection, self.host, self.port, ssl=self._ssl,
                                                       server_hostname=self.host if self._ssl else None)
        except TimeoutError:
            raise RemotingConnectError(f"could not connect to {self.address} within {timeout_s}s") from None
        except (OSError, ssl.SSLError) as exc:
            raise RemotingConnectError(f"could not connect to {self.address}: {exc}") from exc
        log.debug("connected to %s", self.address)
        return conn

    def _new_connection(self) -> RemotingConnection:
        return RemotingConnection(self._handler, max_frame_bytes=self._max_frame_bytes,
                                  max_inflight=self._max_inflight, max_pending=self._max_pending,
                                  next_opaque=self._opaques)


def _acked_bytes(transport: asyncio.BaseTransport | None) -> int | None:
    """Bytes the peer has acknowledged on this TCP connection (Linux TCP_INFO), or None where unknown."""
    sock = transport.get_extra_info("socket") if transport is not None else None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_BYTES)
    except (AttributeError, OSError):
        return None
    return int.from_bytes(info[TCP_INFO_BYTES_ACKED], sys.byteorder) if len(info) >= TCP_INFO_BYTES else None


def _reset_on_close(transport: asyncio.BaseTransport) -> None:
    """Make closing send RST at once: a plain close would leave the kernel holding the unsent bytes
    (and the peer's connection open) for as long as the peer keeps its window shut."""
    sock = transport.get_extra_info("socket")
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, LINGER_RESET)
    except (AttributeError, OSError):
        pass                              # no socket (a test transport) or already gone: a plain close


async def _wait_or_abort(connections: list[RemotingConnection], grace_s: float) -> None:
    if not connections:
        return
    waits = [asyncio.ensure_future(conn.wait_closed()) for conn in connections]
    _, late = await asyncio.wait(waits, timeout=grace_s)
    for conn in connections:
        if not conn.is_closed:
            conn.abort()
    if late:
        await asyncio.wait(late)

