"""A broker in controller mode (``enableControllerMode=true``): its role comes from the controller of
:mod:`rocketq.namesrv.controller`, not from ``brokerRole``.

Theory of operation
-------------------
At start, before the broker serves anything, :meth:`ControllerAgent.prepare` asks the controller
for the set's state (CONTROLLER_GET_REPLICA_INFO, retried while the controller is unreachable or a
takeover is still unconfirmed), opens the store (recovery tells where its log really ends) and,
when another broker is master, computes where this log stops agreeing with the controller's epoch
history (:func:`rocketq.broker.epochs.consistent_end`).  A longer log has a divergent tail - what an
old master wrote after the last byte its successor had - and it is cut with the offline
:func:`rocketq.store.tools.repair_store` (which also rebuilds consume queues and index) before the
store is opened again.  The cut point is the start offset of a later epoch, i.e. the log end of
the new master when it took over; the HA stream only ever ends a chunk on a record boundary, so
that is a record boundary of this log too.  This is checked (a record must start there, carrying
that offset, or a segment must) and the broker refuses to start when it does not hold.

Then, every ``HEARTBEAT_INTERVAL_S``, CONTROLLER_HEARTBEAT reports ``{cluster, brokerName,
brokerId, addr, haAddr, epoch, maxPhyOffset}`` and the answer drives the states::

    slave ──(controller: you are master, pending)──> promoting ──(start offset confirmed)──> master
      │  follows the master the controller names,              stops HA replication and slave sync,
      │  after checking its log is a prefix of it               appends (epoch, log end) to epoch.json,
      └──(own log diverges: needs a restart)──> fenced          reports that end as the start offset
    master ──(another broker is master of a newer epoch)──> fenced

A slave copies its master's topic configs every 10 s (RocketMQ's SlaveSynchronize), so a topic created
shortly before the master died can be missing on the new master although its acknowledged messages are
in the new master's log; on becoming master the broker therefore adds a config for every topic that
has a consume queue in its store and none in its table (queues up to the highest id seen, read-write),
so those messages are routed and readable.  RocketMQ keeps the gap (the topic comes back only when a
producer auto-creates it again); rocketq closes it.

A master becomes writable only once the controller confirmed its term (so a takeover is in the
history before anything is written in it), registers with the NameServers as brokerId 0 and
replicates as ``controllerMasterRole`` (SYNC_MASTER by default); every role change also sets the
registration's stateVersion to the epoch (:meth:`TopicConfigManager.enter_epoch`), so the NameServer
keeps routing the newest master when an older one registers late.  A fenced broker refuses sends at
once, withdraws its registration and logs that it needs a restart to rejoin as a slave (the restart
truncates).  With ``controllerLeaseEnable`` (the default) a master also refuses sends when its last
successful heartbeat is older than 80 % of the controller's master timeout: by then the controller
may be electing someone else, and a master cut off from the controller stops before it does.  It
leaves the NameServers' routes at that moment too (a watch of its own: a heartbeat to an unreachable
controller can wait several seconds for its timeouts).
"""

from __future__ import annotations

import asyncio
import json
import logging

from rocketq.broker.epochs import EpochFile, consistent_end
from rocketq.broker.registration import parse_namesrv_addrs
from rocketq.common.aio import wait_event
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketq.remoting.errors import RemotingError

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 1.0
PREPARE_TIMEOUT_S = 60.0
LEASE_FRACTION = 0.8
LEASE_CHECK_SLACK_S = 0.01              # the lease watch wakes this long after the lease's end
JAVA_LONG_MAX = (1 << 63) - 1
INTERNAL_TOPIC_PREFIX = "rmq_sys_"     # the broker's own (timer) topics: never routed, never recreated here


class ControllerError(RuntimeError):
    pass


class ControllerRefused(ControllerError):
    """The controller's ACL refused this broker's request (unsigned, unknown account, wrong secret)."""


class NoController(ControllerError):
    """The NameServer asked runs no controller (it was started without --enable-controller)."""


class ControllerAgent:
    def __init__(self, broker):
        self.broker = broker
        s = broker.settings
        addrs = parse_namesrv_addrs(s.controller_addr) if s.controller_addr else \
            parse_namesrv_addrs(s.namesrv_addr)[:1]
        if not addrs:
            raise ControllerError("enableControllerMode needs controllerAddr or namesrvAddr")
        self._ssl = broker.client_ssl_context()
        self.clients = {f"{h}:{p}": RemotingClient(h, p, ssl_context=self._ssl) for h, p in addrs}
        self.client = next(iter(self.clients.values()))     # the one believed active
        self.epochs = EpochFile(broker.store.config.store_path)
        self.state = "slave"                      # slave | promoting | master | fenced
        self.following: tuple[int, int] | None = None    # (epoch, master id) being followed
        self.lease_until = 0.0
        self.timeout_s = 3.0
        self._start_offset: int | None = None
        self._task: asyncio.Task | None = None
        self._lease_task: asyncio.Task | None = None
        self._wake = asyncio.Event()
        self._withdrawn = False                   # left the routes when the lease lapsed

    # -- talking to the controller ----------------------------------------------------------------

    async def _ask(self, code: int, header: dict | None = None, body: dict | None = None) -> dict:
        """Ask the active controller: a standby's CONTROLLER_NOT_LEADER names it; an unreachable one is
        skipped for the next in controllerAddr (each at most twice per call)."""
        problems = []
        for _ in range(2 * len(self.clients)):
            cmd = RemotingCommand.create_request(code, header or {}, json.dumps(body).encode() if body else b"")
            try:
                r = await self.client.invoke(self.broker.sign_outgoing(cmd), timeout_s=max(0.5, self.timeout_s / 2))
            except (OSError, asyncio.TimeoutError, RemotingError) as exc:
                problems.append(f"{self.client.address}: {exc or type(exc).__name__}")
                self._next_controller(None)
                continue
            if r.code == ResponseCode.CONTROLLER_NOT_LEADER:
                problems.append(f"{self.client.address}: {r.remark}")
                self._next_controller(r.ext_fields.get("leaderAddress") or None)
                continue
            return self._answer(r)
        raise ControllerError(f"no active controller answered: {'; '.join(problems[-len(self.clients):])}")

    def _next_controller(self, leader: str | None) -> None:
        if leader and leader != self.client.address:
            if leader not in self.clients:           # an active controller missing from controllerAddr
                host, _, port = leader.rpartition(":")
                self.clients[leader] = RemotingClient(host, int(port), ssl_context=self._ssl)
            self.client = self.clients[leader]
            return
        names = list(self.clients)
        self.client = self.clients[names[(names.index(self.client.address) + 1) % len(names)]]

    def _answer(self, r: RemotingCommand) -> dict:
        if r.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            raise NoController(f"{self.client.address} runs no controller (start the NameServer with "
                               "--enable-controller, or set controllerAddr)")
        if r.code == ResponseCode.NO_PERMISSION:
            raise ControllerRefused(f"controller {self.client.address} refused this broker: {r.remark} (with ACL on "
                                    "at the controller, set innerClientAuthenticationCredentials to an admin "
                                    "account of its plain_acl.yml, or give the broker the same ACL file)")
        if r.code != ResponseCode.SUCCESS:
            raise ControllerError(f"controller {self.client.address} answered {r.code}: {r.remark}")
        info = json.loads(r.body)
        self.timeout_s = info.get("masterTimeoutMs", 3000) / 1000
        return info

    def _report(self) -> dict:
        b = self.broker
        out = {"cluster": b.settings.cluster_name, "brokerName": b.settings.broker_name,
               "brokerId": b.settings.broker_id, "addr": b.address,
               "haAddr": getattr(getattr(b, "replication", None), "ha_addr", None) or "",
               "epoch": self.epochs.last_epoch, "maxPhyOffset": b.store.max_physical_offset()}
        if self._start_offset is not None:
            out["startOffset"] = self._start_offset
        return out

    # -- start-up: truncation before anything is served --------------------------------------------

    async def prepare(self) -> None:
        """Start the broker's store, first cutting a divergent tail (see the module docstring)."""
        info = await self._settled_info()
        store = self.broker.store
        await asyncio.to_thread(store.start)
        self.epochs.load()
        if self._resumes_master(info):
            info = await self._claim(info)
        me, master = self.broker.settings.broker_id, info["masterId"]
        if master is not None and master != me and info["history"]:
            end = store.max_physical_offset()
            cut = consistent_end(self.epochs.entries, end, [tuple(e) for e in info["history"]])
            if cut < end:
                await self._truncate(cut, end, info)
        elif self._resumes_master(info):
            log.info("resuming as master of epoch %d", info["epoch"])
            self.state = "master"

    def _resumes_master(self, info: dict) -> bool:
        return (info["masterId"] == self.broker.settings.broker_id and not info["pending"]
                and self.epochs.last_epoch == info["epoch"])

    async def _claim(self, start_info: dict) -> dict:
        """A restarted master, still master for the controller: one heartbeat before serving anything,
        so that the controller hears it now (its last heartbeat may be nearly a master timeout old) and
        this broker learns whether a successor was elected since the start-up query - then it starts
        as that master's slave (the tail cut offline here, below) instead of being fenced later.  Its HA
        port is not listening yet: reported empty, the first heartbeat of the loop gives it."""
        try:
            info = await self._ask(RequestCode.CONTROLLER_HEARTBEAT, body=dict(self._report(), haAddr=""))
        except ControllerRefused:
            raise
        except ControllerError as exc:     # the heartbeat loop decides (a successor then makes this its slave)
            log.warning("could not reach the controller again at start-up (%s): resuming as master until it answers",
                        exc)
            return start_info
        if info["masterId"] in (self.broker.settings.broker_id, None):
            return info
        log.warning("the controller elected broker %s (epoch %d) while this broker was starting: joining as "
                    "its slave", info["masterId"], info["epoch"])
        return await self._settled_info()

    async def _settled_info(self) -> dict:
        s = self.broker.settings
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PREPARE_TIMEOUT_S
        while True:
            try:
                info = await self._ask(RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                       {"cluster": s.cluster_name, "brokerName": s.broker_name})
                if not info["pending"]:
                    return info
                problem = f"the takeover of epoch {info['epoch']} is not confirmed yet"
            except (NoController, ControllerRefused):
                raise
            except Exception as exc:
                problem = str(exc)
            if loop.time() > deadline:
                raise ControllerError(f"no usable answer from the controller {self.client.address}: {problem}")
            log.info("waiting for the controller: %s", problem)
            await asyncio.sleep(0.5)

    async def _truncate(self, cut: int, end: int, info: dict) -> None:
        from rocketq.store import MessageStore
        from rocketq.store.tools import repair_store
        store = self.broker.store
        if cut % store.config.commitlog_file_size and store.read_message(cut) is None:
            await asyncio.to_thread(store.shutdown)
            raise ControllerError(f"the divergent tail would be cut at {cut}, which is not a record boundary of "
                                  f"this log; refusing to start (the epoch history or this store is damaged)")
        log.warning("log ends at %d but the master of epoch %d (broker %s) continued from %d: cutting the "
                    "divergent tail, %d bytes", end, info["epoch"], info["masterId"], cut, end - cut)
        await asyncio.to_thread(store.shutdown)
        report = await asyncio.to_thread(repair_store, store.config.store_path, truncate_at=cut)
        fresh = MessageStore(store.config)
        fresh.set_store_host(self.broker.address)
        await asyncio.to_thread(fresh.start)
        self.broker.store = fresh
        log.warning("divergent tail cut: %d bytes dropped, %d records kept, log ends at %d",
                    end - cut, report.records, fresh.max_physical_offset())

    # -- the heartbeat loop ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())
        self._lease_task = asyncio.create_task(self._watch_lease())

    async def close(self) -> None:
        tasks = [t for t in (self._task, self._lease_task) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for client in self.clients.values():
            await client.close()

    async def _loop(self) -> None:
        while True:
            self._wake.clear()
            try:
                await self.beat()
            except ControllerRefused as exc:          # a configuration error: say it loudly, keep trying
                log.error("controller heartbeat refused: %s", exc)
            except Exception as exc:
                log.warning("controller heartbeat failed: %s", exc)
            await self._leave_routes_if_lease_lapsed()
            await wait_event(self._wake, HEARTBEAT_INTERVAL_S)

    async def _watch_lease(self) -> None:
        """Check the lease when it ends, not only between heartbeats: a heartbeat to a controller that
        went silent waits for its timeouts (seconds), and a master must not stay routed that long."""
        loop = asyncio.get_running_loop()
        while True:
            if self.lease_until > 0.0:             # a resumed master no heartbeat confirmed yet has no lease
                await self._leave_routes_if_lease_lapsed()
            remaining = self.lease_until - loop.time()
            await asyncio.sleep(remaining + LEASE_CHECK_SLACK_S if remaining > 0 else HEARTBEAT_INTERVAL_S)

    async def _leave_routes_if_lease_lapsed(self) -> None:
        """A master cut off from the controller refuses sends once its lease lapsed; it also leaves the
        NameServers' routes, or its periodic registration would keep sending producers to it (and take
        the route back from the master elected meanwhile).  It registers again when a heartbeat renews
        the lease (:meth:`apply`)."""
        b = self.broker
        if (self.state == "master" and b.settings.controller_lease and not self._withdrawn
                and b.registrar is not None and asyncio.get_running_loop().time() > self.lease_until):
            self._withdrawn = True
            log.error("no contact with the controller for %.1f s: refusing sends and leaving the routes until "
                      "it answers again", self.timeout_s * LEASE_FRACTION)
            await b.registrar.withdraw()

    async def beat(self) -> None:
        sent = asyncio.get_running_loop().time()
        info = await self._ask(RequestCode.CONTROLLER_HEARTBEAT, body=self._report())
        await self.apply(info, sent)

    async def apply(self, info: dict, sent: float) -> None:
        me, master = self.broker.settings.broker_id, info["masterId"]
        if self.state == "fenced":
            return
        if master == me:
            if self.state == "master" and info["epoch"] == self.epochs.last_epoch:
                resumed = self.lease_until == 0.0            # the first heartbeat of a master resumed at start-up
                self.lease_until = sent + self.timeout_s * LEASE_FRACTION
                if resumed:                                  # writes (and deliveries) from now on
                    self.broker.start_master_services()
                    self.broker.topics.enter_epoch(info["epoch"])
                    if self.broker.registrar is not None:
                        self.broker.registrar.set_broker_id(0)
                        await self.broker.registrar.register_once()
                if self._withdrawn and self.broker.registrar is not None:
                    self._withdrawn = False
                    log.warning("the controller answers again and this is still the master of epoch %d: "
                                "registering again", info["epoch"])
                    await self.broker.registrar.register_once()
                    self.broker.registrar.start()
            elif self.state in ("slave", "master"):
                await self._prepare_takeover(info)
            elif self.state == "promoting" and not info["pending"]:
                await self._become_master(info, sent)
        elif self.state == "master" and self.lease_until == 0.0:
            await self._step_down_unused(info)
        elif self.state in ("master", "promoting"):
            await self._fence(f"broker {master} is master of epoch {info['epoch']}")
        else:
            await self._follow(info)

    # -- transitions -------------------------------------------------------------------------------

    async def _prepare_takeover(self, info: dict) -> None:
        b = self.broker
        await b.replication.stop_following()
        self.following = None
        self.state = "promoting"
        await asyncio.to_thread(b.store.wait_dispatched)
        start = b.store.max_physical_offset()
        self.epochs.append(info["epoch"], start)
        self._start_offset = start
        log.warning("elected master of epoch %d; confirming start offset %d", info["epoch"], start)
        self._wake.set()                           # confirm now, not in a second

    async def _become_master(self, info: dict, sent: float) -> None:
        b = self.broker
        if [info["epoch"], self._start_offset] != (info["history"] or [None])[-1]:
            await self._fence(f"the controller's history {info['history'][-3:]} does not end with this takeover")
            return
        self._start_offset = None
        b.store.reset_queue_offsets()
        adopt_stored_topics(b)
        b.start_master_services()
        self.lease_until = sent + self.timeout_s * LEASE_FRACTION
        self.state = "master"
        b.replication.role = b.settings.controller_master_role
        b.topics.enter_epoch(info["epoch"])
        log.warning("master of epoch %d from offset %d (%s)", info["epoch"], self.epochs.entries[-1][1],
                    b.replication.role)
        if b.registrar is not None:
            b.registrar.set_broker_id(0)
            await b.registrar.register_once()

    async def _step_down_unused(self, info: dict) -> None:
        """A master resumed at start-up that no heartbeat confirmed yet (so it took no write: no lease)
        hears of a successor elected meanwhile: it becomes that master's slave, as RocketMQ's
        ReplicasManager.changeToSlave does - fenced only if its log diverges (a restart cuts the tail)."""
        b = self.broker
        log.warning("broker %s became master of epoch %d while this broker was starting: joining as its slave",
                    info["masterId"], info["epoch"])
        self.state = "slave"
        await b.stop_master_services()
        b.replication.role = "SLAVE"          # it registered under its own id: it was never routed as master
        await self._follow(info)

    async def _fence(self, why: str) -> None:
        self.state = "fenced"
        log.error("fenced: %s; this broker refuses sends and needs a restart to rejoin as a slave "
                  "(the restart cuts a divergent tail)", why)
        await self.broker.replication.stop_following()
        await self.broker.stop_master_services()
        if self.broker.registrar is not None:
            await self.broker.registrar.withdraw()

    async def _follow(self, info: dict) -> None:
        rep, master = self.broker.replication, info["masterId"]
        if master is None or info["pending"] or not info["masterHaAddr"]:
            if self.following is not None and self.following[0] != info["epoch"]:
                await rep.stop_following()            # a takeover is under way: stop copying the old master
                self.following = None
            return
        if self.following == (info["epoch"], master) and rep.following_addrs() == (info["masterAddr"],
                                                                               info["masterHaAddr"]):
            return                    # (a master restarted on other ports keeps its epoch: follow the new ones)
        await rep.stop_following()
        self.following = None
        end = self.broker.store.max_physical_offset()
        history = [tuple(e) for e in info["history"]]
        cut = consistent_end(self.epochs.entries, end, history)
        if cut < end:
            await self._fence(f"this log ends at {end} but agrees with the master of epoch {info['epoch']} "
                              f"only up to {cut}")
            return
        self.epochs.adopt(history)
        self.broker.topics.enter_epoch(info["epoch"])
        await rep.follow(info["masterAddr"], info["masterHaAddr"])
        self.following = (info["epoch"], master)
        log.info("following broker %s (%s, HA %s), epoch %d", master, info["masterAddr"], info["masterHaAddr"],
                 info["epoch"])

    def routed_as_master(self) -> bool:
        """Register as brokerId 0: a master some heartbeat of this process confirmed (a master resumed at
        start-up is routed from its first heartbeat on, as a successor may have been elected meanwhile)."""
        return self.state == "master" and self.lease_until > 0.0

    def write_refusal(self) -> str | None:
        """Why this broker must not accept a send now, or None."""
        if self.state != "master":
            return f"not the master (controller mode, {self.state})"
        if self.broker.settings.controller_lease and asyncio.get_running_loop().time() > self.lease_until:
            return "no recent contact with the controller (lease expired)"
        return None


def adopt_stored_topics(broker) -> list[str]:
    """A config for every topic with messages in the store but none in the table (see the module
    docstring); the topics added."""
    from rocketq.broker.topic_config import TopicConfig, TopicConfigError
    added = []
    for topic, queue_ids in broker.store.topics().items():
        if broker.topics.get(topic) is not None or topic.startswith(INTERNAL_TOPIC_PREFIX):
            continue
        n = max(queue_ids) + 1
        try:
            broker.topics.update(TopicConfig(topic, n, n))
        except (TopicConfigError, OSError) as exc:
            log.error("topic %s has messages in this store but no config, and none could be made: %s", topic, exc)
            continue
        added.append(topic)
    if added:
        log.warning("new master: topics %s have messages in this log but had not reached this broker's topic "
                    "config before the takeover; configs made from the store's queues (check them with "
                    "`topic route`)", added)
    return added


def epoch_cache_handlers(broker) -> dict:
    """GET_BROKER_EPOCH_CACHE (1007, what ``mqadmin getBrokerEpoch`` asks each broker): RocketMQ's
    EpochEntryCache {clusterName, brokerName, brokerId, epochList [{epoch, startOffset, endOffset}],
    maxOffset}; each entry ends where the next starts, the last at Long.MAX_VALUE as in RocketMQ (mqadmin
    prints maxOffset there).  Only in controller mode, answered as RocketMQ answers otherwise."""
    async def epoch_cache(conn, cmd: RemotingCommand) -> RemotingCommand:
        agent = broker.controller_agent
        if agent is None:
            return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, "this request only for controllerMode ")
        entries = agent.epochs.entries
        ends = [start for _, start in entries[1:]] + [JAVA_LONG_MAX]
        s = broker.settings
        body = {"clusterName": s.cluster_name, "brokerName": s.broker_name, "brokerId": s.broker_id,
                "epochList": [{"epoch": e, "startOffset": start, "endOffset": end}
                              for (e, start), end in zip(entries, ends)],
                "maxOffset": broker.store.max_physical_offset()}
        return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, None, None, json.dumps(body).encode())
    return {RequestCode.GET_BROKER_EPOCH_CACHE: epoch_cache}
