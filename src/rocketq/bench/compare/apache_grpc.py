"""Apache RocketMQ 5.3.3 over gRPC, through its proxy in local mode, as a :class:`System`.

Launch: as :mod:`.apache_rocketmq` (the NameServer JVM, the same broker.conf, the broker's JVM flags),
except that the second JVM is ``org.apache.rocketmq.proxy.ProxyStartup -pm local -bc broker.conf -pc
rmq-proxy.json -n <namesrv>``: proxy and broker in one process, the proxy calling the broker in-process
(what ``mqbroker --enable-proxy`` starts, with runbroker.sh's JVM settings). ``rmq-proxy.json`` names
the broker's cluster (``rocketMQClusterName``), puts ``grpcServerPort`` and ``remotingListenPort`` (the
proxy's own remoting front door, opened though nothing here uses it) on free ports, and sets
``localServeAddr`` / ``proxyName`` so nothing is looked up from the host's name; one setting differs
from the default: the shortest long poll (``MIN_LONG_POLL_MS``).

Listeners: RocketMQ 5.3.3's ProxyConfig has no bind-address option. The gRPC server is built with
``NettyServerBuilder.forPort`` and the proxy's remoting server with a default ``NettyServerConfig``
(bindAddress 0.0.0.0), so both listen on every interface while the run lasts, like the broker's HA
port; the broker's own listener is bound to loopback by broker.conf. (ProxyStartup, GrpcServerBuilder
and RemotingProtocolServer at rocketmq-all-5.3.3; unchanged on master.)

Driving: the very scenarios of the ``rocketq (gRPC)`` row (:class:`RocketqGrpc`: the official Python
5.x client, its caps and end-to-end rate), so the two gRPC rows differ only in the server. Unlike
rocketq the proxy does not create a topic on a route query, so the topics are created first, over
remoting, with ``GRPC_TOPIC_QUEUES`` queues (what rocketq creates on that query). The peer runs as
installed: no ACL and no TLS, whatever the run's security settings.

Durability: the broker's flushDiskType, as in the remoting row, checked by counting the sync calls of
the proxy's JVM (the store lives in it) and the NameServer's.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from rocketq.bench import official_client as oc
from rocketq.bench.compare.apache_rocketmq import (
    BROKER_JVM,
    CLUSTER,
    VERSION,
    ApacheRocketMQ,
)
from rocketq.bench.compare.peers import free_port
from rocketq.bench.compare.rocketq_grpc import RocketqGrpc

PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
PROXY_CONF = "rmq-proxy.json"
PROXY_NAME = "bench-proxy"
GRPC_TOPIC_QUEUES = 4              # rocketq's default_topic_queue_nums, what its gRPC route query creates
# The proxy stretches every receive's long poll to at least grpcClientConsumerMinLongPollingTimeoutMillis
# (default 5,000 ms) and refuses one whose deadline is shorter (the Java client's 500 ms await + 3 s request
# timeout in `bench grpc --java`). rocketq polls for what the client asks; so does the proxy down to this.
MIN_LONG_POLL_MS = 500
PORT_TRIES = 100
SETTINGS_TIMEOUT_S = 10.0          # the Java client's wait for a server's settings answer


def proxy_json(grpc_port: int, remoting_port: int) -> str:
    """rmq-proxy.json of a local-mode proxy in front of the bench broker."""
    return json.dumps({"rocketMQClusterName": CLUSTER, "proxyMode": "LOCAL", "proxyName": PROXY_NAME,
                       "localServeAddr": "127.0.0.1", "grpcServerPort": grpc_port,
                       "remotingListenPort": remoting_port,
                       "grpcClientConsumerMinLongPollingTimeoutMillis": MIN_LONG_POLL_MS}, indent=1)


def proxy_command(classpath: str, root: Path, broker_conf: Path, proxy_conf: Path, namesrv: str) -> list[str]:
    return ["java", *BROKER_JVM, f"-Duser.home={root}", f"-Drocketmq.home.dir={root}", "-cp", classpath,
            PROXY_MAIN, "-pm", "local", "-bc", str(broker_conf), "-pc", str(proxy_conf), "-n", namesrv]


def free_ports(count: int, taken: set[int]) -> list[int]:
    """*count* distinct free loopback ports, none of them in *taken*."""
    ports: list[int] = []
    for _ in range(PORT_TRIES):
        port = free_port()
        if port not in taken and port not in ports:
            ports.append(port)
            if len(ports) == count:
                return ports
    raise RuntimeError(f"no {count} free ports apart from {sorted(taken)}")


async def create_topics(namesrv: str, *topics: str) -> None:
    from rocketq.client import Admin
    async with Admin(namesrv) as admin:
        for topic in topics:
            await admin.create_topic(topic, queues=GRPC_TOPIC_QUEUES)


class ApacheRocketMQGrpc(RocketqGrpc, ApacheRocketMQ):
    """RocketqGrpc's scenarios on ApacheRocketMQ's start / stop / pids (the method order puts the
    scenarios first; start is spelled out below)."""
    name = "Apache RocketMQ (gRPC)"
    durability = ApacheRocketMQ.durability
    version = VERSION
    notes = (f"Apache RocketMQ {VERSION} proxy in local mode (proxy and broker in one JVM, broker heap 1 GiB) "
             f"beside its NameServer, driven exactly as the rocketq (gRPC) row: {RocketqGrpc.notes}. The proxy's "
             "gRPC and remoting listeners bind every interface (5.3.3 has no bind-address option)")

    def __init__(self, root: Path, sync: bool = False, security=None):
        super().__init__(root, sync=sync)             # a peer runs as installed: the run's security is not its own

    @classmethod
    def available(cls):
        return oc.available() or ApacheRocketMQ.available()

    @classmethod
    def refuses(cls, security):
        return None

    def _official(self) -> dict:
        return {"credentials": ("", ""), "tls": False}

    def _consumer(self, group: str, topic: str):
        """A started SimpleConsumer the proxy knows the settings of. The Python client 5.1.2 does not wait
        for its settings to be answered before a SimpleConsumer's start returns; the proxy answers a
        receive from a client whose settings it does not hold yet with INTERNAL_SERVER_ERROR (a
        NullPointerException in ReceiveMessageActivity), so wait for the client's own "settings
        answered" event first (rocketq serves that receive: its row does not wait)."""
        c = super()._consumer(group, topic)
        answered = getattr(c, "_init_settings_event", None)          # the client's, set on the proxy's answer
        if answered is not None and not answered.wait(SETTINGS_TIMEOUT_S):
            c.shutdown()
            raise RuntimeError(f"the proxy did not answer the consumer's settings in {SETTINGS_TIMEOUT_S:g} s")
        return c

    def start(self) -> None:
        ApacheRocketMQ.start(self)
        self.endpoint = f"127.0.0.1:{self.grpc_port}"
        try:
            asyncio.run(create_topics(self.namesrv, self._topic))
        except BaseException:
            self.stop()
            raise

    def server_command(self, classpath: str, broker_conf_path: Path) -> list[str]:
        ns_port, broker = int(self.namesrv.rsplit(":", 1)[1]), self.broker_port
        self.grpc_port, self.proxy_remoting_port = free_ports(2, {ns_port, broker - 2, broker, broker + 1})
        conf = self.root / PROXY_CONF
        conf.write_text(proxy_json(self.grpc_port, self.proxy_remoting_port))
        return proxy_command(classpath, self.root, broker_conf_path, conf, self.namesrv)

    def more_ports(self) -> tuple[int, ...]:
        return self.grpc_port, self.proxy_remoting_port

    async def end_to_end(self, rate, seconds, size):
        await create_topics(self.namesrv, self.e2e_topic(rate))
        return await super().end_to_end(rate, seconds, size)
