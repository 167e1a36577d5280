"""gRPC clients: their Telemetry streams, settings, heartbeats, and transaction check-backs.

A client is known by the ``x-mq-client-id`` metadata every call carries.  It keeps at most one
Telemetry stream: a second stream from the same client replaces the first, which is ended.  Every
``settings`` command is answered with status OK and the client's settings merged with the
broker's policy (RocketMQ ``GrpcClientSettingsManager``): producers get a 3-attempt exponential
backoff (10 ms .. 1 s) and the broker's max body size; consumers get ``fifo`` from the group's
``consumeMessageOrderly``, a receive batch size, a long-polling timeout and the delay-level backoff
with ``retryMaxTimes + 1`` attempts.  A stream that sends no settings within
``settings_timeout_s`` is answered BAD_REQUEST and closed; a stream whose client goes away is
dropped; a client with neither stream nor heartbeat for ``session_expire_s`` is forgotten.

Transactions: a gRPC producer is registered with the broker's client manager as a producer of
group ``GRPC_TX_<topic>`` for the topics it publishes to, through a small stand-in connection
whose ``send_oneway`` turns the transaction checker's CHECK_TRANSACTION_STATE into a Telemetry
``recover_orphaned_transaction_command``.  The transaction id handed out is the offset message
id of the half message, so EndTransaction finds it in the commit log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from rocketq.common.msgid import offset_msg_id
from rocketq.common.sysflag import PROPERTY_REAL_TOPIC
from rocketq.grpc_endpoint.convert import stored_to_v2
from rocketq.grpc_endpoint.protocol import Code, Malformed, V2Error, ms_duration, pb, spb, status
from rocketq.grpc_endpoint.settings import EndpointSettings
from rocketq.store.record import StoredMessage

log = logging.getLogger(__name__)

TX_GROUP_PREFIX = "GRPC_TX_"
PRODUCER_MAX_ATTEMPTS = 3
MAX_SESSIONS = 100_000


def tx_group(topic: str) -> str:
    return TX_GROUP_PREFIX + topic


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
    outbox: asyncio.Queue | None = None
    last_seen: float = field(default_factory=time.monotonic)


class _CheckBackConnection:
    """What the transaction checker takes for a producer connection."""

    def __init__(self, sessions: Sessions, client_id: str):
        self._sessions, self.client_id = sessions, client_id

    async def send_oneway(self, cmd) -> None:
        half = StoredMessage(cmd.body)
        phy = int(cmd.get_int("commitLogOffset"))
        topic = half.properties.get(PROPERTY_REAL_TOPIC, half.topic)
        command = spb.RecoverOrphanedTransactionCommand(
            message=stored_to_v2(half, topic=topic),
            transaction_id=offset_msg_id(self._sessions.broker.store.store_host, phy))
        self._sessions.push(self.client_id, spb.TelemetryCommand(recover_orphaned_transaction_command=command))


class Sessions:
    def __init__(self, broker, settings: EndpointSettings):
        self.broker = broker
        self._settings = settings
        self.clients: dict[str, ClientSession] = {}

    def touch(self, client_id: str) -> ClientSession:
        s = self.clients.get(client_id)
        if s is None:
            if len(self.clients) >= MAX_SESSIONS:
                raise V2Error(Code.TOO_MANY_REQUESTS, f"this endpoint already serves {MAX_SESSIONS} clients")
            s = self.clients[client_id] = ClientSession(client_id)
        s.last_seen = time.monotonic()
        return s

    def connected(self, client_id: str) -> bool:
        """The client has a Telemetry stream open (what keeps its auto-renew receives invisible)."""
        s = self.clients.get(client_id)
        return s is not None and s.outbox is not None

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
        if group not in s.tx_groups:
            s.tx_groups.add(group)
            self.broker.clients.heartbeat(_CheckBackConnection(self, client_id),
                                          {"clientID": client_id, "producerDataSet": [{"groupName": group}]})

    def terminate(self, client_id: str) -> None:
        s = self.clients.pop(client_id, None)
        if s is None:
            return
        for group in s.tx_groups:
            self.broker.clients.unregister(client_id, producer_group=group, consumer_group=None)
        if s.outbox is not None:
            _close_outbox(s.outbox)

    def expire(self) -> None:
        limit = time.monotonic() - self._settings.session_expire_s
        for cid in [cid for cid, s in self.clients.items() if s.outbox is None and s.last_seen < limit]:
            self.terminate(cid)

    def close(self) -> None:
        for cid in list(self.clients):
            self.terminate(cid)

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
            if session.outbox is outbox:
                session.outbox = None
                session.last_seen = time.monotonic()

    async def _read(self, request_iterator, session: ClientSession, outbox: asyncio.Queue,
                    settings_check=None) -> None:
        it = request_iterator.__aiter__()
        try:
            try:
                first = await asyncio.wait_for(it.__anext__(), self._settings.settings_timeout_s)
            except TimeoutError:
                _offer(outbox, spb.TelemetryCommand(status=status(
                    Code.BAD_REQUEST, f"no settings within {self._settings.settings_timeout_s:g} s of opening Telemetry")))
                return
            cmd = first
            while self._on_command(session, cmd, outbox, settings_check):
                cmd = await it.__anext__()
        except StopAsyncIteration:
            pass
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
