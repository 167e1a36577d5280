"""``rocketq controller``: a controller process of brokers in controller mode, its state in etcd.

Theory of operation
-------------------
Any number of these processes run against one etcd cluster; :mod:`rocketq.controller.leadership` makes
one of them active.  Each serves the remoting protocol on its own port:

* the active one takes the brokers' heartbeats (CONTROLLER_REGISTER_BROKER, 1003, rocketq's JSON body
  of :mod:`rocketq.namesrv.controller`), elects masters on timeouts (a check every ``CHECK_INTERVAL_S``)
  and on an operator's CONTROLLER_ELECT_MASTER (1002), and answers the reads;
* a standby answers CONTROLLER_NOT_LEADER (2007) with the active one's address in the remark and in
  the ``leaderAddress`` header field, so that a broker moves on to it (brokers list every controller in
  ``controllerAddr``, separated by ``;`` as in RocketMQ);
* every one answers CONTROLLER_GET_METADATA_INFO (1005) with RocketMQ's header (group, leader id and
  address, isLeader, peers) - what ``mqadmin getControllerMetaData`` prints and what mqadmin's
  ``getSyncStateSet`` / ``electMaster`` use to find the active controller.

Liveness is judged only over time this controller could hear: a broker is declared dead when the
controller was listening for a whole master timeout without a heartbeat from it.  A controller that
could not listen for longer than ``DEAF_GAP_S`` - not active for a while (its lease's validity lapsed
while etcd elected a new leader, which extends leases, so it resumes with the same lease), the lock
held by an etcd call that hung, or the process paused - missed heartbeats that the brokers did send;
before it judges anything again it counts every broker as heard at that moment (the master gets a
full timeout, and a slave is elected only on a report newer than that), as a takeover does.

With an ACL (``acl``, the :class:`~rocketq.acl.AclValidator` of a ``plain_acl.yml``, ``--acl``) every
request - reads included: nothing here is for ordinary clients - must be an admin account's signed
request (brokers sign with their credentials as they sign to the NameServers; mqadmin with ``ak``/``sk``)
or come from a white-listed address; anything else is answered NO_PERMISSION naming why, and logged
with the peer.  The file is re-read when it changes.

Every request that changes a set is handled under one lock: the core applies it in memory, the change
is written to etcd with a compare-and-swap (:meth:`EtcdController.persist`), and only then is the broker
answered.  A failed write is answered SYSTEM_ERROR and the set reloaded from etcd.  Request bodies are
bounded by the remoting frame limit; every etcd call has a timeout (:mod:`rocketq.controller.etcd`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from rocketq.controller import wire
from rocketq.controller.etcd import EtcdClient, EtcdError
from rocketq.controller.leadership import DEFAULT_LEASE_TTL_S, Leadership
from rocketq.controller.state import EtcdController, NotLeader, after_check
from rocketq.namesrv.controller import DEFAULT_MASTER_TIMEOUT_MS, BrokerSet
from rocketq.remoting import RemotingCommand, RemotingServer, RequestCode, ResponseCode

log = logging.getLogger(__name__)

DEFAULT_PORT = 9878                   # RocketMQ's controller listen port (ControllerConfig)
DEFAULT_PREFIX = "/rocketq/controller/"
ACL_WATCH_INTERVAL_S = 1.0            # plain_acl.yml is re-read this soon after it changes
CHECK_INTERVAL_S = 0.2                # how often the active controller looks for silent masters
DEAF_GAP_S = 1.0                      # a broker heartbeat interval (rocketq.broker.controlled): longer
                                      # without a check under the lock, and heartbeats may have been missed


def wall_ms() -> int:
    return int(time.time() * 1000)


class ControllerServer:
    def __init__(self, etcd_endpoints: list[str], host: str = "127.0.0.1", port: int = DEFAULT_PORT, *,
                 prefix: str = DEFAULT_PREFIX, master_timeout_ms: int = DEFAULT_MASTER_TIMEOUT_MS,
                 elect_unclean: bool = False, lease_ttl_s: int = DEFAULT_LEASE_TTL_S,
                 advertise: str | None = None, acl=None):
        self.acl = acl                         # AclValidator or None
        self.etcd = EtcdClient(etcd_endpoints)
        self.core = EtcdController(self.etcd, prefix, master_timeout_ms=master_timeout_ms,
                                   elect_unclean=elect_unclean)
        self.prefix = prefix
        self.lease_ttl_s = lease_ttl_s
        self._advertise = advertise
        self._server = RemotingServer(self._handle, host, port, what="controller")
        self.lock = asyncio.Lock()
        self.loaded = False                    # the core holds etcd's state (we are active and loaded it)
        self.leadership: Leadership | None = None
        self._tasks: list[asyncio.Task] = []
        self._listened_at = 0.0                # loop time of the last check or request handled while active

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def address(self) -> str:
        return self._advertise or f"{self._server.host}:{self.port}"

    async def start(self) -> ControllerServer:
        await self._server.start()
        self.leadership = Leadership(self.etcd, self.prefix, self.address, ttl_s=self.lease_ttl_s,
                                     on_elected=self._elected, on_lost=self._lost)
        self._tasks = [asyncio.create_task(self.leadership.run(), name="controller-leadership"),
                       asyncio.create_task(self._check_loop(), name="controller-check")]
        if self.acl is not None:
            self._tasks.append(asyncio.create_task(self._watch_acl_loop(), name="controller-acl-reload"))
        log.info("controller listening on %s (etcd %s, prefix %s)", self.address, ",".join(self.etcd.endpoints),
                 self.prefix)
        return self

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.leadership is not None:
            await self.leadership.resign()
        await self._server.close()
        await self.etcd.close()

    # -- leadership ------------------------------------------------------------------------------

    async def _elected(self, leader_rev: int) -> None:
        async with self.lock:
            await self.core.load_all(wall_ms(), leader_rev)     # every broker counts as heard now
            self._listened_at = asyncio.get_running_loop().time()
            self.loaded = True

    async def _lost(self) -> None:
        async with self.lock:
            self.loaded = False
            self.core.sets.clear()

    def active(self) -> bool:
        return self.loaded and self.leadership is not None and self.leadership.is_active()

    async def _check_loop(self) -> None:
        while True:
            await asyncio.sleep(CHECK_INTERVAL_S)
            if not self.active():
                continue
            try:
                async with self.lock:
                    self._after_deafness()
                    for s in list(self.core.sets.values()):
                        await self._check_and_persist(s, None)
            except (EtcdError, NotLeader) as exc:
                log.warning("controller check: %s", exc)

    def _after_deafness(self) -> None:
        """Under the lock, while active: after a gap in listening, count every broker as heard now."""
        now = asyncio.get_running_loop().time()
        gap = now - self._listened_at
        self._listened_at = now
        if gap <= DEAF_GAP_S or not self.core.sets:
            return
        now_ms = wall_ms()
        for s in self.core.sets.values():
            for m in s.members.values():
                m.last_ms = max(m.last_ms, now_ms)
        log.warning("controller %s could not hear brokers for %.1f s (not active, or stalled): every broker "
                    "counts as heard now and gets a full timeout", self.address, min(gap, 1e6))

    async def _check_and_persist(self, s: BrokerSet, apply) -> dict:
        """Apply *apply* (or a timeout check) to *s*, keep its SyncStateSet, write it; its replica info."""
        self._after_deafness()
        now_ms = wall_ms()
        old_master, old_epoch = s.master_id, s.epoch
        if apply is not None:
            apply(now_ms)
        else:
            self.core.check(s, now_ms)
        after_check(s, old_master, old_epoch, now_ms, self.core.master_timeout_ms)
        await self.core.persist(s, asyncio.get_running_loop().time(), now_ms)
        return self.core.replica_info(s, now_ms)

    # -- requests --------------------------------------------------------------------------------

    async def _watch_acl_loop(self) -> None:
        while True:
            await asyncio.sleep(ACL_WATCH_INTERVAL_S)
            self.acl.reload_if_changed()

    async def _handle(self, conn, cmd: RemotingCommand) -> RemotingCommand:
        if self.acl is not None:
            peer = conn.peername[0] if isinstance(conn.peername, tuple) and conn.peername else ""
            denied = self.acl.check_admin(str(peer), cmd)
            if denied is not None:
                log.warning("controller refused request code %d from %s: %s", cmd.code, conn.peer, denied.remark)
                return denied
        code = cmd.code
        if code == RequestCode.CONTROLLER_GET_METADATA_INFO:
            return await self._metadata(cmd)
        if code == RequestCode.GET_CONTROLLER_CONFIG:
            return wire.config_response(cmd, self)
        handler = self._LEADER_ONLY.get(code)
        if handler is None:
            return wire.unsupported(cmd)
        if not self.active():
            leader = self.leadership.leader_address if self.leadership else None
            return RemotingCommand.create_response(
                cmd, ResponseCode.CONTROLLER_NOT_LEADER,
                f"controller {self.address} is not the active controller; the active one is {leader or 'unknown'}",
                {"leaderAddress": leader or ""})
        try:
            async with self.lock:
                return await handler(self, cmd)
        except (EtcdError, NotLeader) as exc:
            return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR,
                                                   f"the controller could not store its state in etcd: {exc}")
        except (ValueError, KeyError, TypeError) as exc:
            return RemotingCommand.create_response(cmd, ResponseCode.CONTROLLER_INVALID_REQUEST,
                                                   f"bad controller request {code}: {exc}")

    async def _metadata(self, cmd: RemotingCommand) -> RemotingCommand:
        lead = self.leadership
        try:
            peers = await lead.peers() if lead is not None else []
        except EtcdError:
            peers = [self.address]
        sets = []
        if self.active():
            now = wall_ms()
            sets = [self.core.replica_info(s, now) for s in self.core.sets.values()]
        return wire.metadata_response(cmd, leader=lead.leader_address if lead else None,
                                      is_leader=self.active(), peers=peers, sets=sets)

    async def _heartbeat(self, cmd: RemotingCommand) -> RemotingCommand:
        req = json.loads(cmd.body or b"{}")
        key = (str(req["cluster"]), str(req["brokerName"]))
        s = self.core.sets.get(key)
        if s is None:
            s = self.core.sets[key] = BrokerSet(*key, sync_state_set=set())
        info = await self._check_and_persist(s, lambda now_ms: self.core.heartbeat(req, now_ms))
        return wire.json_response(cmd, info)

    async def _replica_info(self, cmd: RemotingCommand) -> RemotingCommand:
        cluster, name = cmd.get_str("cluster", ""), cmd.get_str("brokerName")
        try:
            s = self._find(cluster, name)
        except KeyError:                       # not known yet: no master, no history (a broker's first start)
            s = BrokerSet(cluster, name)
        info = self.core.replica_info(s, wall_ms())
        return wire.replica_info_response(cmd, info)

    async def _sync_state_data(self, cmd: RemotingCommand) -> RemotingCommand:
        names = json.loads(cmd.body or b"[]")
        if not isinstance(names, list):
            raise ValueError("the body must be a JSON list of broker names")
        now = wall_ms()
        found = [s for s in self.core.sets.values() if s.name in {str(n) for n in names}]
        return wire.sync_state_data_response(cmd, found, now, self.core.master_timeout_ms)

    async def _elect_master(self, cmd: RemotingCommand) -> RemotingCommand:
        s = self._find(cmd.get_str("clusterName", ""), cmd.get_str("brokerName"))
        bid = int(cmd.get_str("brokerId", "-1"))
        designate = cmd.get_str("designateElect", "false").lower() == "true"
        failure = []

        def apply(now_ms):
            failure.append(wire.elect(self.core, s, bid if designate or bid >= 0 else None, now_ms))
        info = await self._check_and_persist(s, apply)
        if failure[0]:
            return RemotingCommand.create_response(cmd, ResponseCode.CONTROLLER_ELECT_MASTER_FAILED, failure[0])
        return wire.elect_response(cmd, s, info)

    async def _clean_broker_data(self, cmd: RemotingCommand) -> RemotingCommand:
        s = self._find(cmd.get_str("clusterName", ""), cmd.get_str("brokerName"))
        return await wire.clean_broker_data(self.core, s, cmd, wall_ms())

    def _find(self, cluster: str, name: str) -> BrokerSet:
        for s in self.core.sets.values():
            if s.name == name and (not cluster or s.cluster == cluster):
                return s
        raise KeyError(f"no broker set {name!r}" + (f" in cluster {cluster!r}" if cluster else ""))

    _LEADER_ONLY = {
        RequestCode.CONTROLLER_HEARTBEAT: _heartbeat,
        RequestCode.CONTROLLER_GET_REPLICA_INFO: _replica_info,
        RequestCode.CONTROLLER_GET_SYNC_STATE_DATA: _sync_state_data,
        RequestCode.CONTROLLER_ELECT_MASTER: _elect_master,
        RequestCode.CLEAN_BROKER_DATA: _clean_broker_data,
    }
