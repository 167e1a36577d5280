"""What one gRPC client can make the endpoint hold: connections, streams, calls, stuck streams.

The broker's :class:`~rocketq.remoting.limits.ConnectionLimits` apply to the gRPC port as grpc
server options (:func:`server_options`):

* ``max_connections`` -> ``grpc.max_allowed_incoming_connections``: grpc closes connections past it
  before their handshake;
* ``idle_timeout_s`` -> ``grpc.max_connection_idle_ms``: a connection with no call in progress for
  that long gets GOAWAY and is closed (RocketMQ's proxy: ``grpcClientIdleTimeMills``, 120 s) - a
  long-polling ReceiveMessage is a call in progress, so its connection is not idle;
* ``write_stall_timeout_s`` -> keepalive: the server pings every connection that often and closes
  one whose peer does not answer within as long (a peer that stopped reading its socket);
* ``GRPC_MAX_CONCURRENT_STREAMS`` per connection (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS: a client
  queues further calls on its side) and ``GRPC_MAX_CONCURRENT_RPCS`` in all (past it grpc answers
  RESOURCE_EXHAUSTED at once).

Inside one stream, HTTP/2 flow control bounds what is queued: ``context.write`` returns only once
the client's window has taken the message, so a client that stops reading holds one message (plus
its window) per open stream.  A client that keeps answering pings but never opens its window would
hold the stream forever; :class:`StreamStallGuard` ends such a stream with UNAVAILABLE once one
message has waited for a whole ``write_stall_timeout_s`` period (checked by one timer per stream,
nothing per message but two counters).
"""

from __future__ import annotations

import asyncio
import logging

import grpc

log = logging.getLogger(__name__)

# per connection.  Clients queue calls past it, but those sent before the server's SETTINGS reach
# them are refused (REFUSED_STREAM, which the Python client reports as UNAVAILABLE), and an
# official client's burst of async sends opens thousands of streams at once on its one channel
# (2,500 in tests/grpc_endpoint/test_grpc_burst.py): leave room above that.  What the streams can
# hold is bounded per stream (see above) and the calls in all by GRPC_MAX_CONCURRENT_RPCS.
GRPC_MAX_CONCURRENT_STREAMS = 4096
GRPC_MAX_CONCURRENT_RPCS = 20_000      # in all; past it grpc answers RESOURCE_EXHAUSTED at once


def server_options(limits) -> list[tuple[str, int]]:
    """grpc server options that hold the endpoint to *limits* (a ConnectionLimits)."""
    stall_ms = max(1, int(limits.write_stall_timeout_s * 1000))
    options = [("grpc.max_allowed_incoming_connections", limits.connections_limit()),
               ("grpc.max_concurrent_streams", GRPC_MAX_CONCURRENT_STREAMS),
               ("grpc.keepalive_time_ms", stall_ms), ("grpc.keepalive_timeout_ms", stall_ms),
               ("grpc.http2.ping_timeout_ms", stall_ms),          # what grpc's keepalive waits for the ack
               ("grpc.keepalive_permit_without_calls", 1)]        # idle connections are pinged too
    if limits.idle_timeout_s > 0:
        options.append(("grpc.max_connection_idle_ms", max(1, int(limits.idle_timeout_s * 1000))))
    return options


class StreamStallGuard:
    """Writes the messages of one server-streaming call; ends the call with UNAVAILABLE when one
    message has waited for the client's flow-control window through a whole check period.

    Must be made inside the call's handler (it cancels that task to interrupt the stuck write,
    then answers the status from the handler itself, which also ends the call on the wire)."""

    __slots__ = ("_context", "_stall_s", "_what", "_task", "_timer", "_started", "_finished", "_seen", "_fired")

    def __init__(self, context, stall_s: float, what: str) -> None:
        self._context, self._stall_s, self._what = context, stall_s, what
        self._task = asyncio.current_task()
        self._started = self._finished = 0          # writes begun / completed
        self._seen = (0, 0)                         # (begun, completed) at the last check
        self._fired = False
        self._timer = asyncio.get_running_loop().call_later(stall_s, self._check)

    async def write(self, message) -> None:
        self._started += 1
        try:
            await self._context.write(message)
        except asyncio.CancelledError:
            if not self._fired:
                raise
            self._task.uncancel()
            await self._context.abort(grpc.StatusCode.UNAVAILABLE,
                                      f"the client took no message of this stream for {self._stall_s:g} s")
        self._finished += 1

    def close(self) -> None:
        self._timer.cancel()

    def _check(self) -> None:
        started, finished = self._seen
        if started != finished and self._finished == finished:      # the same write waited all period
            self._fired = True
            log.warning("gRPC %s: ending a stream whose client took no message for %g s "
                        "(serverWriteStallTimeoutSeconds)", self._what, self._stall_s)
            self._task.cancel()
            return
        self._seen = (self._started, self._finished)
        self._timer = asyncio.get_running_loop().call_later(self._stall_s, self._check)
