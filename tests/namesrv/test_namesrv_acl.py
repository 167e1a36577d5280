"""NameServer access control: with ACL on, its writes need an admin account's signed request, route
reads stay open, and brokers (standalone, separate, or the CLI's) still register."""

from __future__ import annotations

import asyncio
import logging
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_namesrv_wire import BROKER_ADDR, register_body, register_request, route_request

sys.path.insert(0, str(Path(__file__).parent.parent / "client"))
from cluster import small_store  # noqa: E402
from waiting import until  # noqa: E402

from rocketq.acl import AclValidator, sign  # noqa: E402
from rocketq.broker.broker import Broker, BrokerSettings  # noqa: E402
from rocketq.namesrv import NameServer  # noqa: E402
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode  # noqa: E402

R = RequestCode
ACL = """
accounts:
  - {accessKey: ops, secretKey: ops-secret, admin: true}
  - {accessKey: app, secretKey: app-secret, defaultTopicPerm: PUB|SUB, defaultGroupPerm: PUB|SUB}
"""


def _acl_file(tmp_path: Path) -> Path:
    path = tmp_path / "plain_acl.yml"
    path.write_text(ACL)
    return path


def _writes() -> list[RemotingCommand]:
    """One of each write a stranger tried in the issue, aimed at a broker that is registered."""
    header = {"brokerName": "broker-a", "brokerAddr": BROKER_ADDR, "clusterName": "DefaultCluster", "brokerId": 0}
    return [
        RemotingCommand.create_request(R.UNREGISTER_BROKER, header),
        RemotingCommand.create_request(R.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}),
        register_request(register_body("Fake"), addr="10.9.9.9:10911"),
        RemotingCommand.create_request(R.DELETE_TOPIC_IN_NAMESRV, {"topic": "Orders"}),
        RemotingCommand.create_request(R.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "evil"}),
        RemotingCommand.create_request(R.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"}),
        RemotingCommand.create_request(R.BROKER_HEARTBEAT, {"brokerAddr": BROKER_ADDR}),
    ]


def test_writes_need_an_admin_account_and_reads_stay_open(tmp_path):
    async def main():
        acl = AclValidator(_acl_file(tmp_path))
        server = await NameServer("127.0.0.1", 0, kv_path=tmp_path / "kv.json", acl=acl).start()
        client = RemotingClient("127.0.0.1", server.port)
        try:
            ok = await client.invoke(sign(register_request(register_body("Orders")), "ops", "ops-secret"), 5)
            assert ok.code == ResponseCode.SUCCESS
            put = RemotingCommand.create_request(R.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "good"})
            assert (await client.invoke(sign(put, "ops", "ops-secret"), 5)).code == ResponseCode.SUCCESS
            routes_before = server.routes.route("Orders")
            for make_signed in (lambda c: c, lambda c: sign(c, "app", "app-secret"), lambda c: sign(c, "ops", "bad")):
                for cmd in _writes():
                    r = await client.invoke(make_signed(cmd), 5)
                    assert r.code == ResponseCode.NO_PERMISSION, (cmd.code, r.code, r.remark)
            assert server.routes.route("Orders") == routes_before and server.routes.route("Fake") is None
            assert server.kv.get("ns", "k") == "good"
            for read in (route_request("Orders"), RemotingCommand.create_request(R.GET_BROKER_CLUSTER_INFO, {}),
                         RemotingCommand.create_request(R.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}),
                         RemotingCommand.create_request(R.GET_KV_CONFIG, {"namespace": "ns", "key": "k"})):
                assert (await client.invoke(read, 5)).code == ResponseCode.SUCCESS, read.code
            for cmd in _writes():                       # the admin may
                assert (await client.invoke(sign(cmd, "ops", "ops-secret"), 5)).code == ResponseCode.SUCCESS
        finally:
            await client.close()
            await server.close()
    asyncio.run(main())


def test_a_broker_registers_with_its_credentials_and_one_without_is_refused_loudly(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="rocketq.broker.registration")

    async def main():
        server = await NameServer("127.0.0.1", 0, kv_path=tmp_path / "kv.json",
                                  acl=AclValidator(_acl_file(tmp_path))).start()
        addr = f"127.0.0.1:{server.port}"
        signed = await Broker(BrokerSettings(broker_name="broker-a", port=0, namesrv_addr=addr, ha_listen_port=0,
                                             inner_credentials='{"accessKey": "ops", "secretKey": "ops-secret"}'),
                              small_store(tmp_path / "a")).start()
        unsigned = await Broker(BrokerSettings(broker_name="broker-b", port=0, namesrv_addr=addr, ha_listen_port=0),
                                small_store(tmp_path / "b")).start()
        try:
            assert "broker-a" in server.routes.broker_addr_table
            assert "broker-b" not in server.routes.broker_addr_table
            refused = [r for r in caplog.records if "refused REGISTER_BROKER" in r.getMessage()]
            assert refused and refused[0].levelno == logging.ERROR
            assert "innerClientAuthenticationCredentials" in refused[0].getMessage()
        finally:
            for part in (unsigned, signed, server):
                await part.close()
        # the clean shutdown's UNREGISTER_BROKER was signed too
        assert "broker-a" not in server.routes.broker_addr_table
    asyncio.run(main())


def test_standalone_with_acl_shares_the_file_and_registers(tmp_path):
    from rocketq.server.config import load
    from rocketq.server.standalone import Standalone
    (tmp_path / "s" / "config").mkdir(parents=True)
    (tmp_path / "s" / "config" / "plain_acl.yml").write_text(ACL)

    async def main():
        cfg = load(overrides={"storePathRootDir": str(tmp_path / "s"), "listenPort": 0, "namesrvListenPort": 0,
                              "grpcServerPort": -1, "aclEnable": "true", "mapedFileSizeCommitLog": 1 << 20})
        server = await Standalone(cfg).start()
        client = RemotingClient("127.0.0.1", server.namesrv.port)
        try:
            await until(lambda: "broker-a" in server.namesrv.routes.broker_addr_table, 10, "the registration")
            put = RemotingCommand.create_request(R.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v"})
            assert (await client.invoke(put, 5)).code == ResponseCode.NO_PERMISSION
        finally:
            await client.close()
            await server.close()
    asyncio.run(main())


@pytest.mark.parametrize("how", ["--acl", "-c"])
def test_rocketq_namesrv_takes_an_acl_file(tmp_path, how):
    acl = _acl_file(tmp_path)
    args = ["--acl", str(acl)]
    if how == "-c":
        conf = tmp_path / "namesrv.conf"
        conf.write_text(f"aclEnable=true\naclFile={acl}\nnamesrvListenPort=0\n")
        args = ["-c", str(conf)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "namesrv", "--kv-config",
                             str(tmp_path / "kv.json"), *args] + (["--port", "0"] if how == "--acl" else []),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline() if ready else ""
        assert "boot success" in line and "ACL on" in line, (line, proc.stderr.read() if proc.poll() else "")
        port = int(line.split("listening on 127.0.0.1:")[1].split(" ")[0])

        async def ask():
            client = RemotingClient("127.0.0.1", port)
            try:
                put = RemotingCommand.create_request(R.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"})
                refused = (await client.invoke(put, 5)).code
                allowed = (await client.invoke(sign(put, "ops", "ops-secret"), 5)).code
                return refused, allowed
            finally:
                await client.close()
        assert asyncio.run(ask()) == (ResponseCode.NO_PERMISSION, ResponseCode.SUCCESS)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
