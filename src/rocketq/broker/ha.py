"""Replication of the CommitLog from a master to its slaves (RocketMQ's HAService), over asyncio.

The wire, on a TCP connection the slave opens to the master's ``haListenPort`` (big-endian), after
the handshake of :mod:`rocketq.broker.ha_auth` (with ACL on, the slave proves it holds an admin
account; nothing of the log is sent before)::

    slave  -> master   int64 slave's CommitLog end            (on connect, after every chunk it
                                                                 wrote, and every second when idle)
    master -> slave    int64 offset | int32 size | size bytes  (the master's CommitLog bytes from
                                                                 offset; size 0 is a heartbeat)

The master starts a slave at the offset it reports (at the master's first segment when the slave
is empty) and streams the log in chunks of up to ``MAX_CHUNK`` bytes, never crossing a segment and
always ending on a record boundary (a record larger than ``MAX_CHUNK`` goes whole), as new bytes
arrive - so a slave's log always ends between records, where a new master's epoch can start and
where the slave's dispatch continues.  A slave that reports an end past the master's end has bytes
the master never had (a divergent tail): the master refuses it.  The slave writes the chunks with
:meth:`MessageStore.append_replicated` - same bytes, same offsets, so message ids and queue offsets
are equal on both - and dispatches them to its own
consume queues and index.  A chunk that does not start at the slave's end (a divergent or stale
slave) closes the connection with an error naming both offsets; the slave reconnects and reports
its real end.

``SYNC_MASTER``: a send is acknowledged only when some slave has reported an end past it
(:meth:`HAMaster.wait_replicated`, bounded by ``syncFlushTimeout``): FLUSH_SLAVE_TIMEOUT when it
does not come in time, SLAVE_NOT_AVAILABLE when no slave is connected or the best one is more than
``HA_MAX_GAP`` bytes behind, as in RocketMQ.

TLS: with the broker's ``tlsMode`` not ``disabled`` the master's port is a
:class:`~rocketq.remoting.tls.TlsListener`, as the remoting port is - ``permissive`` serves plain and
TLS slaves on the one port (the slave speaks first, and the first byte of its CommitLog end is 0,
never 0x16, a TLS handshake record), ``enforcing`` closes plain connections; each new connection
gets the current certificate (reloaded when its files change); ``tls.server.need.client.auth=require``
admits only slaves with a certificate the trust file vouches for.  A slave connects with TLS when the
broker's ``tls.enable`` is on (``ssl_context``: the broker's ``client_ssl_context``, called for
every connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import struct

from rocketq.acl.validator import AclDenied
from rocketq.broker import ha_auth
from rocketq.common.aio import cancel_and_wait, wait_event
from rocketq.remoting.limits import Admission, ConnectionLimits
from rocketq.remoting.tls import ServerTls, TlsListener, TlsMode

log = logging.getLogger(__name__)

MAX_CHUNK = 1 << 20
HA_MAX_GAP = 256 << 20                  # haMaxGapNotInSync
REPORT_INTERVAL_S = 1.0
RECONNECT_INTERVAL_S = 1.0
REFUSED_RETRY_INTERVAL_S = 5.0          # a slave the master refused (credentials) tries again this often
HEARTBEAT_INTERVAL_S = 5.0
IDLE_TIMEOUT_S = 20.0                   # no report from a slave for this long: drop it
_HEAD = struct.Struct(">qi")
_OFFSET = struct.Struct(">q")


class HAMaster:
    def __init__(self, store, host: str, port: int, *, tls: ServerTls | None = None, acl=None,
                 limits: ConnectionLimits = ConnectionLimits()):
        self.store, self.host, self.port = store, host, port
        self.acl = acl                               # the broker's AclValidator: slaves must prove an admin account
        self.limits = limits                         # its connection limit and backlog (HA has its own idle timeout)
        self.admission: Admission | None = None
        self.tls = tls if tls is not None and tls.mode != TlsMode.DISABLED else None
        self._server: asyncio.AbstractServer | None = None
        self._listener: TlsListener | None = None
        self._new_data = asyncio.Event()
        self._acked = asyncio.Condition()
        self.slaves: dict[str, int] = {}            # peer -> its reported end
        self._serving: set[asyncio.Task] = set()     # one per slave connection, cancelled by close()

    async def start(self) -> HAMaster:
        self.admission = Admission("HA master", self.limits.connections_limit())
        try:
            if self.tls is not None:
                self._listener = TlsListener(self.tls, self.host, self.port, self._stream_protocol, what="HA master",
                                             backlog=self.limits.backlog, admit=self._admit_handshake).bind()
                self._listener.serve()
                self.port = self._listener.port
            else:
                self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True,
                                                          backlog=self.limits.backlog)
                self.port = self._server.sockets[0].getsockname()[1]
        except OSError as exc:
            raise OSError(exc.errno, f"HA port {self.host}:{self.port} (haListenPort): {exc.strerror}") from None
        log.info("HA master listening on %s:%d%s, %s", self.host, self.port,
                 f" (TLS {self.tls.mode.value})" if self.tls is not None else "",
                 "slaves must sign in with an admin account" if self.acl is not None
                 else "ACL off: any slave is served")
        return self

    def _admit_handshake(self, waiting: int) -> bool:
        """TLS modes: sockets waiting for their first byte count against the connection limit too."""
        return self.admission.admit(len(self._serving) + waiting)

    def _stream_protocol(self) -> asyncio.StreamReaderProtocol:
        """What ``asyncio.start_server`` makes for each connection: streams handed to :meth:`_serve`."""
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._serve)

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._server is not None:
            self._server.close()
        for task in list(self._serving):         # closing the listener leaves served connections open
            task.cancel()
        await asyncio.gather(*self._serving, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    @property
    def best_slave_offset(self) -> int:
        return max(self.slaves.values(), default=-1)

    def notify(self) -> None:
        """New bytes in the CommitLog (called on the loop after every put)."""
        self._new_data.set()

    async def wait_replicated(self, end_offset: int, timeout_s: float) -> str:
        """"ok" once a slave has everything before *end_offset*; else "timeout" or "no_slave"."""
        if not self.slaves or self.store.max_physical_offset() - self.best_slave_offset > HA_MAX_GAP:
            return "no_slave"
        self.notify()
        try:
            async with self._acked:
                await asyncio.wait_for(self._acked.wait_for(lambda: self.best_slave_offset >= end_offset), timeout_s)
        except TimeoutError:
            return "timeout"
        return "ok"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = "%s:%s" % writer.get_extra_info("peername")[:2]
        if not self.admission.admit(len(self._serving)):
            writer.transport.abort()                # over the connection limit: closed at once
            return
        task = asyncio.current_task()
        self._serving.add(task)
        try:
            if not await self._authenticate(writer.get_extra_info("peername")[0], peer, reader, writer):
                return
            first = _OFFSET.unpack(await asyncio.wait_for(reader.readexactly(8), IDLE_TIMEOUT_S))[0]
            if first > self.store.max_physical_offset():
                log.error("slave %s reports a CommitLog end %d past this master's end %d: its log diverges "
                          "(it must be truncated); refused", peer, first, self.store.max_physical_offset())
                return
            await self._acknowledge(peer, first)
            log.info("slave %s connected, its CommitLog ends at %d", peer, first)
            sender = asyncio.create_task(self._send_loop(writer, max(first, self.store.min_physical_offset())))
            try:
                while True:
                    data = await asyncio.wait_for(reader.readexactly(8), IDLE_TIMEOUT_S)
                    await self._acknowledge(peer, _OFFSET.unpack(data)[0])
                    if sender.done():
                        break
            finally:
                sender.cancel()
                await asyncio.gather(sender, return_exceptions=True)
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError) as exc:
            log.info("slave %s gone: %s", peer, type(exc).__name__)
        finally:
            self.slaves.pop(peer, None)
            self._serving.discard(task)
            writer.close()

    async def _authenticate(self, ip: str, peer: str, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> bool:
        """The handshake's master side: True when the slave may have the log (ACL off, or it proved an
        admin account, or its address is white-listed); else it was told why and is to be closed."""
        try:
            await ha_auth.read_hello(reader)
            frame, nonce = ha_auth.challenge(credentials_needed=self.acl is not None)
            writer.write(frame)
            await writer.drain()
            access_key, mac = await ha_auth.read_proof(reader)
        except ha_auth.HandshakeError as exc:
            log.warning("HA: closing the connection from %s: %s", peer, exc)
            return False
        if self.acl is not None:
            def signed(account) -> bool:
                return hmac.compare_digest(ha_auth.mac(account.secret_key, nonce, account.access_key), mac)
            try:
                self.acl.authorize(ip, access_key, signed, (), admin_request=True, what="HA replication")
            except AclDenied as exc:
                log.warning("HA: refused a slave from %s: %s", peer, exc)
                writer.write(ha_auth.verdict(ha_auth.REFUSED, str(exc)))
                await writer.drain()
                return False
        writer.write(ha_auth.verdict(ha_auth.ACCEPTED))
        await writer.drain()
        return True

    async def _acknowledge(self, peer: str, offset: int) -> None:
        self.slaves[peer] = offset
        async with self._acked:
            self._acked.notify_all()

    async def _send_loop(self, writer: asyncio.StreamWriter, offset: int) -> None:
        cl = self.store.commitlog
        while True:
            end = cl.max_offset()
            if offset >= end:
                self._new_data.clear()
                if cl.max_offset() <= offset:
                    if not await wait_event(self._new_data, HEARTBEAT_INTERVAL_S):
                        writer.write(_HEAD.pack(offset, 0))
                        await writer.drain()
                continue
            seg_end = offset - offset % cl.file_size + cl.file_size
            size = min(end, seg_end, offset + MAX_CHUNK) - offset
            if offset + size < min(end, seg_end):
                size = _whole_records(cl, offset, size, min(end, seg_end) - offset)
            data = cl.read(offset, size)
            if data is None:
                raise ConnectionError(f"CommitLog bytes at {offset} are gone (expired?)")
            writer.write(_HEAD.pack(offset, size) + data)
            await writer.drain()
            offset += size


def _whole_records(cl, offset: int, size: int, available: int) -> int:
    """*size* shortened to end on a record boundary (walking the records' TOTALSIZE fields from
    *offset*, which is one); a first record larger than *size* is sent whole."""
    mf = cl.files.find(offset)
    buf, rel = mf.buffer(), offset - mf.file_from_offset
    pos = rel
    while pos + 4 <= rel + available:
        total = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
        if total <= 0 or pos + total > rel + available:
            break
        if pos + total > rel + size:
            return pos - rel if pos > rel else total
        pos += total
    return max(pos - rel, 0) or size


class HASlave:
    """Keeps a connection to the master's HA port and appends what it streams."""

    def __init__(self, store, master_addr, on_data=None, *, ssl_context=None, credentials=None):
        self.store = store
        # None, (accessKey, secretKey), or a callable giving either: what a master with ACL on asks for
        self._credentials = credentials if callable(credentials) else (lambda: credentials)
        # None, an SSLContext, or a callable giving one (or None) for each connection
        self._ssl_context = ssl_context if callable(ssl_context) else (lambda: ssl_context)
        self._master_addr = master_addr if callable(master_addr) else (lambda: master_addr)
        self.host, self.port = "?", 0
        self._on_data = on_data
        self._task: asyncio.Task | None = None
        self._inflight: asyncio.Future | None = None
        self.connected = False

    def start(self) -> HASlave:
        self._task = asyncio.create_task(self._run())
        return self

    async def close(self) -> None:
        """Stop; an append already handed to a thread is waited for, so the log end is final."""
        await cancel_and_wait(self._task)
        if self._inflight is not None:
            await asyncio.gather(self._inflight, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            pause = RECONNECT_INTERVAL_S
            try:
                await self._session()
            except ha_auth.HandshakeRefused as exc:
                log.error("HA: master %s:%d refused this slave: %s. A master with ACL on needs an admin account of "
                          "its plain_acl.yml: set innerClientAuthenticationCredentials (retrying in %.0f s)",
                          self.host, self.port, exc, REFUSED_RETRY_INTERVAL_S)
                pause = REFUSED_RETRY_INTERVAL_S
            except ha_auth.HandshakeError as exc:
                log.error("HA: master %s:%d: %s (retrying in %.0f s)", self.host, self.port, exc,
                          REFUSED_RETRY_INTERVAL_S)
                pause = REFUSED_RETRY_INTERVAL_S
            except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as exc:   # ssl.SSLError too
                log.info("HA connection to master %s:%d: %s; reconnecting", self.host, self.port, exc)
            self.connected = False
            await asyncio.sleep(pause)

    async def _session(self) -> None:
        addr = self._master_addr()
        if not addr:
            raise ConnectionError("the master's HA address is not known yet (haMasterAddress or a NameServer)")
        host, _, port = addr.rpartition(":")
        self.host, self.port = host, int(port)
        ctx = self._ssl_context()
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            self.host, self.port, ssl=ctx, ssl_handshake_timeout=5 if ctx is not None else None), 5)
        try:
            await self._sign_in(reader, writer)
            self.connected = True
            writer.write(_OFFSET.pack(self.store.max_physical_offset()))
            await writer.drain()
            while True:
                try:
                    head = await asyncio.wait_for(reader.readexactly(_HEAD.size), REPORT_INTERVAL_S)
                except TimeoutError:
                    writer.write(_OFFSET.pack(self.store.max_physical_offset()))
                    await writer.drain()
                    continue
                offset, size = _HEAD.unpack(head)
                if size:
                    data = await asyncio.wait_for(reader.readexactly(size), IDLE_TIMEOUT_S)
                    self._inflight = asyncio.ensure_future(asyncio.to_thread(self.store.append_replicated,
                                                                             offset, data))
                    await asyncio.shield(self._inflight)
                    if self._on_data is not None:
                        self._on_data()
                writer.write(_OFFSET.pack(self.store.max_physical_offset()))
                await writer.drain()
        finally:
            writer.close()

    async def _sign_in(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The handshake's slave side; raises HandshakeRefused with the master's reason."""
        writer.write(ha_auth.hello())
        await writer.drain()
        challenge = await ha_auth.read_challenge(reader)
        credentials = self._credentials() if challenge.credentials_needed else None
        writer.write(ha_auth.proof(challenge.nonce, credentials))
        await writer.drain()
        try:
            await ha_auth.read_verdict(reader)
        except ha_auth.HandshakeRefused as exc:
            if credentials is None:
                raise ha_auth.HandshakeRefused(f"{exc} (this slave has no credentials to sign in with)") from None
            raise
