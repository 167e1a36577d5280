"""The controller's state kept in etcd: one JSON document per broker set, written only by the active
controller and only with compare-and-swap transactions.

Theory of operation
-------------------
The election rules are those of :mod:`rocketq.namesrv.controller` (the same :class:`Controller` core:
who is master of which epoch, the confirmed epoch history, the pending takeover); this module adds
where the state lives.  Each broker set (cluster, brokerName) is the key
``<prefix>sets/<cluster>/<brokerName>``::

    {"cluster": c, "brokerName": n, "masterId": id|null, "epoch": e, "pending": bool,
     "history": [[epoch, startOffset], ...], "syncedOffset": o,
     "syncStateSet": [id, ...], "syncStateSetEpoch": k, "brokers": {id: {"addr": a, "haAddr": h}}}

Every change of a set's durable part (master, epoch, pending, history, SyncStateSet, broker addresses)
is written before the broker that asked is answered, in a transaction that succeeds only if

* the leader key still carries this controller's lease entry (``create_revision`` of the leader key
  equals the one this controller created: a controller whose lease expired cannot write), and
* the set's document is unchanged since this controller read or wrote it (``mod_revision``).

So two controllers can never both elect a master of the same epoch: the second write fails its
compare; the loser reloads (and, no longer leader, stops answering).  ``syncedOffset`` (the highest
log end a follower reported) changes with every heartbeat under load; it is written with the next
durable change or at most every ``SYNCED_OFFSET_WRITE_S``.

Liveness (last heartbeat, reported epoch and log end) is in the active controller's memory only, as in
RocketMQ's controller (its BrokerHeartbeatManager is not replicated either).  A controller that takes
over loads every set from etcd, gives every broker a full master timeout from the takeover, and counts
a broker as following an epoch only once it has reported since the takeover - so a broker that died
with the old controller is never elected on stale numbers.

SyncStateSet (RocketMQ's in-sync replicas): while a set's master is alive and confirmed, the master and
every live broker of the confirmed epoch whose reported log end is within ``IN_SYNC_MAX_GAP_BYTES`` of
the master's; its epoch increases whenever it changes.  RocketMQ's master sends ALTER_SYNC_STATE_SET;
rocketq's controller derives it from heartbeats instead (both sides report their log end anyway).
Only members of it can be elected unless ``elect_unclean``.  While the master is dead or pending it
is frozen.
"""

from __future__ import annotations

import json
import logging

from rocketq.controller.etcd import EtcdClient, EtcdError, compare, delete_op, put_op
from rocketq.namesrv.controller import BrokerSet, Controller, Member

log = logging.getLogger(__name__)

IN_SYNC_MAX_GAP_BYTES = 256 * 1024 * 1024     # RocketMQ's haMaxGapNotInSync
SYNCED_OFFSET_WRITE_S = 1.0
UNKNOWN_EPOCH = -1                             # not reported since this controller took over


class NotLeader(RuntimeError):
    """This controller lost its lease (or never had it): it must not change the state."""


def set_key(prefix: str, cluster: str, name: str) -> str:
    return f"{prefix}sets/{cluster}/{name}"


def durable(s: BrokerSet) -> tuple:
    """What must be in etcd before a broker is told about it."""
    return (s.master_id, s.epoch, s.pending, tuple(map(tuple, s.history)),
            tuple(sorted(s.sync_state_set or ())), s.sync_state_set_epoch,
            tuple(sorted((m.broker_id, m.addr, m.ha_addr) for m in s.members.values())))


def encode(s: BrokerSet) -> bytes:
    return json.dumps({"cluster": s.cluster, "brokerName": s.name, "masterId": s.master_id, "epoch": s.epoch,
                       "pending": s.pending, "history": s.history, "syncedOffset": s.synced_offset,
                       "syncStateSet": sorted(s.sync_state_set or ()), "syncStateSetEpoch": s.sync_state_set_epoch,
                       "brokers": {str(m.broker_id): {"addr": m.addr, "haAddr": m.ha_addr}
                                   for m in s.members.values()}}, separators=(",", ":")).encode()


def decode(raw: bytes, now_ms: int) -> BrokerSet:
    d = json.loads(raw)
    s = BrokerSet(d["cluster"], d["brokerName"], d.get("masterId"), int(d.get("epoch", 0)), bool(d.get("pending")),
                  [list(map(int, e)) for e in d.get("history", [])], int(d.get("syncedOffset", 0)),
                  elected_ms=now_ms, sync_state_set={int(b) for b in d.get("syncStateSet", [])},
                  sync_state_set_epoch=int(d.get("syncStateSetEpoch", 0)))
    for bid, b in (d.get("brokers") or {}).items():
        s.members[int(bid)] = Member(int(bid), b.get("addr", ""), b.get("haAddr", ""), UNKNOWN_EPOCH, 0, now_ms)
    return s


def update_sync_state_set(s: BrokerSet, now_ms: int, timeout_ms: int) -> None:
    master = s.members.get(s.master_id) if s.master_id is not None else None
    if master is None or s.pending or now_ms - master.last_ms > timeout_ms or master.epoch != s.epoch:
        return
    members = {m.broker_id for m in s.members.values()
               if m.broker_id == s.master_id
               or (now_ms - m.last_ms <= timeout_ms and m.epoch == s.confirmed_epoch
                   and master.max_offset - m.max_offset <= IN_SYNC_MAX_GAP_BYTES)}
    if members != s.sync_state_set:
        log.info("broker set %s: SyncStateSet %s -> %s", s.name, sorted(s.sync_state_set or ()), sorted(members))
        s.sync_state_set = members
        s.sync_state_set_epoch += 1


class EtcdController(Controller):
    """The :class:`Controller` core with its state in etcd (see the module docstring)."""

    def __init__(self, etcd: EtcdClient, prefix: str, **kw):
        super().__init__(None, **kw)
        self.etcd = etcd
        self.prefix = prefix
        self.revs: dict[tuple[str, str], int] = {}         # mod_revision of each set's document
        self.written: dict[tuple[str, str], tuple[tuple, int, float]] = {}   # (durable, syncedOffset, at)
        self.leader_key = f"{prefix}leader"
        self.leader_rev = 0                                  # create_revision of our leader entry

    async def load_all(self, now_ms: int, leader_rev: int) -> None:
        kvs, _ = await self.etcd.get_prefix(f"{self.prefix}sets/")
        self.sets.clear()
        self.revs.clear()
        self.written.clear()
        for kv in kvs:
            s = decode(kv.value, now_ms)
            key = (s.cluster, s.name)
            self.sets[key], self.revs[key] = s, kv.mod_revision
            self.written[key] = (durable(s), s.synced_offset, 0.0)
        self.leader_rev = leader_rev
        log.info("controller: loaded %d broker sets from etcd", len(self.sets))

    def _save(self) -> None:
        """Writes happen in :meth:`persist` (async, compare-and-swap), not here."""

    async def reload(self, key: tuple[str, str], now_ms: int) -> None:
        """Replace a set with etcd's copy (after a failed write), keeping what brokers reported."""
        kv = await self.etcd.get(set_key(self.prefix, *key))
        old = self.sets.pop(key, None)
        if kv is None:
            self.revs.pop(key, None)
            self.written.pop(key, None)
            return
        s = decode(kv.value, now_ms)
        if old is not None:
            for bid, m in old.members.items():
                s.members[bid] = m
        self.sets[key], self.revs[key] = s, kv.mod_revision
        self.written[key] = (durable(s), s.synced_offset, 0.0)

    async def persist(self, s: BrokerSet, now_s: float, now_ms: int) -> None:
        """Write *s* if its durable part changed (or syncedOffset is due); NotLeader when the CAS fails."""
        key = (s.cluster, s.name)
        state = durable(s)
        last = self.written.get(key)
        if last is not None and last[0] == state and (
                last[1] == s.synced_offset or now_s - last[2] < SYNCED_OFFSET_WRITE_S):
            return
        k = set_key(self.prefix, *key)
        try:
            ok, answer = await self.etcd.txn(
                [compare(self.leader_key, "CREATE", self.leader_rev), compare(k, "MOD", self.revs.get(key, 0))],
                [put_op(k, encode(s))])
        except EtcdError:
            await self._reload_quietly(key, now_ms)
            raise
        if not ok:
            log.error("broker set %s: the write of epoch %d failed its compare (another controller wrote, or "
                      "this one lost its lease); reloading", s.name, s.epoch)
            await self._reload_quietly(key, now_ms)
            raise NotLeader(f"the state of broker set {s.name} changed under this controller")
        self.revs[key] = int(answer["header"]["revision"])
        self.written[key] = (state, s.synced_offset, now_s)

    async def delete_set(self, s: BrokerSet) -> None:
        """Forget *s* (CLEAN_BROKER_DATA), with the same compares as a write."""
        key = (s.cluster, s.name)
        k = set_key(self.prefix, *key)
        ok, _ = await self.etcd.txn([compare(self.leader_key, "CREATE", self.leader_rev),
                                     compare(k, "MOD", self.revs.get(key, 0))], [delete_op(k)])
        if not ok:
            raise NotLeader(f"the state of broker set {s.name} changed under this controller")
        self.sets.pop(key, None)
        self.revs.pop(key, None)
        self.written.pop(key, None)

    async def _reload_quietly(self, key, now_ms) -> None:
        try:
            await self.reload(key, now_ms)
        except EtcdError as exc:                 # the set stays as it was; the next write's CAS protects it
            log.warning("broker set %s: reloading from etcd failed: %s", key[1], exc)
            self.written.pop(key, None)


def after_check(s: BrokerSet, old_master: int | None, old_epoch: int, now_ms: int, timeout_ms: int) -> None:
    """Keep the SyncStateSet right after a heartbeat or a timeout check of *s* by the core."""
    if s.sync_state_set is None:
        s.sync_state_set = set()
    if s.epoch != old_epoch and s.master_id is not None:
        # a new term: its master, and whoever was in sync with the old one (they may still be)
        s.sync_state_set = ({s.master_id} | s.sync_state_set) - ({old_master} if old_master != s.master_id else set())
        s.sync_state_set_epoch += 1
    update_sync_state_set(s, now_ms, timeout_ms)
