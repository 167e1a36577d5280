"""The broker's settings (RocketMQ's BrokerConfig keys, mapped in :mod:`rocketq.broker.config_keys`),
checked when they are made: a setting that cannot work is refused naming its RocketMQ key."""

from __future__ import annotations

from dataclasses import dataclass

from rocketq.broker.credentials import parse_credentials
from rocketq.broker.timer_messages import DEFAULT_MAX_DELAY_SEC, TimerPolicy
from rocketq.remoting.limits import ConnectionLimits
from rocketq.remoting.tls import TlsServerConfig

GRPC_TRANSPORTS = ("grpcio", "native")


@dataclass(frozen=True)
class BrokerSettings:
    cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    host: str = "127.0.0.1"
    port: int = 10911
    auto_create_topic: bool = True
    default_topic_queue_nums: int = 4
    namesrv_addr: str | None = None          # "host:port;host:port", RocketMQ's namesrvAddr
    broker_id: int = 0
    announce_host: str | None = None         # the address clients should use, when host is 0.0.0.0
    transaction_check_interval_s: float = 60.0
    transaction_timeout_s: float = 6.0
    transaction_check_max: int = 15
    fast_failure: bool = True                # brokerFastFailureEnable
    wait_in_send_queue_ms: int = 200         # waitTimeMillsInSendQueue
    send_queue_capacity: int = 10_000        # sendThreadPoolQueueCapacity
    acl_enable: bool = False                 # aclEnable
    acl_file: str | None = None              # plain_acl.yml; default <storePathRootDir>/config/plain_acl.yml
    # innerClientAuthenticationCredentials (RocketMQ 5.3): {"accessKey": ..., "secretKey": ...} of an admin
    # account; what this broker signs its own requests with (NameServers, its master, HA)
    inner_credentials: str | None = None
    # ACL 2.0 (RocketMQ 5.3; rocketq.acl.setup): users and ACLs in <storePathRootDir>/config
    authentication_enabled: bool = False      # authenticationEnabled: every request signed by a known user
    authorization_enabled: bool = False       # authorizationEnabled: each request checked against its user's ACL
    init_authentication_user: str | None = None   # initAuthenticationUser: {"username":..,"password":..}, super
    authentication_metadata_provider: str | None = None   # only the local one (JSON files here, RocksDB there)
    authorization_metadata_provider: str | None = None
    validate_system_topic: bool = True        # validateSystemTopicWhenUpdateTopic: admins may not touch system topics
    tls: TlsServerConfig = TlsServerConfig()  # tls.server.mode / certPath / keyPath / trustCertPath
    tls_enable: bool = False                  # tls.enable: TLS on connections this broker makes
    tls_trust_cert_path: str | None = None    # tls.client.trustCertPath (None: do not verify, tls.test.mode)
    tls_client_cert_path: str | None = None   # tls.client.certPath / keyPath: the certificate this broker shows
    tls_client_key_path: str | None = None    # (a master with tls.server.need.client.auth=require asks for one)
    broker_role: str = "ASYNC_MASTER"         # brokerRole: ASYNC_MASTER | SYNC_MASTER | SLAVE
    ha_listen_port: int | None = None         # haListenPort (None: listenPort + 1)
    ha_master_address: str | None = None      # haMasterAddress (a slave; None: learned from the NameServers)
    slave_read_enable: bool = False           # slaveReadEnable: suggest a slave to consumers reading old data
    slave_acting_master: bool = False         # enableSlaveActingMaster (rocketq.broker.acting_master)
    which_broker_when_consume_slowly: int = 1  # whichBrokerWhenConsumeSlowly: the brokerId suggested then
    access_message_in_memory_max_ratio: int = 40  # accessMessageInMemoryMaxRatio: % of RAM counted as "hot"
    controller_mode: bool = False             # enableControllerMode: the controller decides the role
    controller_addr: str | None = None        # controllerAddr (None: the first of namesrvAddr)
    controller_master_role: str = "SYNC_MASTER"   # controllerMasterRole: how this broker replicates as master
    controller_lease: bool = True             # controllerLeaseEnable: a master out of touch stops taking sends
    timer_wheel_enable: bool = True           # timerWheelEnable: TIMER_* properties schedule a message
    timer_max_delay_sec: int = DEFAULT_MAX_DELAY_SEC  # timerMaxDelaySec: scheduled further ahead is refused
    timer_bucket_ms: int = 10_000             # width of one timer bucket file (rocketq's own)
    limits: ConnectionLimits = ConnectionLimits()  # of every port: serverMaxConnections, idle timeout...
    # metricsExporterType: PROM serves /metrics (rocketq.broker.metrics_http); DISABLE (RocketMQ's default, and
    # this class's) serves nothing - `rocketq serve` and `rocketq broker` turn it on
    metrics_exporter_type: str = "DISABLE"
    metrics_port: int | None = None           # metricsPromExporterPort (None: 5557, or free when port is 0)
    metrics_host: str | None = None           # metricsPromExporterHost (None: bindAddress)
    trace_topic_enable: bool = False          # traceTopicEnable: make msgTraceTopicName for clients' traces
    trace_topic_name: str = "RMQ_SYS_TRACE_TOPIC"   # msgTraceTopicName
    enable_property_filter: bool = False      # enablePropertyFilter: SQL92 subscriptions (off, as in RocketMQ)
    max_filter_message_size: int = 16_000     # maxFilterMessageSize: consume-queue bytes one filtered read scans
    enable_mixed_message_type: bool = False   # enableMixedMessageType: topics may be +message.type=MIXED
    default_message_request_mode: str = "PULL"  # defaultMessageRequestMode: QUERY_ASSIGNMENT's PULL | POP
    default_pop_share_queue_num: int = -1     # defaultPopShareQueueNum: -1 every pop client reads every queue
    # grpcTransport (rocketq's): the gRPC endpoint's HTTP/2 server, native (rocketq._native; ~5x less server CPU per
    # call, BENCHMARKS.md) or grpcio (grpc.aio); TLS is grpcio's either way
    grpc_transport: str = "native"

    def __post_init__(self) -> None:
        from rocketq.common.validation import topic_error
        if not 0 <= self.port <= 65535:
            raise ValueError(f"listenPort {self.port} is outside 0..65535")
        if self.broker_id < 0:
            raise ValueError(f"brokerId {self.broker_id} is negative")
        for what, name in (("brokerName", self.broker_name), ("brokerClusterName", self.cluster_name)):
            if topic_error(name):         # both become topic names in RocketMQ
                raise ValueError(f"{what} {name!r}: {topic_error(name)}")
        if bool(self.tls_client_cert_path) != bool(self.tls_client_key_path):
            raise ValueError("tls.client.certPath and tls.client.keyPath go together")
        if self.inner_credentials is not None:
            parse_credentials(self.inner_credentials)           # raises naming the key
        if self.grpc_transport not in GRPC_TRANSPORTS:
            raise ValueError(f"grpcTransport {self.grpc_transport!r} is not one of {', '.join(GRPC_TRANSPORTS)}")
        if self.metrics_exporter_type not in ("DISABLE", "PROM"):
            raise ValueError(f"metricsExporterType {self.metrics_exporter_type} is not PROM or DISABLE "
                             "(rocketq has no OTLP_GRPC or LOG exporter)")
        if self.metrics_port is not None and not 0 <= self.metrics_port <= 65535:
            raise ValueError(f"metricsPromExporterPort {self.metrics_port} is outside 0..65535")
        if topic_error(self.trace_topic_name):
            raise ValueError(f"msgTraceTopicName {self.trace_topic_name!r}: {topic_error(self.trace_topic_name)}")
        if self.default_topic_queue_nums < 1:
            raise ValueError("defaultTopicQueueNums must be at least 1")
        TimerPolicy(self.timer_wheel_enable, self.timer_max_delay_sec * 1000)        # raises if not positive
        if self.default_message_request_mode not in ("PULL", "POP"):
            raise ValueError(f"defaultMessageRequestMode {self.default_message_request_mode} is not PULL or POP")
        if self.max_filter_message_size < 20:
            raise ValueError(f"maxFilterMessageSize {self.max_filter_message_size} is below one consume-queue unit (20)")
        if self.timer_bucket_ms < 100:
            raise ValueError(f"timer_bucket_ms {self.timer_bucket_ms} is below 100")
        if self.broker_role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ValueError(f"brokerRole {self.broker_role} is not ASYNC_MASTER, SYNC_MASTER or SLAVE")
        if self.controller_mode:
            if self.broker_id < 1:
                raise ValueError("enableControllerMode: every broker of a set needs its own brokerId of 1 or more "
                                 "(the controller decides which one is master)")
            if self.controller_master_role not in ("ASYNC_MASTER", "SYNC_MASTER"):
                raise ValueError(f"controllerMasterRole {self.controller_master_role} is not ASYNC_MASTER or "
                                 "SYNC_MASTER")
        elif (self.broker_role == "SLAVE") != (self.broker_id > 0):
            raise ValueError(f"brokerRole {self.broker_role} with brokerId {self.broker_id}: a master has brokerId 0, "
                             "a slave a brokerId above 0")
