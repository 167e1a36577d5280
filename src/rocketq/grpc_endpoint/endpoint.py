"""The gRPC endpoint: ``apache.rocketmq.v2.MessagingService`` served from inside the broker.

Usage (on the broker's event loop)::

    endpoint = await GrpcEndpoint(broker, host="127.0.0.1", port=8081).start()
    ...
    await endpoint.close()          # before broker.close()

It shares the broker's store, topics, groups, consumer offsets, long polling, timer and
transaction machinery, so a message sent over one protocol is consumed over the other.  The pop
state (``<storePath>/grpc/pop.log``) is the broker's (:mod:`rocketq.broker.pop`), shared with
remoting POP_MESSAGE, and so is the timer (:mod:`rocketq.broker.timer`).  A housekeeping task of
the endpoint's renews the messages of push consumers' auto-renew receives while their client is
alive, and forgets silent clients.

Served: QueryRoute, Heartbeat, QueryAssignment, NotifyClientTermination, Telemetry, SendMessage,
EndTransaction, RecallMessage (:mod:`~rocketq.grpc_endpoint.producer_service`), ReceiveMessage,
AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue
(:mod:`~rocketq.grpc_endpoint.consumer_service`), PullMessage, UpdateOffset, GetOffset,
QueryOffset (:mod:`~rocketq.grpc_endpoint.pull_service`).  SyncLiteSubscription (lite topics)
answers NOT_IMPLEMENTED.

TLS: when the broker's ``tlsMode`` is not ``disabled`` the port is TLS only, in ``permissive`` mode
too - grpcio's server cannot tell plain from TLS on one port (both transports do the same), and the
RocketMQ 5 Java client's default is TLS.  It serves the broker's certificate
(``tls.server.certPath`` / ``keyPath``, the remoting port's :class:`ServerTls`), and new connections
get the new certificate once the files change (connections already open keep theirs): grpcio
through its dynamic certificate configuration (each new handshake asks
:func:`grpc_server_credentials`'s fetcher, which gives grpc the files again once they have changed),
the native transport through rustls (its reload task, :mod:`.native_transport`).
``tls.server.need.client.auth=require`` verifies client certificates against
``tls.server.trustCertPath``; ``optional`` verifies one when the client shows it on the native
transport, and asks for none on grpcio (grpc's Python server has no "request but do not require").

Limits: the broker's connection limits hold here too, and a stream whose client stops taking its
messages is ended (:mod:`~rocketq.grpc_endpoint.limits`).

Transport: ``grpcTransport`` (a broker setting) picks the HTTP/2 server: ``native`` (the default,
:mod:`~rocketq.grpc_endpoint.native_transport`, Rust, a fifth of grpc.aio's CPU per call) or ``grpcio``
(grpc.aio); both run the same handlers and serve TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time

import grpc

from rocketq.grpc_endpoint.auth import authorize, needed_resources, settings_resources
from rocketq.grpc_endpoint.cluster_route import GRPC_ENDPOINTS_NAMESPACE, ClusterRoutes
from rocketq.grpc_endpoint.consumer_service import ConsumerService
from rocketq.grpc_endpoint.limits import (
    GRPC_MAX_CONCURRENT_RPCS,
    GRPC_MAX_CONCURRENT_STREAMS,
    StreamStallGuard,
    server_options,
)
from rocketq.grpc_endpoint.native_transport import NativeServer
from rocketq.grpc_endpoint.producer_service import ProducerService
from rocketq.grpc_endpoint.protocol import (
    SERVICE_NAME,
    Code,
    Malformed,
    V2Error,
    method_handlers,
    pb,
    service_handlers,
    spb,
    spb_grpc,
    status,
)
from rocketq.grpc_endpoint.pull_service import PullService
from rocketq.grpc_endpoint.route import (
    ALL_TYPES,
    accepted_types,
    assignments,
    endpoints_of,
    message_queues,
    topic_config,
)
from rocketq.grpc_endpoint.sessions import Sessions, client_id_of, metadata
from rocketq.grpc_endpoint.settings import EndpointSettings
from rocketq.remoting.tls import ServerTls

log = logging.getLogger(__name__)

HOUSEKEEPING_MAX_SLEEP_S = 0.2
SESSION_EXPIRY_INTERVAL_S = 1.0
GRPC_MESSAGE_SLACK_BYTES = 1 << 20     # room for the envelope around a maximal body
STOP_GRACE_S = 0.5
CLIENT_STREAMING = [f"/{SERVICE_NAME}/Telemetry"]     # the one method whose request is a stream
# unary methods the native transport starts inside its event dispatch (native_transport's module doc):
# their handlers use no asyncio.timeout and no current_task before their first await
EAGER_METHODS = [f"/{SERVICE_NAME}/{m}" for m in ("Heartbeat", "SendMessage", "AckMessage", "ChangeInvisibleDuration")]


def _parse_endpoint(addr: str) -> pb.Endpoints:
    host, _, port = addr.rpartition(":")
    return endpoints_of(host.strip("[]"), int(port))


def _now_ms() -> int:
    return int(time.time() * 1000)


class GrpcEndpoint:
    def __init__(self, broker, *, host: str = "127.0.0.1", port: int = 8081, advertise_host: str | None = None,
                 settings: EndpointSettings | None = None):
        self.broker = broker
        self.host, self._requested_port = host, port
        self._advertise_host = advertise_host
        self.settings = settings or EndpointSettings()
        self.port: int | None = None
        self._server: grpc.aio.Server | None = None
        self._tasks: list[asyncio.Task] = []

    @property
    def address(self) -> str:
        return f"{self.advertise_host}:{self.port}"

    @property
    def advertise_host(self) -> str:
        if self._advertise_host:
            return self._advertise_host
        if self.host in ("0.0.0.0", "", "::"):
            return self.broker.settings.announce_host or "127.0.0.1"
        return self.host

    async def start(self) -> GrpcEndpoint:
        try:
            await self._start()
        except BaseException:
            await self.close()           # whatever was started (a port in use, a corrupt pop log)
            raise
        return self

    async def _start(self) -> None:
        store = self.broker.store
        # RocketMQ's proxy reads requests up to 130 MiB, so a body over the limit gets MESSAGE_BODY_TOO_LARGE
        limit = max(self.settings.max_inbound_message_bytes, store.config.max_message_size + GRPC_MESSAGE_SLACK_BYTES)
        tls = getattr(self.broker, "server_tls", None)          # the remoting port's, when tlsMode is on
        native = self.broker.settings.grpc_transport == "native"
        if native:
            self._server = NativeServer(self.host, self._requested_port, limits=self.broker.settings.limits,
                                        max_message_bytes=limit, max_calls=GRPC_MAX_CONCURRENT_RPCS,
                                        max_streams=GRPC_MAX_CONCURRENT_STREAMS, client_streaming=CLIENT_STREAMING,
                                        tls=tls)
            self.port = self._server.port
        else:
            self.port = self._grpcio_server(limit, tls)
        self.pop_state, self.popper = self.broker.pop.state, self.broker.pop.popper
        self.sessions = Sessions(self.broker, self.settings)
        self.consumers = ConsumerService(self.broker, self.popper, self.settings)
        self.producers = ProducerService(self.broker, self.sessions, self.settings)
        self.pulls = PullService(self.broker, self.consumers, self.settings)
        self.routes = ClusterRoutes(self.broker, self.endpoints(), _parse_endpoint)
        registrar = getattr(self.broker, "registrar", None)
        if registrar is not None:                  # other groups' endpoints list this one in their routes
            registrar.advertise(GRPC_ENDPOINTS_NAMESPACE, self.broker.address, self.address)
        if native:
            self._server.add_handlers(method_handlers(_Servicer(self)), eager=EAGER_METHODS)
            self._server.set_dispatch_scope(self.pop_state.batched)   # a batch's acks: one pop-log write
        else:
            self._server.add_generic_rpc_handlers((service_handlers(_Servicer(self)),))
        await self._server.start()
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        log.info("gRPC endpoint of broker %s listening on %s%s (%s transport)", self.broker.settings.broker_name,
                 self.address, "" if tls is None else " (TLS only)", "native" if native else "grpcio")

    def _grpcio_server(self, limit: int, tls) -> int:
        """grpc.aio's server on the endpoint's port; its port."""
        # no SO_REUSEPORT: a second server on a taken port must fail, not share its connections
        pending = self.settings.max_pending_calls
        self._server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                                ("grpc.max_send_message_length", -1), ("grpc.so_reuseport", 0),
                                                ("grpc.server.max_pending_requests", pending),
                                                ("grpc.server.max_pending_requests_hard_limit", pending),
                                                *server_options(self.broker.settings.limits)],
                                       maximum_concurrent_rpcs=GRPC_MAX_CONCURRENT_RPCS)
        addr = f"{self.host}:{self._requested_port}"
        return (self._server.add_insecure_port(addr) if tls is None      # fails first
                else self._server.add_secure_port(addr, grpc_server_credentials(tls)))

    async def close(self) -> None:
        """Stop serving and release what :meth:`start` took; safe after a failed start and twice."""
        if getattr(self, "sessions", None) is not None:
            self.sessions.close()                   # ends Telemetry streams so stop() need not wait
        if self._server is not None:
            await self._server.stop(STOP_GRACE_S)
            self._server = None
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.broker.offsets.persist()

    async def _housekeeping(self) -> None:
        last_sync = time.monotonic()
        while True:
            nxt = self.pop_state.next_deadline_ms()
            sleep = HOUSEKEEPING_MAX_SLEEP_S if nxt is None else min(HOUSEKEEPING_MAX_SLEEP_S,
                                                                     max(0.005, (nxt - _now_ms()) / 1000))
            await asyncio.sleep(sleep)
            try:
                async with self.popper.lock:
                    self.popper.renew_due(self.sessions.alive, invisible_ms=self.settings.default_invisible_ms,
                                          ahead_ms=self.settings.default_invisible_ms // 2,
                                          clear_ms=self.settings.clear_invisible_ms)
                if time.monotonic() - last_sync >= SESSION_EXPIRY_INTERVAL_S:
                    last_sync = time.monotonic()
                    self.sessions.expire()
            except Exception:
                log.exception("gRPC endpoint housekeeping failed; trying again")

    # -- small handlers --------------------------------------------------------------------------

    def endpoints(self) -> pb.Endpoints:
        return endpoints_of(self.advertise_host, self.port)

    async def _groups(self, topic: pb.Resource, *, create: bool):
        """This topic's groups (local topic config auto-created when allowed) and accepted message types."""
        try:
            tc = topic_config(self.broker, topic.name, create=create)
        except V2Error as exc:
            if exc.code != Code.TOPIC_NOT_FOUND:
                raise
            tc = None                                   # maybe served by other groups only
        groups = await self.routes.groups(topic.name, tc)
        if not groups:
            if tc is None:
                raise V2Error(Code.TOPIC_NOT_FOUND, f"topic {topic.name!r} does not exist on any broker group")
            raise V2Error(Code.FORBIDDEN, f"topic {topic.name!r} has no queue reachable over gRPC")
        return groups, accepted_types(tc) if tc is not None else ALL_TYPES

    async def query_route(self, req, context):
        groups, types = await self._groups(req.topic, create=True)
        client_id = metadata(context).get("x-mq-client-id")
        if client_id:
            self.sessions.route_queried(client_id, req.topic.name)
        return spb.QueryRouteResponse(status=status(), message_queues=message_queues(groups, types, req.topic))

    async def query_assignment(self, req, context):
        group = self.consumers.group(req.group.name)
        groups, types = await self._groups(req.topic, create=False)
        return spb.QueryAssignmentResponse(status=status(), assignments=assignments(
            groups, types, req.topic, fifo=self.popper.is_fifo(group)))

    async def heartbeat(self, req, context):
        group = self.consumers.group(req.group.name) if req.HasField("group") and req.group.name else ""
        self.sessions.heartbeat(client_id_of(context), req.client_type, group)
        return spb.HeartbeatResponse(status=status())

    async def notify_termination(self, req, context):
        self.sessions.terminate(client_id_of(context))
        return spb.NotifyClientTerminationResponse(status=status())


def _guard(response_type):
    """Turn V2Error (and any bug) into a response status; check ACL first when it is on."""
    def wrap(fn):
        @functools.wraps(fn)
        async def handler(self, req, context):
            try:
                self._admit(context, fn.__name__, req)
                return await fn(self, req, context)
            except V2Error as exc:
                return response_type(status=exc.to_status())
            except Exception as exc:
                log.exception("gRPC %s failed", fn.__name__)
                return response_type(status=status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"))
        return handler
    return wrap


def _stream_guard(response_type):
    """For a server-streaming RPC: ACL and malformed-request checks first, a refusal as the one
    response's status (what the stream does after that is the handler's own business); the
    handler's messages are written through a StreamStallGuard (a client that stops taking them
    gets UNAVAILABLE instead of holding the stream forever)."""
    def wrap(fn):
        @functools.wraps(fn)
        async def handler(self, req, context):
            try:
                self._admit(context, fn.__name__, req)
            except V2Error as exc:
                await context.write(response_type(status=exc.to_status()))
                return
            guard = StreamStallGuard(context, self._e.broker.settings.limits.write_stall_timeout_s, fn.__name__)
            try:
                async with contextlib.aclosing(fn(self, req, context)) as responses:
                    async for resp in responses:
                        await guard.write(resp)
            finally:
                guard.close()
        return handler
    return wrap


class _Servicer(spb_grpc.MessagingServiceServicer):
    def __init__(self, endpoint: GrpcEndpoint):
        self._e = endpoint

    def _admit(self, context, rpc: str, req) -> None:
        """What every request passes before its handler: ACL, then the malformed-request checks."""
        self._authorize(context, rpc, req)
        Malformed.check(req)

    def _authorize(self, context, rpc: str, req=None) -> None:
        """ACL (when the broker has it on): the signature, and the permissions *req* needs."""
        acl = self._e.broker.acl
        if acl is not None:
            authorize(acl, _peer_ip(context), metadata(context), rpc, lambda: needed_resources(req))

    def _settings_check(self, context):
        """For Telemetry: a check of each settings command against the stream's account."""
        acl = self._e.broker.acl
        if acl is None:
            return None
        ip, md = _peer_ip(context), metadata(context)
        return lambda settings: authorize(acl, ip, md, "Telemetry settings", lambda: settings_resources(settings))

    @_guard(spb.QueryRouteResponse)
    async def QueryRoute(self, req, context):
        return await self._e.query_route(req, context)

    @_guard(spb.HeartbeatResponse)
    async def Heartbeat(self, req, context):
        return await self._e.heartbeat(req, context)

    @_guard(spb.QueryAssignmentResponse)
    async def QueryAssignment(self, req, context):
        return await self._e.query_assignment(req, context)

    @_guard(spb.NotifyClientTerminationResponse)
    async def NotifyClientTermination(self, req, context):
        return await self._e.notify_termination(req, context)

    @_guard(spb.SendMessageResponse)
    async def SendMessage(self, req, context):
        return await self._e.producers.send(req, context)

    @_guard(spb.EndTransactionResponse)
    async def EndTransaction(self, req, context):
        return await self._e.producers.end_transaction(req, context)

    @_guard(spb.AckMessageResponse)
    async def AckMessage(self, req, context):
        return await self._e.consumers.ack(req)

    @_guard(spb.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(self, req, context):
        return await self._e.consumers.change_invisible(req)

    @_guard(spb.ForwardMessageToDeadLetterQueueResponse)
    async def ForwardMessageToDeadLetterQueue(self, req, context):
        return await self._e.consumers.forward_to_dlq(req)

    @_stream_guard(spb.ReceiveMessageResponse)
    async def ReceiveMessage(self, req, context):
        self._e.sessions.heard_from(metadata(context).get("x-mq-client-id"))    # alive: its messages stay renewed
        async for resp in self._e.consumers.receive(req, context):
            yield resp

    async def Telemetry(self, request_iterator, context):
        try:
            self._authorize(context, "Telemetry")
        except V2Error as exc:
            yield spb.TelemetryCommand(status=exc.to_status())
            return
        async for cmd in self._e.sessions.telemetry(request_iterator, context, self._settings_check(context)):
            yield cmd

    @_stream_guard(spb.PullMessageResponse)
    async def PullMessage(self, req, context):
        async for resp in self._e.pulls.pull(req, context):
            yield resp

    @_guard(spb.UpdateOffsetResponse)
    async def UpdateOffset(self, req, context):
        return await self._e.pulls.update_offset(req)

    @_guard(spb.GetOffsetResponse)
    async def GetOffset(self, req, context):
        return await self._e.pulls.get_offset(req)

    @_guard(spb.QueryOffsetResponse)
    async def QueryOffset(self, req, context):
        return await self._e.pulls.query_offset(req)

    @_guard(spb.RecallMessageResponse)
    async def RecallMessage(self, req, context):
        return await self._e.producers.recall(req, context)

    async def SyncLiteSubscription(self, req, context):
        return spb.SyncLiteSubscriptionResponse(status=_not_implemented("SyncLiteSubscription"))


def grpc_server_credentials(tls: ServerTls) -> grpc.ServerCredentials:
    """*tls*'s certificate for a grpc server port; new handshakes get the files again when they change."""
    need = tls.config.need_client_auth

    def config(pems):
        cert, key, trust = pems
        return grpc.ssl_server_certificate_configuration([(key, cert)],
                                                         root_certificates=trust if need != "none" else None)

    seen, pems = tls.snapshot()
    state = {"seen": seen}

    def fetch():                                   # on a grpc thread, for every handshake
        try:
            tls.reload_if_changed()
            reloads, pems = tls.snapshot()
            if reloads == state["seen"]:
                return None                        # unchanged: grpc keeps the configuration it has
            state["seen"] = reloads
            log.info("gRPC endpoint: new TLS certificate from %s", tls.config.cert_path)
            return config(pems)
        except Exception:
            log.exception("gRPC endpoint: TLS certificate check failed; the old one stays in use")
            return None

    return grpc.dynamic_ssl_server_credentials(config(pems), fetch,
                                               require_client_authentication=need == "require")


def _peer_ip(context) -> str:
    """``ipv4:1.2.3.4:5678`` / ``ipv6:[::1]:5678`` as grpc names the peer -> the bare IP."""
    peer = context.peer() or ""
    return peer.partition(":")[2].rpartition(":")[0].strip("[]")


def _not_implemented(name: str):
    return status(Code.NOT_IMPLEMENTED, f"{name} is not served by rocketq's gRPC endpoint")
