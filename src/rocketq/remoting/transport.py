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

The client connects on first use and again on the first use after the connection dropped;
``timeout_s`` bounds the whole call, connecting included.  Opaques come from one counter per
client, so they stay unique across reconnections.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
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
from rocketq.remoting.tls import ServerTls, TlsListener, TlsMode

log = logging.getLogger("rocketq.remoting")

DEFAULT_CONNECT_TIMEOUT_S = 3.0
SHUTDOWN_GRACE_S = 2.0               # how long close() lets connections flush before aborting them


class RemotingServer:
    """Listens on ``host:port`` and serves every connection with ``handler``."""

    def __init__(self, handler: Handler, host: str = "0.0.0.0", port: int = 0, *,
                 max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 max_inflight_per_connection: int = DEFAULT_MAX_INFLIGHT,
                 max_pending_per_connection: int = DEFAULT_MAX_PENDING,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                 on_connect: Callable[[RemotingConnection], object] | None = None,
                 tls: ServerTls | None = None) -> None:
        self._handler = handler
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
        if self._tls is not None:
            self._listener = TlsListener(self._tls, self.host, self._port, self._new_connection,
                                         what="remoting server").bind()
            log.info("remoting server bound to %s:%d (TLS %s)", self.host, self.port, self._tls.mode.value)
            if serving:
                await self.serve()
            return self
        self._server = await loop.create_server(self._new_connection, self.host, self._port, reuse_address=True,
                                                start_serving=serving)
        log.info("remoting server bound to %s:%d", self.host, self.port)
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
                                 request_timeout_s=self._request_timeout_s)
        return conn

    def _connected(self, conn: RemotingConnection) -> None:
        self.connections.add(conn)
        conn.on_close(self.connections.discard)
        if self._on_connect is not None:
            try:
                self._on_connect(conn)
            except Exception:
                log.exception("on_connect callback failed for %s", conn.peer)


class _ServerConnection(RemotingConnection):
    """A connection that tells its server when it is made (so the server can track it)."""

    def __init__(self, server: RemotingServer, handler: Handler, **kwargs) -> None:
        super().__init__(handler, **kwargs)
        self._server = server

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._server._connected(self)


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

