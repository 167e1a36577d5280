"""With ACL on, the controller's port authenticates its peer like every other rocketq port: only an admin
account's signed request (or a white-listed address) is served, reads included; anything else is
answered NO_PERMISSION naming why.  Brokers sign their heartbeats with their credentials and are
elected as before; a broker with a wrong secret is refused and does not start, saying what to set."""

import asyncio
import json

import pytest
from runs import all_in_sync

from rocketq.acl import AclValidator
from rocketq.acl.signing import sign
from rocketq.controller.local_cluster import LocalControlledCluster, until
from rocketq.controller.server import ControllerServer
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

pytestmark = pytest.mark.timeout(120)

ACL_YAML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: ctl-admin
    secretKey: ctl-admin-secret
    admin: true
  - accessKey: app
    secretKey: app-secret
    admin: false
    defaultTopicPerm: PUB|SUB
"""
ADMIN = ("ctl-admin", "ctl-admin-secret")


def _heartbeat(bid: int) -> RemotingCommand:
    body = {"cluster": "C", "brokerName": "acl", "brokerId": bid, "addr": "127.0.0.1:1", "haAddr": "127.0.0.1:2",
            "epoch": 0, "maxPhyOffset": 0}
    return RemotingCommand.create_request(RequestCode.CONTROLLER_HEARTBEAT, {}, json.dumps(body).encode())


def test_only_signed_admin_requests_are_served(etcd1, tmp_path):
    (tmp_path / "plain_acl.yml").write_text(ACL_YAML)

    async def scenario():
        srv = await ControllerServer(etcd1.endpoints, port=0, prefix="/acl/",
                                     acl=AclValidator(tmp_path / "plain_acl.yml")).start()
        client = RemotingClient("127.0.0.1", srv.port)
        try:
            await until("the controller active", lambda: _async(srv.active()), 10)

            def metadata():
                return RemotingCommand.create_request(RequestCode.CONTROLLER_GET_METADATA_INFO, {})
            refusals = {
                "unsigned": (metadata(), "carries no AccessKey"),
                "unsigned heartbeat": (_heartbeat(1), "carries no AccessKey"),
                "wrong secret": (sign(_heartbeat(1), "ctl-admin", "not-the-secret"), "does not match"),
                "unknown account": (sign(metadata(), "nobody", "x"), "no ACL account for AccessKey 'nobody'"),
                "not an admin": (sign(_heartbeat(1), "app", "app-secret"), "needs an admin account"),
            }
            for what, (cmd, why) in refusals.items():
                r = await client.invoke(cmd, 3)
                assert r.code == ResponseCode.NO_PERMISSION and why in r.remark, (what, r.code, r.remark)
            assert srv.core.sets == {}, "a refused heartbeat changed the controller's state"

            r = await client.invoke(sign(metadata(), *ADMIN), 3)
            assert r.code == ResponseCode.SUCCESS and r.ext_fields["isLeader"] == "true", r.remark
            r = await client.invoke(sign(_heartbeat(1), *ADMIN), 3)
            assert r.code == ResponseCode.SUCCESS and json.loads(r.body)["masterId"] == 1, r.remark
        finally:
            await client.close()
            await srv.close()
    asyncio.run(scenario())


def test_brokers_sign_their_heartbeats_and_a_wrong_secret_keeps_a_broker_out(tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL_YAML)
    cluster = LocalControlledCluster(tmp_path / "run", brokers=2, controllers=1, etcd_members=1, acl_file=acl,
                                     credentials=ADMIN)
    cluster.start()          # broker 1 elected and confirmed through signed heartbeats, broker 2 follows
    try:
        asyncio.run(until("both brokers in sync", lambda: all_in_sync(cluster, 2), 30))
        cluster.broker_credentials[3] = ("ctl-admin", "not-the-secret")
        with pytest.raises(RuntimeError) as refused:
            cluster.start_broker(3)
        text = str(refused.value)
        assert cluster.broker_procs.pop(3).wait(30) != 0
        assert "refused this broker" in text and "signature" in text and \
            "innerClientAuthenticationCredentials" in text, text
        info = asyncio.run(cluster.replica_info())
        assert sorted(info["brokers"]) == ["1", "2"], info
    finally:
        codes = cluster.stop()
    assert all(c == 0 for c in codes.values()), codes


async def _async(value):
    return value
