"""The gRPC endpoint's native transport: HTTP/2 in Rust, the same handlers in Python.

``grpcTransport=native`` serves MessagingService through :class:`rocketq._native.GrpcServer`
instead of grpc.aio.  The Rust side (``native/src/grpc_server.rs``) runs HTTP/2 on a thread of its
own and queues events; the event loop watches one descriptor and, when it becomes readable, takes
every queued event at once (:meth:`NativeServer._on_events`):

* a new call (id, method path, metadata, peer, timeout, the request of a unary-request method)
  becomes a task running the method's handler - the very handlers grpc.aio runs, looked up in the
  table of :func:`rocketq.grpc_endpoint.protocol.method_handlers`, with a :class:`NativeContext`
  that offers what they use of grpc's context (metadata, peer, time_remaining, write, abort).
  Methods registered as *eager* (unary handlers that need no current task before their first
  await: no ``asyncio.timeout``, no ``current_task``) run at once, inside the event dispatch, up to
  their first await; only one that awaits something not ready yet goes on as a task (as Python
  3.12's eager task factory does).  Most acks and heartbeats finish right there: no task, no
  extra loop pass.  The dispatch runs inside the owner's *dispatch scope* (the endpoint's: one
  write to the pop log for all the acks of a batch), and the answers go to the transport after it;
* a message / half-close of a client stream (Telemetry) goes to that call's request iterator;
* a cancel (client reset, deadline, lost connection, server stopping) cancels the call's task;
* "written" tells a server-streaming call that the client's window took one more message (and
  its length).

Answers are collected during one pass of the loop and handed to Rust in one call
(:meth:`NativeServer._flush`), at the latest when the pass ends; the answers of handlers that
finish while their batch of events is handled go at once.  Limits: the Rust side holds the
connection, stream, call, message size and queued-bytes bounds (see its module doc); here a server
stream has at most ``STREAM_WRITE_AHEAD_BYTES`` of messages not yet taken by the client (but always
one message; StreamStallGuard ends a stream that stays stuck) - bytes, not messages, so that a
receive of 32 small messages goes out in one pass instead of waiting for the client's window
every few messages - and a client stream at most ``MAX_INBOX_MESSAGES`` messages not yet read by
its handler.

TLS: given the broker's :class:`~rocketq.remoting.tls.ServerTls` (``tlsMode`` on), the port is TLS
only (rustls in the transport, ``native/src/grpc_tls.rs``), with that object's certificate, key,
trust and ``tls.server.need.client.auth``.  A task asks it every ``TLS_RELOAD_POLL_S`` whether its
files changed (it looks at them at most once a second, as for the remoting port) and hands a new
certificate to the transport, where the connections accepted from then on get it.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging

import grpc

from rocketq import _native
from rocketq.common.aio import start_eagerly
from rocketq.remoting.tls import ServerTls

log = logging.getLogger(__name__)

STREAM_WRITE_AHEAD_BYTES = 1 << 20  # of one server stream's messages handed over before the client's window took them
MAX_INBOX_MESSAGES = 256           # client-stream messages waiting for their handler
MAX_QUEUED_BYTES = 64 << 20        # request bytes the transport queues for Python before it stops reading
MAX_PARTIAL_BYTES = 512 << 20      # bytes of requests not complete yet, over all streams
TLS_RELOAD_POLL_S = 0.25           # how often the certificate files' reload is looked for
EV_CALL, EV_MESSAGE, EV_HALF_CLOSE, EV_CANCEL, EV_WRITTEN = range(5)
_OK, _UNKNOWN, _UNIMPLEMENTED, _RESOURCE_EXHAUSTED = 0, 2, 12, 8
_END = object()


class Aborted(Exception):
    """Raised by :meth:`NativeContext.abort` (as grpc.aio's abort raises) after the status was sent."""


class NativeContext:
    """What the handlers use of grpc's ServicerContext, for one call."""

    __slots__ = ("_deadline", "_md", "_peer", "_room", "_serialize", "_server", "_unacked_bytes", "done", "id",
                 "inbox", "task")

    def __init__(self, server: NativeServer, call_id: int, md, peer: str, deadline: float | None, serialize):
        self._server, self.id, self._md, self._peer = server, call_id, md, peer
        self._deadline, self._serialize = deadline, serialize
        self.task: asyncio.Task | None = None
        self.inbox: asyncio.Queue | None = None
        self._unacked_bytes = 0
        self._room: asyncio.Future | None = None
        self.done = False

    def invocation_metadata(self):
        if not isinstance(self._md, tuple):
            self._md = self._md.items()         # made from the request's headers the first time it is asked for
        return self._md

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - self._server.loop.time())

    async def write(self, message) -> None:
        """Sends one message of a server stream; waits while the messages not taken yet by the client
        and this one would be over ``STREAM_WRITE_AHEAD_BYTES`` (one message always goes)."""
        data = self._serialize(message)
        while self._unacked_bytes and self._unacked_bytes + len(data) > STREAM_WRITE_AHEAD_BYTES:
            self._room = self._server.loop.create_future()
            await self._room
        if self.done:
            raise Aborted("the call has ended")
        self._unacked_bytes += len(data)
        self._server.op(self.id, data, -1, "", True)

    def written(self, nbytes: int) -> None:
        self._unacked_bytes -= nbytes
        if self._room is not None and not self._room.done():
            self._room.set_result(None)

    async def abort(self, code: grpc.StatusCode, details: str = ""):
        self.finish(code.value[0], details)
        raise Aborted(details)

    def finish(self, code: int, details: str, body: bytes | None = None) -> None:
        if not self.done:
            self.done = True
            self._server.op(self.id, body, code, details, False)

    async def requests(self, parse):
        """The client stream's messages, parsed, until it half-closes."""
        while True:
            data = await self.inbox.get()
            if data is _END:
                return
            yield parse(data)


class NativeServer:
    """The native transport for one port; grpc.aio.Server's start/stop, handlers by method path."""

    def __init__(self, host: str, port: int, *, limits, max_message_bytes: int, max_calls: int, max_streams: int,
                 client_streaming: list[str], tls: ServerTls | None = None):
        self.loop = asyncio.get_running_loop()
        idle = limits.idle_timeout_s if limits.idle_timeout_s > 0 else 0.0
        self._tls = tls
        self._tls_seen, pems = tls.snapshot() if tls is not None else (0, None)
        try:
            self._native = _native.GrpcServer(
                host, port, client_streaming, max_connections=limits.connections_limit(), max_streams=max_streams,
                max_calls=max_calls, max_message_bytes=max_message_bytes, idle_timeout_s=idle,
                keepalive_s=limits.write_stall_timeout_s, max_queued_bytes=MAX_QUEUED_BYTES,
                max_partial_bytes=MAX_PARTIAL_BYTES, backlog=limits.backlog, **_tls_args(tls, pems))
        except ValueError as exc:
            if tls is None:
                raise
            c = tls.config                       # the transport's message names the part; this, the files
            raise ValueError(f"{exc} (tls.server.certPath {c.cert_path}, keyPath {c.key_path}, trustCertPath "
                             f"{c.trust_cert_path}, need.client.auth {c.need_client_auth})") from None
        self.port = self._native.port
        self._tls_task: asyncio.Task | None = None
        self._handlers: dict = {}
        self._eager: frozenset[str] = frozenset()
        self._scope = contextlib.nullcontext
        self._calls: dict[int, NativeContext] = {}
        self._ops: list = []
        self._flush_pending = False
        self._reading = False

    def add_handlers(self, handlers: dict, *, eager=()) -> None:
        """*handlers*: full method path -> grpc.RpcMethodHandler; *eager*: paths of unary methods whose
        handler may start inside the event dispatch (see the module doc)."""
        self._handlers.update(handlers)
        self._eager = self._eager | frozenset(eager)

    def set_dispatch_scope(self, scope) -> None:
        """*scope*: a context manager factory each batch of events is dispatched in (with no await in
        it); the answers of the batch go to the transport once it has been left."""
        self._scope = scope

    def stats(self) -> tuple[int, int, int]:
        """(connections, calls in progress, bytes queued for Python), from the Rust side."""
        return self._native.stats()

    async def start(self) -> None:
        self.loop.add_reader(self._native.wake_fd, self._on_events)
        self._reading = True
        if self._tls is not None:
            self._tls_task = self.loop.create_task(self._tls_reloads())

    async def stop(self, grace_s: float) -> None:
        """GOAWAY to every connection; calls get *grace_s* to finish, then are cancelled."""
        if self._tls_task is not None:
            self._tls_task.cancel()
            await asyncio.gather(self._tls_task, return_exceptions=True)
            self._tls_task = None
        await self.loop.run_in_executor(None, self._native.close, grace_s)
        if self._reading:
            self.loop.remove_reader(self._native.wake_fd)
            self._reading = False
        tasks = [c.task for c in self._calls.values() if c.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._calls.clear()

    async def _tls_reloads(self) -> None:
        """Hands the transport the certificate files again whenever :attr:`_tls` has reloaded them."""
        while True:
            await asyncio.sleep(TLS_RELOAD_POLL_S)
            try:
                self.reload_tls()
            except Exception:
                log.exception("gRPC endpoint: TLS certificate check failed; the old one stays in use")

    def reload_tls(self) -> bool:
        """Looks for changed certificate files now; True when new handshakes get a new certificate."""
        self._tls.reload_if_changed()            # at most once a second, shared with the remoting port
        reloads, pems = self._tls.snapshot()
        if reloads == self._tls_seen:
            return False
        self._tls_seen = reloads
        try:
            self._native.set_tls(*pems, client_auth=self._tls.config.need_client_auth)
        except ValueError as exc:                # OpenSSL took the files, rustls does not: keep the old ones
            log.error("gRPC endpoint: TLS certificate from %s not taken, the old one stays in use: %s",
                      self._tls.config.cert_path, exc)
            return False
        log.info("gRPC endpoint: new TLS certificate from %s", self._tls.config.cert_path)
        return True

    # -- events from the transport ---------------------------------------------------------------

    def _on_events(self) -> None:
        with self._scope():
            self._dispatch(self._native.drain())
        if self._ops:
            self._flush()                    # what the eager handlers answered goes now, not a loop pass later

    def _dispatch(self, events: list) -> None:
        calls = self._calls
        for ev in events:
            kind = ev[0]
            if kind == EV_CALL:
                self._start_call(ev)
                continue
            ctx = calls.get(ev[1])
            if ctx is None:
                continue
            if kind == EV_WRITTEN:
                ctx.written(ev[2])
            elif kind == EV_MESSAGE or kind == EV_HALF_CLOSE:
                if ctx.inbox.qsize() >= MAX_INBOX_MESSAGES:
                    ctx.finish(_RESOURCE_EXHAUSTED, f"the client sent more than {MAX_INBOX_MESSAGES} messages "
                                                    "its handler has not read yet")
                    ctx.task.cancel()
                else:
                    ctx.inbox.put_nowait(ev[2] if kind == EV_MESSAGE else _END)
            elif kind == EV_CANCEL:
                ctx.done = True              # the transport has ended the stream already
                ctx.task.cancel()

    def _start_call(self, ev) -> None:
        _, call_id, method, md, peer, timeout_s, body = ev
        h = self._handlers.get(method)
        if h is None:
            self.op(call_id, None, _UNIMPLEMENTED, f"method {method} is not served", False)
            return
        deadline = None if timeout_s is None else self.loop.time() + timeout_s
        ctx = NativeContext(self, call_id, md, peer, deadline, h.response_serializer)
        self._calls[call_id] = ctx
        if h.request_streaming:
            ctx.inbox = asyncio.Queue()
            coro = self._streams(ctx, h.stream_stream or h.stream_unary,
                                 ctx.requests(h.request_deserializer), h.response_streaming)
        elif h.response_streaming:
            coro = self._streams(ctx, h.unary_stream, h.request_deserializer(body), True)
        else:
            coro = self._unary(ctx, h, body)
            if method in self._eager:
                ctx.task = start_eagerly(self.loop, coro)     # None: done already (and out of self._calls)
                return
        ctx.task = self.loop.create_task(coro)

    async def _unary(self, ctx: NativeContext, h, body: bytes) -> None:
        try:
            resp = await h.unary_unary(h.request_deserializer(body), ctx)
            ctx.finish(_OK, "", h.response_serializer(resp))
        except (Aborted, asyncio.CancelledError):
            pass
        except Exception as exc:
            self._failed(ctx, exc)
        finally:
            self._calls.pop(ctx.id, None)

    async def _streams(self, ctx: NativeContext, handler, request, response_streaming: bool) -> None:
        """A call with a streamed request or response: an async generator's messages are written,
        a coroutine writes them itself (``context.write``); then OK."""
        try:
            result = handler(request, ctx)
            if inspect.isasyncgen(result):
                async for resp in result:
                    await ctx.write(resp)
            else:
                resp = await result
                if not response_streaming and resp is not None:
                    ctx.finish(_OK, "", ctx._serialize(resp))
            ctx.finish(_OK, "")
        except (Aborted, asyncio.CancelledError):
            pass
        except Exception as exc:
            self._failed(ctx, exc)
        finally:
            self._calls.pop(ctx.id, None)

    def _failed(self, ctx: NativeContext, exc: Exception) -> None:
        log.exception("gRPC call %s failed", ctx.id, exc_info=exc)
        ctx.finish(_UNKNOWN, f"{type(exc).__name__}: {exc}")

    # -- answers to the transport ----------------------------------------------------------------

    def op(self, call_id: int, body: bytes | None, code: int, message: str, ack: bool) -> None:
        """Queues one operation for the transport; all of one loop pass go in one call."""
        self._ops.append((call_id, body, code, message, ack))
        if not self._flush_pending:
            self._flush_pending = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self._ops:
            ops, self._ops = self._ops, []
            self._native.respond(ops)


def _tls_args(tls: ServerTls | None, pems) -> dict:
    """The transport's TLS keywords for *tls* (none: a plain port)."""
    if tls is None:
        return {}
    cert, key, trust = pems
    cfg = tls.config
    return {"tls_cert": cert, "tls_key": key, "tls_trust": trust, "client_auth": cfg.need_client_auth}
