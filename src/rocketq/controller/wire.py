"""The controller's answers in RocketMQ's shapes, so that mqadmin's controller commands work.

Theory of operation
-------------------
Field names are those of RocketMQ 5's headers and bodies (remoting/protocol/header/controller and
protocol/body):

* CONTROLLER_GET_METADATA_INFO (1005): header GetMetaDataResponseHeader {group, controllerLeaderId,
  controllerLeaderAddress, isLeader, peers ("a;b;c")}; rocketq adds a JSON body {"brokerSets": [...]}
  (rocketq's replica info of every set, from the active controller) that Java clients ignore.
* CONTROLLER_GET_REPLICA_INFO (1004): header GetReplicaInfoResponseHeader {masterBrokerId,
  masterAddress, masterEpoch}; the body is rocketq's replica info (RocketMQ's is a SyncStateSet).
* CONTROLLER_GET_SYNC_STATE_DATA (1006): body a JSON list of broker names; answer BrokerReplicasInfo
  {replicasInfoTable: {name: {masterBrokerId, masterAddress, masterEpoch, syncStateSetEpoch,
  inSyncReplicas, notInSyncReplicas: [{brokerName, brokerId, brokerAddress, alive}]}}}.
* CONTROLLER_ELECT_MASTER (1002): header ElectMasterRequestHeader {clusterName, brokerName, brokerId,
  designateElect}; answer ElectMasterResponseHeader {masterBrokerId, masterAddress, masterEpoch,
  syncStateSetEpoch} and a BrokerMemberGroup body {cluster, brokerName, brokerAddrs}.
* CLEAN_BROKER_DATA (1011): header {clusterName, brokerName, brokerControllerIdsToClean ("1;2"),
  isCleanLivingBroker}.
* GET_CONTROLLER_CONFIG (1010): a properties text body.

Codes rocketq does not serve are answered REQUEST_CODE_NOT_SUPPORTED with the reason.
"""

from __future__ import annotations

import json

from rocketq.namesrv.controller import BrokerSet
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

UNSUPPORTED = {
    RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET: "rocketq's controller derives the SyncStateSet from the brokers' "
                                                 "heartbeats (their log ends); masters do not send it",
    RequestCode.NOTIFY_BROKER_ROLE_CHANGED: "role changes reach rocketq brokers in the heartbeat answer",
    RequestCode.UPDATE_CONTROLLER_CONFIG: "the controller's settings are its command line options",
    RequestCode.CONTROLLER_GET_NEXT_BROKER_ID: "rocketq broker ids are configured (brokerId), not assigned",
    RequestCode.CONTROLLER_APPLY_BROKER_ID: "rocketq broker ids are configured (brokerId), not assigned",
}


def unsupported(cmd: RemotingCommand) -> RemotingCommand:
    why = UNSUPPORTED.get(cmd.code, "not a controller request")
    return RemotingCommand.create_response(cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                           f"request type {cmd.code} not supported by the controller: {why}")


def json_response(cmd: RemotingCommand, data, header: dict | None = None) -> RemotingCommand:
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, None, header,
                                           json.dumps(data, separators=(",", ":")).encode())


def metadata_response(cmd, *, leader: str | None, is_leader: bool, peers: list[str], sets: list[dict]):
    header = {"group": "rocketq-etcd", "controllerLeaderId": leader, "controllerLeaderAddress": leader,
              "isLeader": "true" if is_leader else "false", "peers": ";".join(peers)}
    return json_response(cmd, {"brokerSets": sets}, header)


def replica_info_response(cmd, info: dict):
    header = {"masterBrokerId": info["masterId"], "masterAddress": info["masterAddr"], "masterEpoch": info["epoch"]}
    return json_response(cmd, info, header)


def _alive(s: BrokerSet, bid: int, now_ms: int, timeout_ms: int) -> bool:
    m = s.members.get(bid)
    return m is not None and now_ms - m.last_ms <= timeout_ms


def sync_state_data_response(cmd, sets: list[BrokerSet], now_ms: int, timeout_ms: int):
    table = {}
    for s in sets:
        ids = sorted(s.members)
        in_sync = s.sync_state_set or set()
        master = s.members.get(s.master_id) if s.master_id is not None else None

        def ident(bid, s=s):
            return {"brokerName": s.name, "brokerId": bid, "brokerAddress": s.members[bid].addr,
                    "alive": _alive(s, bid, now_ms, timeout_ms)}
        table[s.name] = {"masterBrokerId": s.master_id, "masterAddress": master.addr if master else None,
                         "masterEpoch": s.epoch, "syncStateSetEpoch": s.sync_state_set_epoch,
                         "inSyncReplicas": [ident(b) for b in ids if b in in_sync],
                         "notInSyncReplicas": [ident(b) for b in ids if b not in in_sync]}
    return json_response(cmd, {"replicasInfoTable": table})


def elect(core, s: BrokerSet, bid: int | None, now_ms: int) -> str | None:
    """An operator's election on *s* (to *bid* if given); why it cannot be done, or None."""
    timeout = core.master_timeout_ms
    if bid is None:
        master = s.members.get(s.master_id) if s.master_id is not None else None
        if master is not None and now_ms - master.last_ms <= timeout:
            return None                          # a live master stays: nothing to elect
        s.elected_ms = 0                         # no grace: decide now
        core.check(s, now_ms)
        return None if s.master_id is not None and s.master_id != getattr(master, "broker_id", None) \
            else f"no broker of set {s.name} can be elected (none alive, in sync and up to date)"
    m = s.members.get(bid)
    if m is None:
        return f"broker {bid} is not a member of set {s.name}"
    if bid == s.master_id:
        return None                              # already its master: nothing changes (no new epoch)
    if not _alive(s, bid, now_ms, timeout):
        return f"broker {bid} of set {s.name} is not alive"
    if not core.elect_unclean:
        if m.epoch != s.confirmed_epoch:
            return f"broker {bid} of set {s.name} does not follow the current epoch {s.confirmed_epoch}"
        if s.sync_state_set is not None and bid not in s.sync_state_set:
            return f"broker {bid} of set {s.name} is not in the SyncStateSet {sorted(s.sync_state_set)}"
        if m.max_offset < s.synced_offset:
            return f"broker {bid} of set {s.name} ends at {m.max_offset}, behind {s.synced_offset}"
    s.master_id, s.epoch, s.pending, s.elected_ms = bid, s.epoch + 1, True, now_ms
    return None


def elect_response(cmd, s: BrokerSet, info: dict):
    header = {"masterBrokerId": info["masterId"], "masterAddress": info["masterAddr"], "masterEpoch": info["epoch"],
              "syncStateSetEpoch": s.sync_state_set_epoch}
    body = {"cluster": s.cluster, "brokerName": s.name,
            "brokerAddrs": {str(m.broker_id): m.addr for m in s.members.values()}}
    return json_response(cmd, body, header)


async def clean_broker_data(core, s: BrokerSet, cmd, now_ms: int):
    living = cmd.get_str("isCleanLivingBroker", "false").lower() == "true"
    raw = cmd.get_str("brokerControllerIdsToClean", "")
    ids = {int(x) for x in raw.replace(",", ";").split(";") if x.strip()} if raw else set(s.members)
    alive = [b for b in ids if _alive(s, b, now_ms, core.master_timeout_ms)]
    if alive and not living:
        return RemotingCommand.create_response(cmd, ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                               f"brokers {sorted(alive)} of set {s.name} are alive")
    if ids >= set(s.members):
        await core.delete_set(s)
    else:
        if s.master_id in ids:
            return RemotingCommand.create_response(cmd, ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                                                   f"broker {s.master_id} is the master of set {s.name}")
        for b in ids:
            s.members.pop(b, None)
            (s.sync_state_set or set()).discard(b)
        await core.persist(s, 0.0, now_ms)
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)


def config_response(cmd, server) -> RemotingCommand:
    props = {"controllerType": "etcd", "etcdEndpoints": ",".join(server.etcd.endpoints),
             "etcdPrefix": server.prefix, "controllerAddr": server.address,
             "scanNotActiveBrokerInterval": server.core.master_timeout_ms,
             "electUncleanEnable": str(server.core.elect_unclean).lower(),
             "leaseTtlSeconds": server.lease_ttl_s}
    body = "".join(f"{k}={v}\n" for k, v in props.items()).encode()
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, None, None, body)
