"""A broker over the remoting protocol: request codes mapped to small handlers over the store.

Served: SEND_MESSAGE / SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (with fast failure, see
:mod:`rocketq.broker.flow_control`), PULL_MESSAGE with long polling and RocketMQ's status-to-code
mapping (also as LITE_PULL_MESSAGE, which DefaultLitePullConsumer sends), QUERY / UPDATE_CONSUMER_OFFSET, GET_MAX / GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP,
GET_EARLIEST_MSG_STORETIME, VIEW_MESSAGE_BY_ID, QUERY_MESSAGE, HEART_BEAT, UNREGISTER_CLIENT,
GET_CONSUMER_LIST_BY_GROUP, LOCK / UNLOCK_BATCH_MQ, CONSUMER_SEND_MSG_BACK, END_TRANSACTION, and the
admin requests of :mod:`rocketq.broker.admin` and :mod:`rocketq.broker.admin_ops`.  Everything else is answered
REQUEST_CODE_NOT_SUPPORTED, as Java answers codes it has no processor for.

The store's put path is synchronous and short; under SYNC_FLUSH the handler awaits the group
commit without blocking the event loop (``MessageStore.put_message_async``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from rocketq.acl.requests import RequestBodyError, needs_of, request_names_refusal
from rocketq.acl.signing import sign
from rocketq.broker import (
    acting_master,
    admin,
    admin_ops,
    assignment,
    auth_admin,
    client_handlers,
    offset_reset,
    queries,
    recall,
    reply,
    runtime_config,
    send_handlers,
)
from rocketq.broker.acting_master import ActingMaster
from rocketq.broker.client_config import check_client_config
from rocketq.broker.clients import ClientManager
from rocketq.broker.consumer_offsets import ConsumerOffsetManager
from rocketq.broker.controlled import epoch_cache_handlers
from rocketq.broker.credentials import broker_credentials
from rocketq.broker.flow_control import FlowControl
from rocketq.broker.locks import QueueLocks
from rocketq.broker.long_polling import LongPollingService
from rocketq.broker.pop import PopService
from rocketq.broker.pop import remoting as pop_remoting
from rocketq.broker.pull import PullHandler
from rocketq.broker.registration import NameServerRegistrar, parse_namesrv_addrs
from rocketq.broker.replication import Replication
from rocketq.broker.send import host_of
from rocketq.broker.send_back import consumer_send_back
from rocketq.broker.settings import BrokerSettings  # callers import it from here too
from rocketq.broker.stats import BrokerStats
from rocketq.broker.subscription_groups import SubscriptionGroupManager
from rocketq.broker.timer import Timer
from rocketq.broker.timer_messages import TimerPolicy
from rocketq.broker.topic_config import TopicConfigManager
from rocketq.broker.transaction_check import TransactionChecker
from rocketq.broker.transactions import EndedTransactions, end_transaction
from rocketq.remoting import (
    RemotingCommand,
    RemotingServer,
    RequestCode,
    ResponseCode,
    not_supported_response,
)
from rocketq.remoting.tls import ServerTls, TlsMode, client_context
from rocketq.store import MessageStore, StoreConfig

log = logging.getLogger(__name__)

OFFSET_PERSIST_INTERVAL_S = 5.0
ACL_WATCH_INTERVAL_S = 1.0                 # plain_acl.yml is re-read this soon after it changes
CLIENT_SCAN_INTERVAL_S = 10.0              # consumers silent for the channel expiry are dropped this often
# sends start their handler inside the connection's data_received (see RemotingConnection): under
# ASYNC_FLUSH they finish there, without a task per request
EAGER_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})


class Broker:
    def __init__(self, settings: BrokerSettings, store_config: StoreConfig):
        self.settings = settings
        # controller mode: the store starts as a slave's (no delayed-message delivery) until promoted;
        # with slave acting master, until the slaves' progress is back (rocketq.broker.acting_master)
        self.store = MessageStore(store_config.replace(
            broker_role="SLAVE" if settings.controller_mode or settings.slave_acting_master else settings.broker_role))
        config_dir = Path(store_config.store_path) / "config"
        self.topics = TopicConfigManager(config_dir / "topics.json", cluster_name=settings.cluster_name,
                                         broker_name=settings.broker_name,
                                         auto_create_topic=settings.auto_create_topic,
                                         default_queue_nums=settings.default_topic_queue_nums)
        self.offsets = ConsumerOffsetManager(config_dir / "consumerOffset.json")
        self.store.consumed_offsets = self.offsets.lowest_by_queue   # cleaning under pressure keeps unread data
        self.groups = SubscriptionGroupManager(config_dir / "subscriptionGroup.json")
        self.server: RemotingServer | None = None
        self.server_tls: ServerTls | None = None
        self._tasks: list[asyncio.Task] = []
        self._handlers = {
            **send_handlers.handlers(self),
            RequestCode.CONSUMER_SEND_MSG_BACK: lambda conn, cmd: consumer_send_back(self, conn, cmd),
            RequestCode.END_TRANSACTION: lambda conn, cmd: end_transaction(self, conn, cmd),
            RequestCode.CHECK_CLIENT_CONFIG: lambda conn, cmd: check_client_config(self, conn, cmd),
            **admin.handlers(self), **admin_ops.handlers(self), **queries.handlers(self), **pop_remoting.handlers(self), **assignment.handlers(self),
            **recall.handlers(self, host_of), **reply.handlers(self, host_of), **offset_reset.handlers(self),
            **runtime_config.handlers(self), **auth_admin.handlers(self), **epoch_cache_handlers(self),
            **client_handlers.handlers(self), **acting_master.handlers(self),
        }
        self.stats = BrokerStats()
        self.locks = QueueLocks()
        from rocketq.acl.setup import access_control
        # ACL 1.0's AclValidator or ACL 2.0's AuthValidator (one interface), and ACL 2.0's users and ACLs
        self.acl, self.auth = access_control(settings, store_config.store_path)
        self.clients = ClientManager()
        self.timer_policy = TimerPolicy(settings.timer_wheel_enable, settings.timer_max_delay_sec * 1000)
        self.timer: Timer | None = None
        self.metrics = None

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self) -> Broker:
        self.topics.load()
        if self.settings.trace_topic_enable:       # RocketMQ makes it at start-up, one queue, read-write
            self.topics.create_system_topic(self.settings.trace_topic_name, queue_nums=1)
        self.offsets.load()
        self.groups.load()
        # one certificate (reloaded when its files change) for the remoting, HA and gRPC ports
        self.server_tls = ServerTls(self.settings.tls) if self.settings.tls.mode != TlsMode.DISABLED else None
        self.server = RemotingServer(self._handle, self.settings.host, self.settings.port, tls=self.server_tls,
                                     limits=self.settings.limits, what="broker", eager_codes=EAGER_CODES)
        await self.server.start(serving=False)             # bound: the port is known, nobody served yet
        host = self.settings.announce_host or (
            "127.0.0.1" if self.settings.host in ("0.0.0.0", "") else self.settings.host)
        self.address = f"{host}:{self.server.port}"
        self.store.set_store_host(self.address)             # message ids name the address clients reach
        self.registrar = None
        self.acting_master = None
        self.controller_agent = None
        # the timer runs on a master only, as the delay levels do (a slave's store takes no puts)
        self.timer = Timer(self.store, Path(self.store.config.store_path) / "timer",
                           bucket_ms=self.settings.timer_bucket_ms)
        self.store.arrival_listeners.append(self.timer.on_arrival)
        try:
            if self.settings.controller_mode:
                from rocketq.broker.controlled import ControllerAgent
                self.controller_agent = ControllerAgent(self)
                await self.controller_agent.prepare()       # may cut a divergent tail, then opens the store
                # a master resumed here starts its delay/timer deliveries at its first confirmed heartbeat
            else:
                self.store.start()
                if self.settings.broker_role != "SLAVE" and not self.settings.slave_acting_master:
                    self.timer.start()
        except BaseException:
            if self.controller_agent is not None:
                await self.controller_agent.close()
            await self.server.close()
            raise
        loop = asyncio.get_running_loop()
        self.flow_control = FlowControl(self.store, enabled=self.settings.fast_failure,
                                        max_wait_in_queue_ms=self.settings.wait_in_send_queue_ms,
                                        max_inflight_sends=self.settings.send_queue_capacity, clock=loop.time)
        self.long_polling = LongPollingService(loop)
        self.store.arrival_listeners.append(self.long_polling.notify_threadsafe)
        self.store.dispatcher.drive_from(loop, waiting=self._arrival_awaited)   # on the loop: no GIL hand-offs
        try:                                      # pop consumption, for gRPC receives and remoting POP_MESSAGE
            self.pop = PopService(self).start()
        except BaseException:                     # a corrupt pop log: say where, leave nothing running
            await self.timer.close()
            await self.server.close()
            await asyncio.to_thread(self.store.shutdown)
            raise
        st = self.settings
        self._pull = PullHandler(self.store, self.offsets, self.long_polling, self.stats, topic_of=self.topics.get,
                                 slave_read=(st.slave_read_enable,
                                             st.which_broker_when_consume_slowly,
                                             st.access_message_in_memory_max_ratio),
                                 is_slave=lambda: getattr(getattr(self, "replication", None), "role", "") == "SLAVE",
                                 registered=self.clients.subscription_data,
                                 property_filter=st.enable_property_filter,
                                 max_filter_message_bytes=st.max_filter_message_size)
        self._handlers[RequestCode.PULL_MESSAGE] = self._pull.handle
        self._handlers[RequestCode.LITE_PULL_MESSAGE] = self._pull.handle    # Java's lite pull consumer: the same read
        await self.server.serve()
        self.replication = Replication(self)
        # haListenPort defaults to listenPort + 1, or any free port when the broker's own port was 0
        ha_addr = await self.replication.start(host, self.server.port + 1 if self.settings.port else 0)
        addrs = parse_namesrv_addrs(self.settings.namesrv_addr)
        if addrs:
            self.registrar = NameServerRegistrar(addrs, cluster=self.settings.cluster_name,
                                                 broker_name=self.settings.broker_name,
                                                 broker_id=self._registered_id(), broker_addr=self.address,
                                                 ha_addr=ha_addr, topic_table=self.topics.encode,
                                                 ssl_context=self.client_ssl_context(), sign=self.sign_outgoing,
                                                 acting_master=self.settings.slave_acting_master)
            self.topics.listeners.append(self.registrar.topics_changed)
            await self.registrar.register_once()      # routes exist when start() returns, as in RocketMQ
            self.registrar.start()
        self._tasks.append(asyncio.create_task(self._persist_offsets_loop()))
        self._tasks.append(asyncio.create_task(self._sample_stats_loop()))
        self._tasks.append(asyncio.create_task(self._expire_clients_loop()))
        if self.acl is not None:
            self._tasks.append(asyncio.create_task(self._watch_acl_loop()))
        self.ended_transactions = EndedTransactions()
        self.transaction_checker = TransactionChecker(self, interval_s=self.settings.transaction_check_interval_s,
                                                      timeout_s=self.settings.transaction_timeout_s,
                                                      max_checks=self.settings.transaction_check_max)
        self.transaction_checker.start()
        if self.settings.slave_acting_master and not self.settings.controller_mode:
            self.acting_master = ActingMaster(self)
            self.acting_master.start()
        if self.controller_agent is not None:
            self.controller_agent.start()
        await self._start_metrics()
        log.info("broker %s listening on %s", self.settings.broker_name, self.address)
        return self

    async def _start_metrics(self) -> None:
        s = self.settings
        if s.metrics_exporter_type != "PROM":
            return
        from rocketq.broker.metrics_http import DEFAULT_METRICS_PORT, MetricsExporter
        port = s.metrics_port if s.metrics_port is not None else (DEFAULT_METRICS_PORT if s.port else 0)
        try:
            self.metrics = await MetricsExporter(self, s.metrics_host or s.host, port).start()
        except BaseException:
            await self.close()
            raise

    def listeners(self) -> list[tuple[str, str, int]]:
        """(what, bound host, port) of this broker's listening sockets: remoting, HA on a master, metrics."""
        out = [("broker", self.server.host, self.server.port)]
        master = getattr(getattr(self, "replication", None), "master", None)
        if master is not None:
            out.append(("HA", master.host, master.port))
        if self.metrics is not None:
            out.append(("metrics", self.metrics.host, self.metrics.port))
        return out

    def _registered_id(self) -> int:
        """The id in the NameServers' routes: 0 while master in controller mode (RocketMQ's convention),
        from the first heartbeat that confirms it."""
        agent = self.controller_agent
        return 0 if agent is not None and agent.routed_as_master() else self.settings.broker_id

    def start_master_services(self) -> None:
        """Controller mode, on becoming master: deliver delayed and timer messages (a slave does not)."""
        self.store.schedule.start()
        if self.timer is not None and not self.timer.running:
            self.timer.start()

    async def stop_master_services(self) -> None:
        """Controller mode, on losing mastership: no more delayed or timer deliveries from here."""
        await asyncio.to_thread(self.store.schedule.shutdown)
        if self.timer is not None:
            await self.timer.close()

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self.metrics is not None:
            await self.metrics.close()
            self.metrics = None
        if self.controller_agent is not None:
            await self.controller_agent.close()
        if getattr(self, "acting_master", None) is not None:
            await self.acting_master.close()
        if self.registrar is not None:
            await self.registrar.close()
        await self.replication.close()
        await self.transaction_checker.close()
        if self.server is not None:
            await self.server.close()
        self.long_polling.wake_all()
        if getattr(self, "pop", None) is not None:
            await self.pop.close()
        try:                         # a full disk must not keep the store from shutting down cleanly
            if self.timer is not None:
                await self.timer.close()
        except OSError as exc:
            log.error("timer checkpoint not saved at shutdown (its older checkpoint is used): %s", exc)
        try:
            self.offsets.persist()
        except OSError as exc:
            log.error("consumer offsets not saved at shutdown: %s", exc)
        await asyncio.to_thread(self.store.shutdown)

    async def _persist_offsets_loop(self) -> None:
        failing = False
        while True:
            await asyncio.sleep(OFFSET_PERSIST_INTERVAL_S)
            try:
                await asyncio.to_thread(self.offsets.persist)
            except OSError as exc:   # a full disk: kept in memory, tried again next round; logged once
                if not failing:
                    log.error("consumer offsets not saved (%s); retrying every %.0f s", exc, OFFSET_PERSIST_INTERVAL_S)
                failing = True
            else:
                if failing:
                    log.warning("consumer offsets saved again")
                failing = False

    def credentials(self) -> tuple[str, str] | None:
        """(accessKey, secretKey) this broker signs its own requests with (:mod:`rocketq.broker.credentials`)."""
        return broker_credentials(self.settings.inner_credentials, self.acl)

    def sign_outgoing(self, cmd: RemotingCommand) -> RemotingCommand:
        """*cmd* signed with :meth:`credentials` (ACL 1.0, as clients sign), or as it is without them."""
        creds = self.credentials()
        return sign(cmd, *creds) if creds is not None else cmd

    def client_ssl_context(self):
        """The SSL context for connections this broker opens (NameServers, ...), or None."""
        if not self.settings.tls_enable:
            return None
        trust = self.settings.tls_trust_cert_path
        return client_context(trust, verify=trust is not None, cert_path=self.settings.tls_client_cert_path,
                              key_path=self.settings.tls_client_key_path)

    def authorize_found(self, conn, cmd: RemotingCommand,
                        resources: list[tuple[str, str, int]]) -> RemotingCommand | None:
        """With ACL on: the NO_PERMISSION answer when the account that sent *cmd* may not have what
        the request found (the topic of the message at an offset), else None.  *conn* None is an
        in-process caller (the gRPC endpoint) that authorized the call itself."""
        if self.acl is None or conn is None:
            return None
        return self.acl.check_found(_ip_of(conn), cmd, resources)

    async def _sample_stats_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.stats.sample()

    async def _expire_clients_loop(self) -> None:
        """RocketMQ's ClientHousekeepingService: consumers silent for the channel expiry leave their groups."""
        while True:
            await asyncio.sleep(CLIENT_SCAN_INTERVAL_S)
            client_handlers.members_left(self, self.clients.expire())

    async def _watch_acl_loop(self) -> None:
        while True:
            await asyncio.sleep(ACL_WATCH_INTERVAL_S)
            self.acl.reload_if_changed()

    async def _handle(self, conn, cmd: RemotingCommand) -> RemotingCommand | None:
        started = time.perf_counter_ns()
        response = await self._serve(conn, cmd)
        self.stats.rpc(cmd.code, -1 if response is None else response.code, time.perf_counter_ns() - started)
        return response

    def _arrival_awaited(self) -> bool:
        """A held long poll or pop waits for a message: the dispatcher dispatches sends at once, not
        coalesced (store/dispatcher.py)."""
        if self.long_polling.held:
            return True
        pop = getattr(self, "pop", None)           # set right after drive_from
        popper = pop.popper if pop is not None else None
        return popper is not None and popper.waiting

    async def _serve(self, conn, cmd: RemotingCommand) -> RemotingCommand | None:
        if cmd.code not in EAGER_CODES:          # a reader sees every send answered before it asked
            self.store.dispatcher.catch_up()
        if "watched" not in conn.context:        # first request on this connection: watch its end
            conn.context["watched"] = True
            conn.on_close(lambda c: client_handlers.connection_closed(self, c))
        try:
            if self.acl is not None:
                denied = self.acl.check(_ip_of(conn), cmd, needs_of(cmd))
                if denied is not None:
                    return denied
            # every topic and group named is checked before any handler touches files with it
            bad_name = request_names_refusal(cmd)
        except RequestBodyError as exc:
            return RemotingCommand.create_response(cmd, ResponseCode.INVALID_PARAMETER, str(exc))
        if bad_name is not None:
            return RemotingCommand.create_response(cmd, ResponseCode.INVALID_PARAMETER, bad_name)
        handler = self._handlers.get(cmd.code)
        if handler is None:
            return not_supported_response(cmd)
        return await handler(conn, cmd)


_ok = admin.ok


def _ip_of(conn) -> str:
    peer = getattr(conn, "peername", None)
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""

