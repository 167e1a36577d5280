"""TLS for the remoting ports, with RocketMQ's three modes and certificate reload.

``tlsMode`` (RocketMQ's ``tls.server.mode``):

* ``disabled``   - plain TCP only (the default);
* ``permissive`` - plain and TLS clients on the same port: the first byte a client sends decides
  (0x16 opens a TLS handshake record; a remoting frame starts with its length, whose first byte
  is 0 for any frame under 16 MiB);
* ``enforcing``  - TLS only; a plain client's connection is closed.

The server never speaks first on a remoting connection, so peeking at the client's first byte
(``MSG_PEEK``, nothing consumed) is enough to choose; the socket is then handed to the event
loop with or without the SSL context.  The context is rebuilt when the certificate, key or
trust file changes (checked at most once a second, on new connections), as the NameServer's
FileWatchService does in RocketMQ: connections made after the change use the new certificate.

:class:`TlsListener` is that accept loop (peek, then TLS or plain), shared by the remoting server
and the HA master (``haListenPort``, whose slave also speaks first: its sign-in, starting with ``R``).  The
gRPC endpoint serves the same certificate from :attr:`ServerTls.pems` (see
``rocketq.grpc_endpoint.endpoint``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from enum import Enum
from typing import Callable

log = logging.getLogger(__name__)

TLS_HANDSHAKE_RECORD = 0x16
FIRST_BYTE_TIMEOUT_S = 10.0
RELOAD_CHECK_INTERVAL_S = 1.0
ACCEPT_RETRY_S = 1.0                   # after accept() fails for want of descriptors or memory


class TlsMode(str, Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"

    @classmethod
    def parse(cls, text: str) -> TlsMode:
        try:
            return cls(str(text).strip().lower())
        except ValueError:
            raise ValueError(f"tlsMode {text!r} is not one of disabled, permissive, enforcing") from None


@dataclass(frozen=True)
class TlsServerConfig:
    mode: TlsMode = TlsMode.DISABLED
    cert_path: str | None = None
    key_path: str | None = None
    trust_cert_path: str | None = None     # CA file to verify client certificates with
    need_client_auth: str = "none"         # none | optional | require

    def __post_init__(self) -> None:
        if self.mode != TlsMode.DISABLED and not (self.cert_path and self.key_path):
            raise ValueError(f"tlsMode {self.mode.value} needs tls.server.certPath and tls.server.keyPath")
        if self.need_client_auth not in ("none", "optional", "require"):
            raise ValueError(f"tls.server.need.client.auth {self.need_client_auth!r} is not none, optional or require")


class ServerTls:
    """The server's SSL context, rebuilt when its files change."""

    def __init__(self, config: TlsServerConfig, clock=time.monotonic):
        self.config = config
        self._clock = clock
        self._paths = [p for p in (config.cert_path, config.key_path, config.trust_cert_path) if p]
        self._lock = threading.Lock()          # the gRPC endpoint checks from grpc's own threads
        self._stamps = self._file_stamps()
        self.pems: tuple[bytes, bytes, bytes | None] = (b"", b"", None)
        self._context = self._build()          # bad files are an error at start-up
        self._checked_at = clock()
        self.reloads = 0

    @property
    def mode(self) -> TlsMode:
        return self.config.mode

    def _file_stamps(self) -> list[tuple[int, int] | None]:
        out = []
        for p in self._paths:
            try:
                st = os.stat(p)
                out.append((st.st_mtime_ns, st.st_size))
            except OSError:
                out.append(None)
        return out

    def _build(self) -> ssl.SSLContext:
        cfg = self.config
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            trust = _read(cfg.trust_cert_path) if cfg.trust_cert_path else None
            pems = (_read(cfg.cert_path), _read(cfg.key_path), trust)
            ctx.load_cert_chain(cfg.cert_path, cfg.key_path)
            if cfg.trust_cert_path:
                ctx.load_verify_locations(cfg.trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"TLS certificate {cfg.cert_path} / key {cfg.key_path}: {exc}") from None
        ctx.verify_mode = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
                           "require": ssl.CERT_REQUIRED}[cfg.need_client_auth]
        self.pems = pems                       # (certificate chain, key, trust) as loaded, for gRPC
        return ctx

    def context(self) -> ssl.SSLContext:
        """The current context (the files are checked for changes at most once a second)."""
        self.reload_if_changed()
        return self._context

    def reload_if_changed(self) -> bool:
        """Rebuild the context if the files changed since the last check; True when it was rebuilt."""
        with self._lock:
            now = self._clock()
            if now - self._checked_at < RELOAD_CHECK_INTERVAL_S:
                return False
            self._checked_at = now
            stamps = self._file_stamps()
            if stamps == self._stamps:
                return False
            self._stamps = stamps
            try:
                self._context = self._build()
            except ValueError as exc:     # half-written files: keep serving with the old context
                log.error("TLS certificate not reloaded, the old one stays in use: %s", exc)
                return False
            self.reloads += 1
            log.info("TLS certificate reloaded from %s", self.config.cert_path)
            return True

    def snapshot(self) -> tuple[int, tuple[bytes, bytes, bytes | None]]:
        """(:attr:`reloads`, :attr:`pems`), consistent with each other."""
        with self._lock:
            return self.reloads, self.pems


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def client_context(trust_cert_path: str | None = None, *, verify: bool = True,
                   cert_path: str | None = None, key_path: str | None = None) -> ssl.SSLContext:
    """An SSL context for RemotingClient (``verify=False`` is RocketMQ's default ``tls.test.mode``)."""
    ctx = ssl.create_default_context(cafile=trust_cert_path) if verify else ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if not verify:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert_path:
        ctx.load_cert_chain(cert_path, key_path)
    return ctx


async def first_byte(sock: socket.socket, timeout_s: float = FIRST_BYTE_TIMEOUT_S) -> int | None:
    """The first byte the peer sent, peeked (not consumed); None if it closed or stayed silent."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_reader(sock.fileno(), lambda: ready.done() or ready.set_result(None))
    try:
        await asyncio.wait_for(ready, timeout_s)
    except TimeoutError:
        return None
    finally:
        loop.remove_reader(sock.fileno())
    try:
        data = sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, InterruptedError, ConnectionError):
        return None
    return data[0] if data else None


def is_tls_hello(byte: int | None) -> bool:
    return byte == TLS_HANDSHAKE_RECORD


class TlsListener:
    """A listening socket whose connections are served with TLS or without, as *tls*'s mode allows.

    Each accepted socket waits for the client's first byte (peeked): a TLS handshake record gets
    the current (reloaded) SSL context; anything else is served plain in ``permissive`` mode and
    closed in ``enforcing`` mode.  The socket then goes to the event loop with *protocol_factory*
    (``loop.connect_accepted_socket``).  *what* names the port in logs.  *admit*, given the number
    of sockets waiting for their first byte, says whether one more may wait (else it is closed at
    once: the owner's connection limit counts those too); *backlog* is the listen queue."""

    def __init__(self, tls: ServerTls, host: str, port: int,
                 protocol_factory: Callable[[], asyncio.BaseProtocol], *, what: str = "server",
                 backlog: int = 1024, admit: Callable[[int], bool] | None = None) -> None:
        self.tls, self.host, self._port = tls, host, port
        self._factory = protocol_factory
        self._what = what
        self._backlog = backlog
        self._admit = admit
        self._sock: socket.socket | None = None
        self._accepting: asyncio.Task | None = None
        self._accepted: set[asyncio.Task] = set()

    def bind(self) -> TlsListener:
        self._sock = socket.create_server((self.host, self._port), backlog=self._backlog,
                                          family=socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        self._sock.setblocking(False)
        return self

    @property
    def port(self) -> int:
        return self._sock.getsockname()[1] if self._sock is not None else self._port

    def serve(self) -> None:
        if self._accepting is None:
            self._accepting = asyncio.create_task(self._accept_loop())

    def close(self) -> None:
        """Stop accepting (connections already handed over are the caller's)."""
        if self._accepting is not None:
            self._accepting.cancel()
            self._accepting = None
        for task in list(self._accepted):
            task.cancel()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(self._sock)
            except OSError as exc:         # EMFILE, ENOBUFS: keep listening, as asyncio's accept loop does
                log.error("%s: accept failed, retrying in %g s: %s", self._what, ACCEPT_RETRY_S, exc)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            if self._admit is not None and not self._admit(len(self._accepted)):
                sock.close()
                continue
            task = asyncio.create_task(self._hand_over(sock))
            self._accepted.add(task)
            task.add_done_callback(self._accepted.discard)

    async def _hand_over(self, sock: socket.socket) -> None:
        try:
            first = await first_byte(sock)
            tls = is_tls_hello(first)
            if first is None or (not tls and self.tls.mode == TlsMode.ENFORCING):
                log.info("%s: closing %s: %s", self._what, _peer_of(sock), "no data" if first is None else
                         "plain connection refused, tlsMode is enforcing")
                sock.close()
                return
            await asyncio.get_running_loop().connect_accepted_socket(
                self._factory, sock, ssl=self.tls.context() if tls else None,
                ssl_handshake_timeout=FIRST_BYTE_TIMEOUT_S if tls else None)
        except (OSError, ssl.SSLError, TimeoutError) as exc:
            log.info("%s: connection from %s failed before serving: %s", self._what, _peer_of(sock), exc)
            sock.close()


def _peer_of(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
    except OSError:
        return "?"
    return f"{host}:{port}"
