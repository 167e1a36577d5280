"""``RouteInfoManager``: which brokers serve which topics, and which brokers are alive.

Theory of operation
-------------------
Pure state, no I/O and no clock of its own (every time is a ``now_ms`` argument), used from one
event loop so it needs no lock.  Four tables, as in RocketMQ's ``RouteInfoManager``:

* ``topic_queue_table``   topic -> {brokerName: QueueData}
* ``broker_addr_table``   brokerName -> BrokerData(cluster, brokerName, {brokerId: "ip:port"})
* ``cluster_addr_table``  cluster -> {brokerName}
* ``broker_live_table``   brokerAddr -> BrokerLiveInfo(last update, data version, HA addr, conn key)

A broker registers every 30 s.  Topics are read only from the master (brokerId 0) and only when
its ``DataVersion`` differs from the one it last registered, or on its first registration, so a
steady heartbeat costs a dictionary update.  A broker leaves the tables when it unregisters, when
its connection closes, or when ``scan_inactive`` finds it silent for longer than its timeout.

Slave acting master (RocketMQ 5, brokers with ``enableSlaveActingMaster`` register
``enableActingMaster=true``): while a group has no master, :meth:`RouteInfoManager.route` names its
slave with the smallest brokerId under id 0 (so clients read from it and commit offsets to it) and
lists that group's queues without the write permission (producers go to other groups); that
"prime" slave's registrations keep the group's queue data up to date, write bit cleared.  The
stored tables are not changed: the master's return restores the normal route at once.

Invariants, kept by ``_drop_addr`` / ``_drop_broker_name`` as the only removal paths: every
brokerName in ``cluster_addr_table`` and ``topic_queue_table`` has a ``BrokerData`` with at least
one address; a brokerName with no address left is gone from all tables; an empty topic or cluster
entry is removed.  A route is only returned when it names at least one live brokerName.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from collections.abc import Hashable

from rocketq.namesrv.register_body import DataVersion, TopicConfigWrapper, TopicQueueConfig

log = logging.getLogger(__name__)

MASTER_ID = 0
PERM_WRITE = 2
DEFAULT_BROKER_EXPIRE_MS = 120_000      # RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME


@dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self) -> dict:
        return {"brokerName": self.broker_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm, "topicSysFlag": self.topic_sys_flag}


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str]
    enable_acting_master: bool = False

    def acting_addrs(self) -> dict[int, str]:
        """The addresses as routed: with acting master on and no master, the prime slave under id 0."""
        if MASTER_ID in self.broker_addrs or not self.enable_acting_master or not self.broker_addrs:
            return self.broker_addrs
        prime = min(self.broker_addrs)
        return {MASTER_ID: self.broker_addrs[prime], **{b: a for b, a in self.broker_addrs.items() if b != prime}}

    def to_json(self, *, routed: bool = False) -> dict:
        shown = self.acting_addrs() if routed else self.broker_addrs
        addrs = {str(bid): addr for bid, addr in sorted(shown.items())}
        return {"cluster": self.cluster, "brokerName": self.broker_name, "brokerAddrs": addrs,
                "enableActingMaster": self.enable_acting_master}


@dataclass
class BrokerLiveInfo:
    last_update_ms: int
    data_version: DataVersion
    ha_server_addr: str
    conn_key: Hashable | None
    timeout_ms: int | None = None        # the broker's heartbeatTimeoutMillis, if it sent one


@dataclass(frozen=True)
class RegisterResult:
    ha_server_addr: str | None = None
    master_addr: str | None = None


class RouteInfoManager:
    def __init__(self) -> None:
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}

    # -- registration -----------------------------------------------------------------------

    def register_broker(self, cluster: str, addr: str, name: str, broker_id: int, ha_addr: str,
                        topic_config_wrapper: TopicConfigWrapper | None, now_ms: int,
                        conn_key: Hashable | None = None, *, filter_servers: list[str] | None = None,
                        timeout_ms: int | None = None, enable_acting_master: bool = False) -> RegisterResult:
        """Record a broker's registration; returns the master's HA and broker address for a slave."""
        wrapper = topic_config_wrapper or TopicConfigWrapper()
        self.cluster_addr_table.setdefault(cluster, set()).add(name)
        broker = self.broker_addr_table.get(name)
        first = broker is None
        if broker is None:
            broker = self.broker_addr_table[name] = BrokerData(cluster, name, {})
        # One address holds one role: a slave promoted to master leaves its old id behind.
        for bid in [b for b, a in broker.broker_addrs.items() if a == addr and b != broker_id]:
            del broker.broker_addrs[bid]
        if self._older_than_holder(broker, broker_id, addr, wrapper.data_version):
            self.broker_live_table.pop(addr, None)
            return RegisterResult()
        first = broker.broker_addrs.get(broker_id) is None or first
        broker.broker_addrs[broker_id] = addr
        broker.enable_acting_master = enable_acting_master
        # the prime slave (smallest id) of a group without master keeps its queue data, read-only
        prime_slave = (broker_id != MASTER_ID and enable_acting_master and MASTER_ID not in broker.broker_addrs
                       and broker_id == min(broker.broker_addrs))
        if (broker_id == MASTER_ID or prime_slave) and (first or self._version_changed(addr, wrapper.data_version)):
            for topic_config in wrapper.topic_configs.values():
                self._update_queue_data(name, topic_config, read_only=prime_slave)
        previous = self.broker_live_table.get(addr)
        self.broker_live_table[addr] = BrokerLiveInfo(now_ms, wrapper.data_version, ha_addr, conn_key, timeout_ms)
        if previous is None:
            log.info("new broker registered: %s %s id=%d cluster=%s HA=%s", name, addr, broker_id, cluster, ha_addr)
        self._set_filter_servers(addr, filter_servers)
        return self._master_of(broker) if broker_id != MASTER_ID else RegisterResult()

    def _older_than_holder(self, broker: BrokerData, broker_id: int, addr: str, version: DataVersion) -> bool:
        """RocketMQ 5: a registration for an id another live address holds with a newer stateVersion (a
        controller's master epoch) is ignored, and its sender forgotten: a replaced master registering
        late must not take the route back from its successor."""
        holder = broker.broker_addrs.get(broker_id)
        live = self.broker_live_table.get(holder) if holder is not None and holder != addr else None
        if live is None or live.data_version.state_version <= version.state_version:
            return False
        log.warning("registration of %s %s as id %d ignored: %s holds that id with state version %d, newer than "
                    "its %d", broker.broker_name, addr, broker_id, holder, live.data_version.state_version,
                    version.state_version)
        return True

    def _version_changed(self, addr: str, version: DataVersion) -> bool:
        live = self.broker_live_table.get(addr)
        return live is None or live.data_version != version

    def _update_queue_data(self, broker_name: str, tc: TopicQueueConfig, *, read_only: bool = False) -> None:
        queues = self.topic_queue_table.setdefault(tc.topic, {})
        perm = tc.perm & ~PERM_WRITE if read_only else tc.perm
        new = QueueData(broker_name, tc.read_queue_nums, tc.write_queue_nums, perm, tc.topic_sys_flag)
        old = queues.get(broker_name)
        if old != new:
            log.info("route of topic %s: broker %s %s %d read / %d write queues, perm %d", tc.topic, broker_name,
                     "serves" if old is None else "now serves", new.read_queue_nums, new.write_queue_nums, new.perm)
            queues[broker_name] = new

    def _set_filter_servers(self, addr: str, filter_servers: list[str] | None) -> None:
        if filter_servers is None:
            return
        if filter_servers:
            self.filter_server_table[addr] = list(filter_servers)
        else:
            self.filter_server_table.pop(addr, None)

    def _master_of(self, broker: BrokerData) -> RegisterResult:
        master_addr = broker.broker_addrs.get(MASTER_ID)
        live = self.broker_live_table.get(master_addr) if master_addr else None
        if live is None:
            return RegisterResult()
        return RegisterResult(live.ha_server_addr, master_addr)

    def touch(self, addr: str, now_ms: int) -> bool:
        """A heartbeat without topics (BROKER_HEARTBEAT, QUERY_DATA_VERSION); False if unknown."""
        live = self.broker_live_table.get(addr)
        if live is not None:
            live.last_update_ms = now_ms
        return live is not None

    def data_version_of(self, addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(addr)
        return live.data_version if live else None

    # -- removal ----------------------------------------------------------------------------

    def unregister_broker(self, cluster: str, addr: str, name: str, broker_id: int) -> None:
        self.broker_live_table.pop(addr, None)
        self.filter_server_table.pop(addr, None)
        broker = self.broker_addr_table.get(name)
        if broker is not None and broker.broker_addrs.get(broker_id) == addr:
            del broker.broker_addrs[broker_id]
            if not broker.broker_addrs:
                self._drop_broker_name(name)
        log.info("broker unregistered: %s %s id=%d cluster=%s", name, addr, broker_id, cluster)

    def scan_inactive(self, now_ms: int, expire_ms: int = DEFAULT_BROKER_EXPIRE_MS) -> list[str]:
        """Remove brokers silent for longer than their timeout; returns their addresses."""
        expired = [addr for addr, live in self.broker_live_table.items()
                   if live.last_update_ms + (live.timeout_ms or expire_ms) < now_ms]
        for addr in expired:
            silent_ms = now_ms - self.broker_live_table[addr].last_update_ms
            log.warning("broker %s expired: no registration for %d ms", addr, silent_ms)
            self._drop_addr(addr)
        return expired

    def on_connection_closed(self, conn_key: Hashable) -> list[str]:
        """Remove the brokers whose latest registration came over this connection."""
        addrs = [addr for addr, live in self.broker_live_table.items() if live.conn_key == conn_key]
        for addr in addrs:
            log.info("broker %s removed: its connection closed", addr)
            self._drop_addr(addr)
        return addrs

    def _drop_addr(self, addr: str) -> None:
        self.broker_live_table.pop(addr, None)
        self.filter_server_table.pop(addr, None)
        for name, broker in list(self.broker_addr_table.items()):
            for bid in [b for b, a in broker.broker_addrs.items() if a == addr]:
                del broker.broker_addrs[bid]
            if not broker.broker_addrs:
                self._drop_broker_name(name)

    def _drop_broker_name(self, name: str) -> None:
        self.broker_addr_table.pop(name, None)
        for cluster, names in list(self.cluster_addr_table.items()):
            names.discard(name)
            if not names:
                del self.cluster_addr_table[cluster]
        for topic, queues in list(self.topic_queue_table.items()):
            if queues.pop(name, None) is not None and not queues:
                del self.topic_queue_table[topic]
        log.info("broker name %s has no address left; removed from all routes", name)

    # -- queries and admin ------------------------------------------------------------------

    def route(self, topic: str) -> dict | None:
        """TopicRouteData as JSON-ready dict, or None when no live broker serves *topic*."""
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        brokers = [self.broker_addr_table[n] for n in sorted(queues) if n in self.broker_addr_table]
        if not brokers:
            return None
        filters = {addr: self.filter_server_table[addr] for b in brokers for addr in b.broker_addrs.values()
                   if addr in self.filter_server_table}
        queue_datas = []
        for n in sorted(queues):
            qd = queues[n].to_json()
            b = self.broker_addr_table.get(n)
            if b is not None and b.acting_addrs() is not b.broker_addrs:      # a slave acts as master: no writes
                qd["perm"] &= ~PERM_WRITE
            queue_datas.append(qd)
        return {"orderTopicConf": None, "queueDatas": queue_datas,
                "brokerDatas": [b.to_json(routed=True) for b in brokers], "filterServerTable": filters}

    def cluster_info(self) -> dict:
        return {"brokerAddrTable": {n: b.to_json() for n, b in sorted(self.broker_addr_table.items())},
                "clusterAddrTable": {c: sorted(names) for c, names in sorted(self.cluster_addr_table.items())}}

    def all_topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_by_cluster(self, cluster: str) -> list[str]:
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, queues in self.topic_queue_table.items() if names & queues.keys())

    def delete_topic(self, topic: str, cluster: str | None = None) -> bool:
        """Forget *topic* (only its queues on *cluster*'s brokers, if given); True if anything went."""
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return False
        if cluster is None:
            del self.topic_queue_table[topic]
            return True
        names = self.cluster_addr_table.get(cluster, set())
        removed = [n for n in list(queues) if n in names and queues.pop(n)]
        if not queues:
            del self.topic_queue_table[topic]
        return bool(removed)

    def wipe_write_perm(self, broker_name: str) -> int:
        """Clear the WRITE bit of every topic on *broker_name* (before taking it down); returns the count."""
        changed = 0
        for queues in self.topic_queue_table.values():
            qd = queues.get(broker_name)
            if qd is not None:
                qd.perm &= ~PERM_WRITE
                changed += 1
        return changed
