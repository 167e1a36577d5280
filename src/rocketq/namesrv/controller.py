"""The controller embedded in the NameServer (RocketMQ 5's ``enableControllerInNamesrv``): it decides
which broker of a broker set is the master, and keeps the epoch history of the set.

Theory of operation
-------------------
Brokers with ``enableControllerMode=true`` heartbeat every second over the NameServer's remoting
port.  Per broker set (cluster, brokerName) the controller keeps the master's broker id, the current
epoch, the confirmed epoch history ``[(epoch, startOffset)]`` and, per broker, its address, HA
address, last heartbeat, reported epoch and CommitLog end (``maxPhyOffset``).

* No master yet: the first broker to heartbeat is elected (epoch 1).
* The master silent for ``master_timeout_ms``: the controller elects the live broker that follows
  the current (last confirmed) epoch and has the highest CommitLog end - under SYNC_MASTER every acknowledged
  message is on some slave, and the slaves' logs are prefixes of the master's, so that slave has
  all of them.  It must also have at least ``synced_offset`` (the highest end any follower reported
  in this epoch, and the epoch's start): a slave known to be behind another is never elected, unless
  ``elect_unclean``.  Nobody eligible: no election, the set has no writable master.  A follower's
  report older than the master's last heartbeat plus one heartbeat interval (the master may have
  written until then) may miss what it received since: the election waits for its next report.
* An election makes the term *pending*: the elected broker stops replicating, appends
  ``(epoch, its log end)`` to its epoch file and confirms with that start offset in its next
  heartbeat; only then is the entry added to the history and the broker writable.  A broker that
  does not confirm within the timeout is replaced by a new election (the unconfirmed epoch number
  is skipped, it never enters the history).

State is in memory and in a JSON snapshot ``controller.json`` next to the KV config, rewritten
atomically on every change of a set's master, epoch or history (not on heartbeats), so a restarted
NameServer keeps epochs; after a restart every known broker gets a full timeout before it can be
declared dead.  The controller itself is not replicated.  Snapshot layout::

    {"brokerSets": [{"cluster": c, "brokerName": n, "masterId": id|null, "epoch": e, "pending": bool,
                     "history": [[epoch, startOffset], ...], "syncedOffset": o,
                     "brokers": [{"brokerId": id, "addr": a, "haAddr": h, "epoch": e, "maxPhyOffset": o}]}]}

Wire (JSON bodies, codes of :mod:`rocketq.remoting.codes`)::

    CONTROLLER_HEARTBEAT (1003)  {cluster, brokerName, brokerId, addr, haAddr, epoch, maxPhyOffset,
                                  startOffset?}  -> replica info
    CONTROLLER_GET_REPLICA_INFO (1004) header cluster, brokerName -> replica info
    CONTROLLER_GET_METADATA_INFO (1005) -> {"brokerSets": [replica info, ...]}
    replica info: {cluster, brokerName, masterId, masterAddr, masterHaAddr, epoch, pending,
                   history, masterTimeoutMs, brokers: {id: {addr, alive, epoch, maxPhyOffset}}}
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode, not_supported_response
from rocketq.store.config_files import read_json, write_json

log = logging.getLogger(__name__)

DEFAULT_MASTER_TIMEOUT_MS = 3000
REPORT_INTERVAL_MS = 1000          # brokers heartbeat this often (rocketq.broker.controlled.HEARTBEAT_INTERVAL_S)
SNAPSHOT_NAME = "controller.json"


@dataclass
class Member:
    broker_id: int
    addr: str = ""
    ha_addr: str = ""
    epoch: int = 0
    max_offset: int = 0
    last_ms: int = 0


@dataclass
class BrokerSet:
    cluster: str
    name: str
    master_id: int | None = None
    epoch: int = 0
    pending: bool = False
    history: list[list[int]] = field(default_factory=list)
    synced_offset: int = 0
    members: dict[int, Member] = field(default_factory=dict)
    elected_ms: int = 0
    # RocketMQ's SyncStateSet: the brokers known to hold what the master acknowledged; only these can be
    # elected (unless unclean).  None: not tracked (the embedded controller elects on offsets alone)
    sync_state_set: set[int] | None = None
    sync_state_set_epoch: int = 0

    @property
    def confirmed_epoch(self) -> int:
        """The epoch followers follow: the last one in the history (a pending takeover is not in it)."""
        return self.history[-1][0] if self.history else 0


def elect(s: BrokerSet, now_ms: int, timeout_ms: int, *, unclean: bool = False) -> Member | None:
    """The broker to make master of *s*: alive, not the failed master, following the current epoch,
    with the highest CommitLog end (lowest id on a tie), and not behind what a follower reported."""
    alive = [m for m in s.members.values()
             if m.broker_id != s.master_id and now_ms - m.last_ms <= timeout_ms and m.epoch == s.confirmed_epoch
             and (unclean or s.sync_state_set is None or m.broker_id in s.sync_state_set)]
    if not alive:
        return None
    old = s.members.get(s.master_id) if s.master_id is not None else None
    if old is not None:
        # the master wrote until at most one heartbeat interval after its last heartbeat; a report from
        # before then may miss what that follower received since: wait for its next one (or its timeout)
        stale = [m.broker_id for m in alive if m.last_ms < old.last_ms + REPORT_INTERVAL_MS]
        if stale:
            log.info("broker set %s: election waits for reports of %s newer than the master's last write",
                     s.name, stale)
            return None
    best = max(alive, key=lambda m: (m.max_offset, -m.broker_id))
    if best.max_offset < s.synced_offset and not unclean:
        log.warning("broker set %s: no election - the best live broker %d ends at %d, but a follower "
                    "reported %d", s.name, best.broker_id, best.max_offset, s.synced_offset)
        return None
    return best


class Controller:
    def __init__(self, snapshot_path: Path | str | None, *, master_timeout_ms: int = DEFAULT_MASTER_TIMEOUT_MS,
                 elect_unclean: bool = False):
        self.path = Path(snapshot_path) if snapshot_path is not None else None
        self.master_timeout_ms = master_timeout_ms
        self.elect_unclean = elect_unclean
        self.sets: dict[tuple[str, str], BrokerSet] = {}

    # -- persistence ---------------------------------------------------------------------------

    def load(self, now_ms: int) -> None:
        data = read_json(self.path) if self.path is not None else None
        for raw in (data or {}).get("brokerSets", []):
            s = BrokerSet(raw["cluster"], raw["brokerName"], raw.get("masterId"), int(raw.get("epoch", 0)),
                          bool(raw.get("pending")), [list(map(int, e)) for e in raw.get("history", [])],
                          int(raw.get("syncedOffset", 0)), elected_ms=now_ms)
            for b in raw.get("brokers", []):       # everybody gets a full timeout after a restart
                m = Member(int(b["brokerId"]), b.get("addr", ""), b.get("haAddr", ""), int(b.get("epoch", 0)),
                           int(b.get("maxPhyOffset", 0)), now_ms)
                s.members[m.broker_id] = m
            self.sets[(s.cluster, s.name)] = s
        if self.sets:
            log.info("controller: loaded %d broker sets from %s", len(self.sets), self.path)

    def _save(self) -> None:
        if self.path is None:
            return
        out = []
        for s in self.sets.values():
            out.append({"cluster": s.cluster, "brokerName": s.name, "masterId": s.master_id, "epoch": s.epoch,
                        "pending": s.pending, "history": s.history, "syncedOffset": s.synced_offset,
                        "brokers": [{"brokerId": m.broker_id, "addr": m.addr, "haAddr": m.ha_addr,
                                     "epoch": m.epoch, "maxPhyOffset": m.max_offset} for m in s.members.values()]})
        write_json(self.path, {"brokerSets": out})

    # -- requests ------------------------------------------------------------------------------

    def heartbeat(self, req: dict, now_ms: int) -> dict:
        key = (str(req["cluster"]), str(req["brokerName"]))
        s = self.sets.get(key)
        if s is None:
            s = self.sets[key] = BrokerSet(*key)
        bid = int(req["brokerId"])
        m = s.members.setdefault(bid, Member(bid))
        m.addr, m.ha_addr = str(req.get("addr", "")), str(req.get("haAddr", ""))
        m.epoch, m.max_offset, m.last_ms = int(req.get("epoch", 0)), int(req.get("maxPhyOffset", 0)), now_ms
        if bid != s.master_id and m.epoch == s.confirmed_epoch and m.max_offset > s.synced_offset:
            s.synced_offset = m.max_offset
        if req.get("startOffset") is not None and bid == s.master_id and s.pending and m.epoch == s.epoch:
            self._confirm(s, int(req["startOffset"]))
        self.check(s, now_ms)
        return self.replica_info(s, now_ms)

    def _confirm(self, s: BrokerSet, start: int) -> None:
        if s.history and start < s.history[-1][1]:
            log.error("broker set %s: master %s confirmed epoch %d at %d, before the previous epoch's start %d",
                      s.name, s.master_id, s.epoch, start, s.history[-1][1])
            return
        s.history.append([s.epoch, start])
        s.pending = False
        s.synced_offset = max(s.synced_offset, start)
        self._save()
        log.info("broker set %s: broker %d is master of epoch %d from offset %d", s.name, s.master_id, s.epoch, start)

    def check(self, s: BrokerSet, now_ms: int) -> bool:
        """Elect a master when there is none or the master (or a pending one) went silent."""
        master = s.members.get(s.master_id) if s.master_id is not None else None
        if master is not None and now_ms - max(master.last_ms, s.elected_ms) <= self.master_timeout_ms:
            return False
        if s.master_id is None and s.epoch == 0:            # a new set: the first broker heard from
            chosen = max(s.members.values(), key=lambda m: (m.max_offset, -m.broker_id), default=None)
        else:
            chosen = elect(s, now_ms, self.master_timeout_ms, unclean=self.elect_unclean)
        if chosen is None:
            return False
        old = s.master_id
        s.master_id, s.epoch, s.pending, s.elected_ms = chosen.broker_id, s.epoch + 1, True, now_ms
        self._save()
        log.warning("broker set %s: broker %d (%s, log end %d) elected master of epoch %d (was %s)",
                    s.name, chosen.broker_id, chosen.addr, chosen.max_offset, s.epoch, old)
        return True

    def check_all(self, now_ms: int) -> None:
        for s in self.sets.values():
            self.check(s, now_ms)

    def replica_info(self, s: BrokerSet, now_ms: int) -> dict:
        master = s.members.get(s.master_id) if s.master_id is not None else None
        return {"cluster": s.cluster, "brokerName": s.name, "masterId": s.master_id,
                "masterAddr": master.addr if master else None, "masterHaAddr": master.ha_addr if master else None,
                "epoch": s.epoch, "pending": s.pending, "history": s.history,
                "masterTimeoutMs": self.master_timeout_ms, "syncedOffset": s.synced_offset,
                "syncStateSet": sorted(s.sync_state_set) if s.sync_state_set is not None else None,
                "syncStateSetEpoch": s.sync_state_set_epoch,
                "brokers": {str(m.broker_id): {"addr": m.addr, "haAddr": m.ha_addr, "epoch": m.epoch,
                                               "maxPhyOffset": m.max_offset,
                                               "alive": now_ms - m.last_ms <= self.master_timeout_ms}
                            for m in s.members.values()}}

    def info(self, cluster: str, name: str, now_ms: int) -> dict:
        s = self.sets.get((cluster, name))
        return self.replica_info(s if s is not None else BrokerSet(cluster, name), now_ms)


# -- processors (plugged into rocketq.namesrv.processor's table) -------------------------------

def _json(cmd: RemotingCommand, data: dict) -> RemotingCommand:
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS,
                                           body=json.dumps(data, separators=(",", ":")).encode())


def _with_controller(fn):
    def processor(ctx, conn_key, cmd: RemotingCommand) -> RemotingCommand:
        if ctx.controller is None:
            return not_supported_response(cmd)
        return fn(ctx.controller, ctx.now_ms(), cmd)
    return processor


@_with_controller
def controller_heartbeat(controller: Controller, now_ms: int, cmd: RemotingCommand) -> RemotingCommand:
    try:
        req = json.loads(cmd.body or b"{}")
        return _json(cmd, controller.heartbeat(req, now_ms))
    except (ValueError, KeyError, TypeError) as exc:
        return RemotingCommand.create_response(cmd, ResponseCode.INVALID_PARAMETER, f"bad controller heartbeat: {exc}")


@_with_controller
def get_replica_info(controller: Controller, now_ms: int, cmd: RemotingCommand) -> RemotingCommand:
    return _json(cmd, controller.info(cmd.get_str("cluster"), cmd.get_str("brokerName"), now_ms))


@_with_controller
def get_metadata(controller: Controller, now_ms: int, cmd: RemotingCommand) -> RemotingCommand:
    controller.check_all(now_ms)
    return _json(cmd, {"brokerSets": [controller.replica_info(s, now_ms) for s in controller.sets.values()]})


PROCESSORS = {
    RequestCode.CONTROLLER_HEARTBEAT: controller_heartbeat,
    RequestCode.CONTROLLER_GET_REPLICA_INFO: get_replica_info,
    RequestCode.CONTROLLER_GET_METADATA_INFO: get_metadata,
}
