"""gRPC clients: who is there, their Telemetry streams and settings.

A client is known by the ``x-mq-client-id`` metadata every call carries, from its first call on
(a Telemetry stream, a heartbeat, a route query): what kind of client it is and its group come
from its settings or its heartbeats, the topics it publishes to from its settings or its route
queries.  So a client that lost its stream in a broker restart is served on: the 5.1.2 Python
client reopens the stream only at its next 300 s settings tick, and sends no settings on it
(it sends them at the tick after), which this endpoint, like RocketMQ's proxy, simply keeps
open.

A client keeps at most one Telemetry stream: a second stream from the same client replaces the
first, which is ended.  Every ``settings`` command is answered with status OK and the client's
settings merged with the broker's policy (RocketMQ ``GrpcClientSettingsManager``): producers get a
3-attempt exponential backoff (10 ms .. 1 s) and the broker's max body size; consumers get
``fifo`` from the group's ``consumeMessageOrderly``, a receive batch size, a long-polling timeout
and the delay-level backoff with ``retryMaxTimes + 1`` attempts.

:meth:`Sessions.alive` is what keeps a push consumer's messages renewed: a client is alive while
its stream is open or it was heard from (heartbeats come every 10 s) within ``client_silent_s``;
it is gone once its stream ends without a newer one taking over, or it said goodbye
(NotifyClientTermination), until it is heard from again.  A client with neither stream nor call
for ``session_expire_s`` is forgotten.

Transactions: a producer is a member of group ``GRPC_TX_<topic>`` for each topic it publishes to;
the check-backs go out as in :mod:`rocketq.grpc_endpoint.checkback`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from rocketq.grpc_endpoint.checkback import ENDPOINT_CLIENT_ID, GroupCheckBack, tx_group
from rocketq.grpc_endpoint.filtering import grpc_filter
from rocketq.grpc_endpoint.protocol import Code, Malformed, V2Error, ms_duration, pb, spb, status
from rocketq.grpc_endpoint.settings import EndpointSettings

log = logging.getLogger(__name__)

PRODUCER_MAX_ATTEMPTS = 3
MAX_SESSIONS = 100_000
MAX_TOPICS_PER_CLIENT = 1_024           # topics remembered per client from its route queries


def metadata(context) -> dict[str, str]:
    md = context.invocation_metadata() if context is not None else None
    return {str(k).lower(): v for k, v in (md or ())}


def client_id_of(context) -> str:
    cid = metadata(context).get("x-mq-client-id", "")
    if not cid:
        raise V2Error(Code.CLIENT_ID_REQUIRED, "the call carries no x-mq-client-id metadata")
    return cid


@dataclass
class ClientSession:
    client_id: str
    client_type: int = 0
    group: str = ""
    tx_groups: set[str] = field(default_factory=set)
    topics: set[str] = field(default_factory=set)        # from its route queries
    outbox: asyncio.Queue | None = None                 # its Telemetry stream, when one is open
    last_seen: float = field(default_factory=time.monotonic)
    gone: bool = False                                  # its stream ended, or it said goodbye
    settings_received: int = 0                          # settings commands so far (diagnostics)


class Sessions:
    def __init__(self, broker, settings: EndpointSettings):
        self.broker = broker
        self._settings = settings
        self.clients: dict[str, ClientSession] = {}
        self._started = time.monotonic()
        self._closing = False
        self._tx_members: dict[str, set[str]] = {}           # producer group -> client ids
        self._checkbacks: dict[str, GroupCheckBack] = {}

    def touch(self, client_id: str) -> ClientSession:
        """The client made a call: it is there."""
        s = self.clients.get(client_id)
        if s is None:
            if len(self.clients) >= MAX_SESSIONS:
                raise V2Error(Code.TOO_MANY_REQUESTS, f"this endpoint already serves {MAX_SESSIONS} clients")
            s = self.clients[client_id] = ClientSession(client_id)
        s.last_seen = time.monotonic()
        s.gone = False
        return s

    def heard_from(self, client_id: str | None) -> None:
        """A call that needs no session (a receive): the client counts as alive if it has one."""
        if client_id and (client_id in self.clients or len(self.clients) < MAX_SESSIONS):
            self.touch(client_id)

    def alive(self, client_id: str) -> bool:
        """Whether the server goes on renewing this client's messages (see the module docstring).
        A client not heard from since this endpoint started is given ``client_silent_s`` to show
        up: after a broker restart its messages in flight are still being worked on."""
        s = self.clients.get(client_id)
        now = time.monotonic()
        if s is None:
            return now - self._started < self._settings.client_silent_s
        if s.gone:
            return False
        return s.outbox is not None or now - s.last_seen < self._settings.client_silent_s

    def heartbeat(self, client_id: str, client_type: int, group: str) -> ClientSession:
        s = self.touch(client_id)
        if client_type:
            s.client_type = client_type
        if group:
            s.group = group
        if s.client_type == pb.ClientType.PRODUCER:
            for topic in s.topics:
                self.register_tx_producer(client_id, topic)
        return s

    def route_queried(self, client_id: str, topic: str) -> None:
        """A route query: a producer's route queries name the topics it publishes to."""
        if client_id not in self.clients and len(self.clients) >= MAX_SESSIONS:
            return                                    # a route is served without a session
        s = self.touch(client_id)
        if topic not in s.topics and len(s.topics) < MAX_TOPICS_PER_CLIENT:
            s.topics.add(topic)
        if s.client_type == pb.ClientType.PRODUCER:
            self.register_tx_producer(client_id, topic)

    def push(self, client_id: str, cmd) -> bool:
        s = self.clients.get(client_id)
        if s is None or s.outbox is None:
            return False
        try:
            s.outbox.put_nowait(cmd)
            return True
        except asyncio.QueueFull:
            log.warning("telemetry outbox of client %s is full; a command was dropped", client_id)
            return False

    def register_tx_producer(self, client_id: str, topic: str) -> None:
        s = self.touch(client_id)
        group = tx_group(topic)
        if group in s.tx_groups:
            return
        s.tx_groups.add(group)
        self._tx_members.setdefault(group, set()).add(client_id)
        if group not in self._checkbacks:
            conn = self._checkbacks[group] = GroupCheckBack(self, group)
            self.broker.clients.heartbeat(conn, {"clientID": ENDPOINT_CLIENT_ID,
                                                 "producerDataSet": [{"groupName": group}]})

    def streaming_members(self, group: str) -> list[str]:
        """The producers of *group* that have a Telemetry stream open."""
        return sorted(cid for cid in self._tx_members.get(group, ())
                      if (s := self.clients.get(cid)) is not None and s.outbox is not None)

    def _leave_tx_groups(self, s: ClientSession) -> None:
        for group in s.tx_groups:
            members = self._tx_members.get(group)
            if members is not None:
                members.discard(s.client_id)
                if not members:
                    del self._tx_members[group]
                    self._checkbacks.pop(group, None)
                    self.broker.clients.unregister(ENDPOINT_CLIENT_ID, producer_group=group, consumer_group=None)
        s.tx_groups.clear()

    def terminate(self, client_id: str) -> None:
        """NotifyClientTermination: the client is gone (its messages in flight come back soon)."""
        s = self.clients.get(client_id)
        if s is None:
            return
        s.gone = True
        self._leave_tx_groups(s)
        if s.outbox is not None:
            _close_outbox(s.outbox)

    def expire(self) -> None:
        limit = time.monotonic() - self._settings.session_expire_s
        for cid in [cid for cid, s in self.clients.items() if s.outbox is None and s.last_seen < limit]:
            self._leave_tx_groups(self.clients.pop(cid))

    def close(self) -> None:
        """The endpoint stops: streams end, but no client is taken as gone (a restart is coming)."""
        self._closing = True
        for s in list(self.clients.values()):
            self._leave_tx_groups(s)
            if s.outbox is not None:
                _close_outbox(s.outbox)

    # -- Telemetry -------------------------------------------------------------------------------

    async def telemetry(self, request_iterator, context, settings_check=None):
        """Serve one Telemetry stream.  *settings_check(settings)*, when given (ACL on), is called
        for each settings command and may raise V2Error: that status is answered and the stream
        ends, as RocketMQ's proxy ends a stream whose command its ACL refuses."""
        try:
            session = self.touch(client_id_of(context))
        except V2Error as exc:
            yield spb.TelemetryCommand(status=exc.to_status())
            return
        outbox: asyncio.Queue = asyncio.Queue(maxsize=self._settings.outbox_capacity)
        if session.outbox is not None:
            _close_outbox(session.outbox)          # one stream per client: the newer one wins
        session.outbox = outbox
        reader = asyncio.create_task(self._read(request_iterator, session, outbox, settings_check))
        try:
            while True:
                cmd = await outbox.get()
                if cmd is None:
                    break
                yield cmd
        finally:
            reader.cancel()
            if session.outbox is outbox:             # ended, and no newer stream of the client took over
                session.outbox = None
                session.last_seen = time.monotonic()
                if not self._closing:
                    session.gone = True

    async def _read(self, request_iterator, session: ClientSession, outbox: asyncio.Queue,
                    settings_check=None) -> None:
        try:
            # no settings may come for a long time (a 5.1.2 client's stream reopened after a restart)
            async for cmd in request_iterator:
                if not self._on_command(session, cmd, outbox, settings_check):
                    break
        except asyncio.CancelledError:
            raise
        except Exception as exc:               # the client went away, or sent garbage
            log.debug("telemetry stream of %s ended: %s", session.client_id, exc)
        finally:
            _close_outbox(outbox)

    def _on_command(self, session: ClientSession, cmd, outbox: asyncio.Queue, settings_check=None) -> bool:
        """Handle one command; False when the stream is to end."""
        if isinstance(cmd, Malformed):
            _offer(outbox, spb.TelemetryCommand(status=status(Code.BAD_REQUEST, f"not a TelemetryCommand: {cmd.error}")))
            return True
        if not cmd.HasField("settings"):
            return True                          # thread stack traces, verify results: nothing to do
        session.settings_received += 1
        if settings_check is not None:
            try:
                settings_check(cmd.settings)
            except V2Error as exc:
                _offer(outbox, spb.TelemetryCommand(status=exc.to_status()))
                return False
        try:
            merged = self.merge(session, cmd.settings)
        except V2Error as exc:
            _offer(outbox, spb.TelemetryCommand(status=exc.to_status()))
            return True
        _offer(outbox, spb.TelemetryCommand(status=status(), settings=merged))
        return True

    def merge(self, session: ClientSession, s: pb.Settings) -> pb.Settings:
        out = pb.Settings()
        out.CopyFrom(s)
        session.client_type = s.client_type
        if s.WhichOneof("pub_sub") == "publishing" or s.client_type == pb.ClientType.PRODUCER:
            out.backoff_policy.CopyFrom(pb.RetryPolicy(
                max_attempts=PRODUCER_MAX_ATTEMPTS, exponential_backoff=pb.ExponentialBackoff(
                    initial=ms_duration(10), max=ms_duration(1000), multiplier=2.0)))
            out.publishing.max_body_size = self.broker.store.config.max_message_size
            out.publishing.validate_message_type = True
            for t in s.publishing.topics:
                self.register_tx_producer(session.client_id, t.name)
        elif s.WhichOneof("pub_sub") == "subscription":
            group = s.subscription.group.name
            bitmaps = getattr(self.broker.store, "filter_bitmaps", None)   # enableCalcFilterBitMap: as the proxy registers
            for entry in s.subscription.subscriptions:           # a bad selector is refused here, at subscribe
                if entry.HasField("expression"):
                    sub = grpc_filter(self.broker, entry.expression)
                    if bitmaps is not None and sub is not None and sub.sql is not None and group:
                        bitmaps.register(group, entry.topic.name, sub.expression, sub.expression_type, 0)
            cfg = self.broker.groups.get(group, create=True) if group else None
            session.group = group
            out.subscription.fifo = bool(cfg and cfg.consume_message_orderly)
            out.subscription.receive_batch_size = self._settings.receive_batch_default
            if not s.subscription.HasField("long_polling_timeout"):
                out.subscription.long_polling_timeout.CopyFrom(ms_duration(self._settings.default_long_polling_ms))
            levels = self.broker.store.config.delay_levels_ms
            out.backoff_policy.CopyFrom(pb.RetryPolicy(
                max_attempts=(cfg.retry_max_times if cfg else 16) + 1,
                customized_backoff=pb.CustomizedBackoff(next=[ms_duration(ms) for ms in levels])))
        out.metric.on = False
        return out


def _offer(outbox: asyncio.Queue, cmd) -> None:
    try:
        outbox.put_nowait(cmd)
    except asyncio.QueueFull:
        log.warning("telemetry outbox full; dropped a %s", cmd.WhichOneof("command") or "status")


def _close_outbox(outbox: asyncio.Queue) -> None:
    """End the stream that reads *outbox*, even when it is full."""
    while True:
        try:
            outbox.put_nowait(None)
            return
        except asyncio.QueueFull:
            outbox.get_nowait()
