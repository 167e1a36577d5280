"""One TCP connection speaking the remoting protocol: the asyncio loop around the sans-IO codec.

Both ends of the protocol are symmetric: either side may send requests and answers them, and
responses are matched to requests by ``opaque``.  So the server's and the client's connections
are the same class, :class:`RemotingConnection`, an ``asyncio.Protocol`` (it runs on whatever loop
the caller picked: asyncio's or uvloop's).

Flow of a received frame::

    data_received -> FrameDecoder -> response? -> pending[opaque].set_result
                                   -> request?  -> in-flight < limit ? task(handler) : SYSTEM_BUSY

Invariants and limits:

* ``max_inflight`` requests of one connection run in handlers at once; one more is answered
  SYSTEM_BUSY at once (a oneway one is dropped), which is how Java's broker sheds load.
* ``max_pending`` requests we sent wait for answers at once; one more raises
  :class:`RemotingTooManyRequestsError` instead of queueing without bound.
* A request waiting for its answer has a deadline; one loop timer per connection, armed at the
  earliest deadline, fails the overdue ones with a timeout (Java's client sweeps its response table
  every second instead).  A loop timer made and cancelled per request was a sixth of a send's client CPU.
* Writes that may be large (requests, handler responses) wait for ``drain`` (the transport's
  pause/resume_writing).  The only writes that do not wait are SYSTEM_BUSY answers; should the
  peer stop reading while flooding us, the buffer would grow, so past ``MAX_WRITE_BUFFER_BYTES``
  the connection is aborted.
* While writing is paused no handler starts: a request waits before its handler, so the answers
  of requests that arrived together cannot pile up past one answer over the high-water mark.
  (A server connection also stops reading then; see ``rocketq.remoting.transport``.)  A handler
  that waited for something else (a suspended long poll) calls ``until_writable`` before it
  makes a large answer, so many of them woken at once do not each hold one.
* ``idle_sweep`` tells a server's idle sweeper whether the connection carried no traffic and had
  nothing in flight (a suspended long poll is in flight) since the last sweeps.
* Frames written in one loop iteration are queued and sent together by one ``writelines`` at the
  end of it (one syscall per batch of answers, not per answer); past ``FLUSH_NOW_BYTES`` queued
  they are written at once.  Answers made inside ``data_received`` (eager handlers) go out at its
  end, without a loop callback: the answer to a one-at-a-time send leaves before anything else the
  loop has queued runs.
* A malformed frame cannot be skipped (frames have no delimiter): the connection is logged with
  the peer and the reason, and aborted.  Other connections are unaffected.
* ONEWAY requests are never answered; a handler's return value for them is dropped.
* Requests whose code is in ``eager_codes`` start their handler at once, inside ``data_received``
  (what Python 3.12's eager tasks do): a send that needs no wait (ASYNC_FLUSH) is answered without a
  task and a loop turn of its own; one that waits (a group commit, a slave) goes on in a task from
  where it stopped (:func:`rocketq.common.aio.start_eagerly`).  Such a handler must not need ``asyncio.current_task()``
  before its first wait (``asyncio.timeout`` does).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any, Awaitable, Callable

from rocketq.common.aio import start_eagerly
from rocketq.remoting.codec import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, encode_header
from rocketq.remoting.codes import FLAG_ONEWAY, FLAG_RESPONSE
from rocketq.remoting.command import (
    RemotingCommand,
    busy_response,
    error_response,
    not_supported_response,
)
from rocketq.remoting.errors import (
    LocalProtocolError,
    RemoteProtocolError,
    RemotingCommandError,
    RemotingConnectionClosedError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
)

log = logging.getLogger("rocketq.remoting")

Handler = Callable[["RemotingConnection", RemotingCommand], Awaitable["RemotingCommand | None"]]
CloseCallback = Callable[["RemotingConnection"], Any]

DEFAULT_MAX_INFLIGHT = 4096             # suspended long-poll pulls count too: one per queue of a consumer
DEFAULT_MAX_PENDING = 65536             # Java's client permits 65535 async requests
DEFAULT_REQUEST_TIMEOUT_S = 3.0
MAX_WRITE_BUFFER_BYTES = 64 * 1024 * 1024
FLUSH_NOW_BYTES = 64 * 1024             # queued output past this is written at once, not at loop end
MAX_OPAQUE = (1 << 31) - 1
EXPIRY_SLACK_S = 0.001                  # a deadline this close when the expiry timer fires counts as passed
BUSY_REMARK = "[OVERLOAD]too many requests in flight on this connection, try later"


class OpaqueCounter:
    """Request ids 1, 2, ... wrapping back to 1 before leaving int32 (Java's opaque is an int)."""

    def __init__(self, start: int = 1) -> None:
        self._next = start

    def __call__(self) -> int:
        value = self._next
        self._next = value + 1 if value < MAX_OPAQUE else 1
        return value


class RemotingConnection(asyncio.Protocol):
    """A remoting connection; ``peer`` is ``"ip:port"``, ``context`` is free for the layer above."""

    def __init__(self, handler: Handler | None, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 max_inflight: int = DEFAULT_MAX_INFLIGHT, max_pending: int = DEFAULT_MAX_PENDING,
                 request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S,
                 next_opaque: Callable[[], int] | None = None, eager_codes: frozenset[int] = frozenset()) -> None:
        if max_inflight < 1 or max_pending < 1:
            raise ValueError("max_inflight and max_pending must be at least 1")
        self._handler = handler
        self._max_frame_bytes = max_frame_bytes
        self._max_inflight = max_inflight
        self._max_pending = max_pending
        self._request_timeout_s = request_timeout_s
        self._next_opaque = next_opaque or OpaqueCounter()
        self._eager_codes = eager_codes
        self._decoder = FrameDecoder(max_frame_bytes=max_frame_bytes)
        self._transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._deadlines: dict[int, float] = {}          # opaque -> loop time its answer is due by
        self._expiry: asyncio.TimerHandle | None = None  # fires at _expiry_at, the earliest deadline or before
        self._expiry_at = 0.0
        self._tasks: set[asyncio.Task] = set()
        self._inflight = 0
        self._write_paused = False
        self._written_bytes = 0               # handed to the transport so far: sent = this - its buffer
        self._traffic = False                 # bytes in or out since the idle sweeper last looked
        self._idle_sweeps = 0
        self._out: list[bytes] = []           # frames written in this loop iteration, sent together
        self._out_bytes = 0
        self._receiving = False               # inside data_received: it flushes what is queued at its end
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._close_callbacks: list[CloseCallback] = []
        self._closing = False
        self._closed = self._loop.create_future()
        self.peer = "?"
        self.peername: Any = None
        self.context: dict[str, Any] = {}

    # -- public API -------------------------------------------------------------------------

    @property
    def is_closing(self) -> bool:
        return self._closing

    @property
    def is_closed(self) -> bool:
        """True once the transport is gone and the close callbacks have run."""
        return self._closed.done()

    @property
    def inflight(self) -> int:
        """Requests of the peer being handled right now."""
        return self._inflight

    @property
    def pending(self) -> int:
        """Our requests waiting for an answer right now."""
        return len(self._pending)

    def on_close(self, callback: CloseCallback) -> CloseCallback:
        """Call ``callback(conn)`` once the connection is gone (at once if it already is)."""
        if self._closed.done():
            self._loop.call_soon(self._run_close_callback, callback)
        else:
            self._close_callbacks.append(callback)
        return callback

    async def send_request(self, cmd: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        """Send *cmd* (its opaque is assigned here) and wait for the matching response."""
        timeout_s = self._request_timeout_s if timeout_s is None else timeout_s
        if len(self._pending) >= self._max_pending:
            raise RemotingTooManyRequestsError(f"{len(self._pending)} requests to {self.peer} await answers")
        opaque = self._assign_opaque(cmd, oneway=False)
        future = self._loop.create_future()
        self._pending[opaque] = future
        try:
            if self._write_paused:                # the write itself may wait for the peer: bound both
                async with asyncio.timeout(timeout_s):
                    await self._write_command(cmd)
                    return await future
            self._write_frame(cmd)
            deadline = self._loop.time() + timeout_s
            self._deadlines[opaque] = deadline
            if self._expiry is None or deadline < self._expiry_at:
                self._arm_expiry(deadline)
            return await future
        except TimeoutError:
            raise RemotingTimeoutError(f"no answer from {self.peer} to request code {cmd.code} "
                                       f"(opaque {opaque}) within {timeout_s}s") from None
        finally:
            self._pending.pop(opaque, None)
            self._deadlines.pop(opaque, None)

    def _arm_expiry(self, at: float) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
        self._expiry_at = at
        self._expiry = self._loop.call_at(at, self._expire_overdue)

    def _expire_overdue(self) -> None:
        """The expiry timer: fail the requests past their deadline, re-arm for the earliest other one."""
        self._expiry = None
        now = self._loop.time() + EXPIRY_SLACK_S
        earliest = None
        for opaque, deadline in list(self._deadlines.items()):
            if deadline <= now:
                del self._deadlines[opaque]
                future = self._pending.get(opaque)
                if future is not None and not future.done():
                    future.set_exception(TimeoutError())
            elif earliest is None or deadline < earliest:
                earliest = deadline
        if earliest is not None and not self._closing:
            self._arm_expiry(earliest)

    async def until_writable(self) -> None:
        """Return once the answers queued for the peer are below the high-water mark (at once when
        they are) or the connection is closing."""
        while self._write_paused and not self._closing:
            await self._wait_drained()        # waiters are woken together: look again, the first may refill it

    async def send_oneway(self, cmd: RemotingCommand) -> None:
        """Send *cmd* with the ONEWAY flag; the peer will not answer."""
        self._assign_opaque(cmd, oneway=True)
        await self._write_command(cmd)

    async def send_response(self, response: RemotingCommand) -> bool:
        """Send an answer built with ``create_response`` (e.g. a long poll answered later).
        Returns False, quietly, if the connection is already gone."""
        response.flag |= FLAG_RESPONSE
        if self._closing:
            log.debug("dropping response opaque %d to closed connection %s", response.opaque, self.peer)
            return False
        await self._write_command(response)
        return True

    def close(self) -> None:
        """Close after the buffered writes are flushed."""
        if not self._closing and self._transport is not None:
            self._flush_out()
            self._closing = True
            self._transport.close()

    def abort(self) -> None:
        """Close at once, dropping buffered writes."""
        if self._transport is not None:
            self._closing = True
            self._transport.abort()

    async def wait_closed(self) -> None:
        await asyncio.shield(self._closed)

    def __repr__(self) -> str:
        return f"<RemotingConnection {self.peer} inflight={self._inflight} pending={len(self._pending)}>"

    # -- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self.peername = transport.get_extra_info("peername")
        self.peer = _format_peer(self.peername)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self._decoder.receive_data(data)
        self._frames_arrived()

    def _frames_arrived(self) -> None:
        """Handle the whole frames the decoder now holds (after a read)."""
        self._traffic = True
        self._receiving = True               # answers queued meanwhile are flushed below, not by a callback
        try:
            self._process_frames()
        finally:
            self._receiving = False
            if self._out:
                self._flush_out()

    def eof_received(self) -> bool:
        self._decoder.receive_data(b"")
        self._process_frames()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        if self._expiry is not None:
            self._expiry.cancel()
            self._expiry = None
        error = RemotingConnectionClosedError(f"connection to {self.peer} closed" + (f": {exc}" if exc else ""))
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._wake_drain_waiters()
        self._closed.set_result(None)
        for callback in self._close_callbacks:
            self._run_close_callback(callback)
        self._close_callbacks.clear()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drain_waiters()

    # -- receiving --------------------------------------------------------------------------

    def _process_frames(self) -> None:
        while not self._closing:
            try:
                cmd = self._decoder.next_command()
            except RemoteProtocolError as exc:
                log.warning("closing connection from %s: malformed frame: %s", self.peer, exc)
                self.abort()
                return
            if cmd is None:
                return
            if cmd.is_response:
                self._on_response(cmd)
            else:
                self._on_request(cmd)

    def _on_response(self, cmd: RemotingCommand) -> None:
        future = self._pending.get(cmd.opaque)
        if future is None or future.done():
            log.debug("dropping response opaque %d from %s: no request waits for it (timed out?)",
                      cmd.opaque, self.peer)
            return
        future.set_result(cmd)

    def _on_request(self, cmd: RemotingCommand) -> None:
        if self._inflight >= self._max_inflight:
            if cmd.is_oneway:
                log.warning("dropping oneway request code %d from %s: %d requests in flight",
                            cmd.code, self.peer, self._inflight)
            else:
                self._write_nowait(busy_response(cmd, BUSY_REMARK))
            return
        self._inflight += 1
        cmd.received_at = self._loop.time()
        if cmd.code in self._eager_codes:
            self._start_eagerly(self._handle(cmd))
            return
        self._track(self._loop.create_task(self._handle(cmd)))

    def _track(self, task: asyncio.Task) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _start_eagerly(self, handling) -> None:
        """Run the coroutine *handling* up to its first wait now; the rest, if any, in a task."""
        try:
            task = start_eagerly(self._loop, handling)
        except Exception:                         # _handle answers handler errors: this is a bug below it
            log.exception("handling a request from %s failed", self.peer)
            return
        if task is not None:                      # None: answered (or dropped) without waiting
            self._track(task)

    async def _handle(self, cmd: RemotingCommand) -> None:
        try:
            if self._write_paused:            # the peer is not reading: produce no answer before it does
                await self.until_writable()
                if self._closing:
                    return
            response = await self._call_handler(cmd)
            if response is not None and not cmd.is_oneway:
                response.opaque = cmd.opaque
                if self._closing:
                    log.debug("dropping response opaque %d to closed connection %s", response.opaque, self.peer)
                else:                         # written at once; waits only while the buffer is full
                    self._answer(cmd, response)
                    if self._write_paused:
                        await self._wait_drained()
        except RemotingConnectionClosedError:
            log.debug("connection %s closed before the answer to opaque %d was written", self.peer, cmd.opaque)
        finally:
            self._inflight -= 1

    async def _call_handler(self, cmd: RemotingCommand) -> RemotingCommand | None:
        if self._handler is None:
            return not_supported_response(cmd)
        try:
            return await self._handler(self, cmd)
        except RemotingCommandError as exc:
            log.info("bad request code %d from %s: %s", cmd.code, self.peer, exc)
            return error_response(cmd, str(exc))
        except Exception as exc:   # a handler bug must not kill the connection; Java answers SYSTEM_ERROR too
            log.exception("handler failed on request code %d from %s", cmd.code, self.peer)
            return error_response(cmd, f"{type(exc).__name__}: {exc}")

    def _answer(self, cmd: RemotingCommand, response: RemotingCommand) -> None:
        """Write a handler's answer to *cmd*; one that cannot be encoded becomes an error answer."""
        response.flag |= FLAG_RESPONSE
        try:
            self._write_frame(response)
        except LocalProtocolError as exc:
            log.error("cannot encode the answer to request code %d from %s: %s", cmd.code, self.peer, exc)
            error = error_response(cmd, f"response not encodable: {exc.what}")
            error.flag |= FLAG_RESPONSE
            self._write_frame(error)

    # -- sending ----------------------------------------------------------------------------

    def _assign_opaque(self, cmd: RemotingCommand, *, oneway: bool) -> int:
        opaque = self._next_opaque()
        while opaque in self._pending:            # only after a wrap-around with very old requests left
            opaque = self._next_opaque()
        cmd.opaque = opaque
        cmd.flag = (cmd.flag & ~(FLAG_RESPONSE | FLAG_ONEWAY)) | (FLAG_ONEWAY if oneway else 0)
        return opaque

    async def _write_command(self, cmd: RemotingCommand) -> None:
        self._write_frame(cmd)
        if self._write_paused:
            await self._wait_drained()

    async def _wait_drained(self) -> None:
        """Until the transport resumes writing or the connection is lost."""
        waiter = self._loop.create_future()
        self._drain_waiters.append(waiter)
        await waiter

    def _write_nowait(self, cmd: RemotingCommand) -> None:
        try:
            self._write_frame(cmd)
        except RemotingConnectionClosedError:
            return
        if self._transport is not None and \
                self._transport.get_write_buffer_size() + self._out_bytes > MAX_WRITE_BUFFER_BYTES:
            log.warning("aborting connection from %s: it sends requests but does not read the answers", self.peer)
            self.abort()

    def _write_frame(self, cmd: RemotingCommand) -> None:
        head = encode_header(cmd)
        body = cmd.body
        if len(head) + len(body) > self._max_frame_bytes:
            raise LocalProtocolError(f"frame of {len(head) + len(body)} bytes exceeds the limit of "
                                     f"{self._max_frame_bytes} bytes")
        transport = self._transport
        if self._closing or transport is None or transport.is_closing():
            raise RemotingConnectionClosedError(f"connection to {self.peer} is closed")
        if not self._out and not self._receiving:
            self._loop.call_soon(self._flush_out)
        self._out.append(head)
        if body:
            self._out.append(body)
        self._out_bytes += len(head) + len(body)
        if self._out_bytes >= FLUSH_NOW_BYTES:        # big answers go now, so back-pressure sees them
            self._flush_out()

    def _flush_out(self) -> None:
        """Send every frame queued since the last flush with one writelines (one syscall under
        load instead of one per answer)."""
        out, out_bytes = self._out, self._out_bytes
        self._out, self._out_bytes = [], 0
        transport = self._transport
        if out and transport is not None and not transport.is_closing():
            self._traffic = True
            self._written_bytes += out_bytes
            transport.writelines(out)

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _run_close_callback(self, callback: CloseCallback) -> None:
        try:
            callback(self)
        except Exception:
            log.exception("on_close callback %r failed for %s", callback, self.peer)

    def idle_sweep(self, sweeps: int) -> bool:
        """Called by a server's idle sweeper; True once *sweeps* calls in a row found no traffic
        and nothing in flight (then the connection is idle and should be closed)."""
        if self._traffic or self._inflight or self._pending:
            self._traffic = False
            self._idle_sweeps = 0
            return False
        self._idle_sweeps += 1
        return self._idle_sweeps >= sweeps

    @property
    def sent_bytes(self) -> int:
        """Bytes the peer's socket has taken so far (written to the transport minus its buffer)."""
        transport = self._transport
        buffered = transport.get_write_buffer_size() if transport is not None and not transport.is_closing() else 0
        return self._written_bytes - buffered

    def cancel_handlers(self) -> list[asyncio.Task]:
        """Cancel the handlers still running (server shutdown); returns their tasks to await."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        return tasks


def _format_peer(peername: Any) -> str:
    if isinstance(peername, tuple) and len(peername) >= 2:
        host, port = peername[0], peername[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(peername)
