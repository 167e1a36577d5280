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
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
import time
from dataclasses import dataclass
from enum import Enum

log = logging.getLogger(__name__)

TLS_HANDSHAKE_RECORD = 0x16
FIRST_BYTE_TIMEOUT_S = 10.0
RELOAD_CHECK_INTERVAL_S = 1.0


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
        self._stamps = self._file_stamps()
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
            ctx.load_cert_chain(cfg.cert_path, cfg.key_path)
            if cfg.trust_cert_path:
                ctx.load_verify_locations(cfg.trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"TLS certificate {cfg.cert_path} / key {cfg.key_path}: {exc}") from None
        ctx.verify_mode = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL,
                           "require": ssl.CERT_REQUIRED}[cfg.need_client_auth]
        return ctx

    def context(self) -> ssl.SSLContext:
        now = self._clock()
        if now - self._checked_at >= RELOAD_CHECK_INTERVAL_S:
            self._checked_at = now
            stamps = self._file_stamps()
            if stamps != self._stamps:
                self._stamps = stamps
                try:
                    self._context = self._build()
                    self.reloads += 1
                    log.info("TLS certificate reloaded from %s", self.config.cert_path)
                except ValueError as exc:     # half-written files: keep serving with the old context
                    log.error("TLS certificate not reloaded, the old one stays in use: %s", exc)
        return self._context


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
