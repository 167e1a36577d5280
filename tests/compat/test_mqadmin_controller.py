"""mqadmin 5.3.3's controller commands against `rocketq controller` processes on etcd and brokers in
controller mode: getControllerMetaData (asked of the standby, it names the active controller and both
peers), getSyncStateSet (master, epochs, in-sync replicas), getBrokerEpoch (each broker's epoch
entries, asked of the brokers the NameServer lists) and electMaster (an operator moves the master to
the slave: a new epoch, the slave confirms it, the old master is fenced and, restarted, rejoins as a
slave; sends are taken again).  With ACL on at the controller, the same commands work signed by an admin
account (mqadmin's ak/sk) and are refused unsigned."""

from __future__ import annotations

import asyncio
import re

import pytest

from rocketq.client import Message, Producer
from rocketq.controller.etcd_cluster import etcd_missing
from rocketq.controller.local_cluster import LocalControlledCluster, until

pytestmark = pytest.mark.timeout(900)     # the first JVM of a session may build the clients

ACL_YAML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: ctl-admin
    secretKey: ctl-admin-secret
    admin: true
"""
ADMIN = {"ak": "ctl-admin", "sk": "ctl-admin-secret"}


@pytest.fixture(scope="module")
def controlled(tmp_path_factory):
    why = etcd_missing()
    if why:
        pytest.skip(why)
    cluster = LocalControlledCluster(tmp_path_factory.mktemp("mqadmin-ctl"), brokers=2, controllers=2).start()
    asyncio.run(until("both brokers in sync", lambda: _in_sync(cluster), 60))
    yield cluster
    cluster.stop()


async def _in_sync(cluster):
    info = await cluster.replica_info()
    return len(info.get("syncStateSet") or []) == 2


def _mqadmin(java_runner, *argv, **creds) -> str:
    out = java_runner("remoting", "rmq5", "rocketq.compat.Runner").mqadmin(*argv, **creds)
    assert "Exception" not in out and "null" not in out, out
    return out


def test_get_controller_metadata_from_the_standby(java_runner, controlled):
    active = asyncio.run(controlled.active_controller())
    standby = next(a for a in controlled.controller_addrs.values() if a != active)
    out = _mqadmin(java_runner, "getControllerMetaData", "-a", standby)
    assert re.search(rf"#ControllerLeaderAddress\s+{re.escape(active)}", out), out
    assert sorted(re.findall(r"#Peer:\s+(\S+)", out)) == sorted(controlled.controller_addrs.values()), out


def test_get_sync_state_set(java_runner, controlled):
    out = _mqadmin(java_runner, "getSyncStateSet", "-a", list(controlled.controller_addrs.values())[0],
                   "-b", controlled.broker_name)
    fields = dict(re.findall(r"#(\w+)\t(\S+)", out))
    assert fields["brokerName"] == controlled.broker_name and fields["MasterBrokerId"] == "1", out
    assert fields["MasterAddr"] == controlled.broker_addrs[1] and fields["MasterEpoch"] == "1", out
    assert fields["SyncStateSetNums"] == "2" and int(fields["SyncStateSetEpoch"]) >= 1, out
    for bid in (1, 2):
        assert re.search(rf"InSyncReplica:\s+ReplicaIdentity\{{brokerName='broker-a', brokerId={bid}, "
                         rf"brokerAddress='{re.escape(controlled.broker_addrs[bid])}', alive=true}}", out), out


def test_get_broker_epoch(java_runner, controlled):
    out = _mqadmin(java_runner, "getBrokerEpoch", "-n", controlled.namesrv, "-b", controlled.broker_name)
    for bid in (1, 2):
        assert f"#brokerAddr\t{controlled.broker_addrs[bid]}" in out, out
    assert re.findall(r"#Epoch: EpochEntry\{epoch=1, startOffset=0, endOffset=(\d+)\}", out), out


def test_elect_master_moves_the_master_to_the_slave(java_runner, controlled):
    # the first order must be to the current master (no new epoch), then to the slave
    out = _mqadmin(java_runner, "electMaster", "-a", list(controlled.controller_addrs.values())[1],
                   "-c", "DefaultCluster", "-bn", controlled.broker_name, "-b", "1")
    assert re.search(r"#MasterEpoch\s+1\b", out), out
    out = _mqadmin(java_runner, "electMaster", "-a", list(controlled.controller_addrs.values())[1],
                   "-c", "DefaultCluster", "-bn", controlled.broker_name, "-b", "2")
    assert re.search(rf"#BrokerMasterAddr\s+{re.escape(controlled.broker_addrs[2])}", out), out
    assert re.search(r"#MasterEpoch\s+2\b", out), out
    assert re.search(rf"#Broker\s+1\s+{re.escape(controlled.broker_addrs[1])}", out), out

    async def moved():
        info = await controlled.replica_info()
        return info.get("masterId") == 2 and not info["pending"] and \
            await controlled.master_routed() == controlled.broker_addrs[2]
    asyncio.run(until("broker 2 confirmed and routed as master", moved, 30))

    # the old master is fenced (it may hold a tail the new master lacks): restarted, it rejoins as a slave,
    # and SYNC_MASTER has a slave again
    async def fenced():
        return "fenced: broker 2 is master of epoch 2" in (controlled.root / "b1.log").read_text()
    asyncio.run(until("broker 1 fenced (its next heartbeat)", fenced, 10))
    proc = controlled.broker_procs.pop(1)
    proc.terminate()
    assert proc.wait(30) == 0
    controlled.start_broker(1)
    asyncio.run(until("broker 1 back in sync", lambda: _in_sync(controlled), 60))

    async def send():
        async with Producer("ctl_admin_pg", controlled.namesrv, retries=2, timeout_s=3) as p:
            return await p.send(Message("CtlAdminT", b"after electMaster"))
    assert asyncio.run(send()).status.value == "SEND_OK"
    out = _mqadmin(java_runner, "getBrokerEpoch", "-n", controlled.namesrv, "-b", controlled.broker_name)
    assert re.search(r"#Epoch: EpochEntry\{epoch=2, startOffset=\d+, endOffset=\d+\}", out), out


@pytest.fixture(scope="module")
def controlled_acl(tmp_path_factory):
    why = etcd_missing()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("mqadmin-ctl-acl")
    (root / "plain_acl.yml").write_text(ACL_YAML)
    cluster = LocalControlledCluster(root / "run", brokers=1, controllers=1, etcd_members=1,
                                     acl_file=root / "plain_acl.yml",
                                     credentials=(ADMIN["ak"], ADMIN["sk"])).start()
    yield cluster
    cluster.stop()


def test_controller_commands_with_acl_need_an_admin_account(java_runner, controlled_acl):
    ctl = controlled_acl.controller_addrs[0]
    out = _mqadmin(java_runner, "getControllerMetaData", "-a", ctl, **ADMIN)
    assert re.search(rf"#ControllerLeaderAddress\s+{re.escape(ctl)}", out), out
    out = _mqadmin(java_runner, "getSyncStateSet", "-a", ctl, "-b", controlled_acl.broker_name, **ADMIN)
    assert dict(re.findall(r"#(\w+)\t(\S+)", out))["MasterBrokerId"] == "1", out
    denied = java_runner("remoting", "rmq5", "rocketq.compat.Runner").mqadmin("getControllerMetaData", "-a", ctl)
    assert "ControllerLeaderAddress" not in denied and "carries no AccessKey" in denied, denied
