"""ACL 2.0 with Apache RocketMQ's tools and clients: mqadmin 5.3.3's createUser / updateUser / getUser /
listUser / createAcl / updateAcl / getAcl / listAcl / deleteAcl / deleteUser against ``rocketq serve`` with
``authenticationEnabled`` and ``authorizationEnabled``, signed by the bootstrap super user; then the Java
client (AclClientRPCHook, the same signature as ACL 1.0) sends and consumes as the user mqadmin made,
is refused with a wrong secret, and its sends are allowed or refused by its ACL.
mqadmin 4.9.8 has no ACL 2.0 commands, so the rocketmq-client-4.9.8 line uses the same user through
rocketq's admin client instead."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

import reader
from checks import assert_received_as_stored, assert_stored_as_sent
from rocketq.client import Admin
from rocketq.client.model import Credentials
from serve_proc import ServeProcess

pytestmark = pytest.mark.timeout(900)

ROOT = {"ak": "compat-root", "sk": "root-secret-1"}
USERS = {line: {"ak": f"{line}_javauser", "sk": "java-secret-2"} for line in ("rmq4", "rmq5")}   # one per line
ACL2 = ("authenticationEnabled=true", "authorizationEnabled=true",
        "initAuthenticationUser=" + json.dumps({"username": ROOT["ak"], "password": ROOT["sk"]}))


@pytest.fixture(scope="module")
def acl2_server(tmp_path_factory):
    server = ServeProcess(tmp_path_factory.mktemp("compat-acl2"), extra=ACL2).start()
    yield server
    server.stop()


def _ok(out: str, line: str) -> str:
    assert line in out and "Exception" not in out, out
    return out


def _user_and_acls(runner, line, server, topic, group) -> None:
    """The user and its ACL: by mqadmin on the 5.x line, by rocketq's admin client on 4.9.8's."""
    b, USER = server.broker, USERS[line]
    entries = [(f"Topic:{topic},Topic:{line}_Pre*", "Pub,Sub,Get", "Allow"), (f"Group:{group}", "Sub,Get,Update", "Allow"),
               (f"Topic:{line}_PreDenied", "Pub", "Deny")]
    if line != "rmq5":
        async def make():
            async with Admin(server.namesrv, credentials=Credentials(ROOT["ak"], ROOT["sk"])) as admin:
                await admin.auth.create_user(USER["ak"], USER["sk"], broker_addr=b)
                for resources, actions, decision in entries:
                    await admin.auth.put_acl(f"User:{USER['ak']}", resources.split(","), actions.split(","), decision,
                                             broker_addr=b)
        asyncio.run(make())
        return
    _ok(runner.mqadmin("createUser", "-b", b, "-u", USER["ak"], "-p", USER["sk"], **ROOT), f"create user to {b} success.")
    denied = runner.mqadmin("createUser", "-b", b, "-u", "intruder", "-p", "x", **USER)   # no Update on the cluster
    assert "success" not in denied and "CODE: 16" in denied, denied
    for i, (resources, actions, decision) in enumerate(entries):
        command = "createAcl" if i < 2 else "updateAcl"
        _ok(runner.mqadmin(command, "-b", b, "-s", f"User:{USER['ak']}", "-r", resources, "-a", actions, "-d", decision,
                           **ROOT), f"{command[:6]} acl to {b} success.")


def test_mqadmin_acl2_commands_and_java_clients_allowed_and_denied(remoting, acl2_server):
    runner, line = remoting
    ns, b, USER = acl2_server.namesrv, acl2_server.broker, USERS[line]
    topic, group = f"{line}_Acl2Topic", f"{line}_acl2_cg"
    _user_and_acls(runner, line, acl2_server, topic, group)

    # the Java client as that user: sends and consumes; a wrong secret is refused and nothing of it stored
    data = runner.run("acl", namesrv=ns, topic=topic, group=group, n=2, badSk="not-the-secret", expect=2,
                      timeoutMs=20_000, settleMs=500, timeout_s=90, **USER)
    stored = reader.read_topic(ns, topic, credentials=Credentials(ROOT["ak"], ROOT["sk"]))
    assert_stored_as_sent(data["sent"], stored, topic=topic)
    assert_received_as_stored(data["received"], stored)
    refused = data["refused"]
    assert "result" not in refused and refused["responseCode"] == 16 and USER["ak"] in refused["cause"], refused
    if line != "rmq5":
        return

    # its ACL decides where it may send: a prefix allows, a literal Deny inside it refuses, elsewhere nothing
    def send_as_user(t: str) -> dict:          # one send, no retry: its result, or the broker's refusal
        out = runner.run("send_to_queue", namesrv=ns, topic=t, group=f"{line}_acl2_pg", queueId=0, **USER)
        out["why"] = f"{out.get('message')} {out.get('cause')}"
        return out
    for t in (f"{line}_PreOk", f"{line}_PreDenied", f"{line}_Elsewhere"):
        _ok(runner.mqadmin("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", t, **ROOT), "success")
    assert "result" in send_as_user(f"{line}_PreOk")
    for t in (f"{line}_PreDenied", f"{line}_Elsewhere"):
        out = send_as_user(t)
        assert "result" not in out and out["responseCode"] == 16 and f"User:{USER['ak']}" in out["why"], out

    # what mqadmin shows of the user and its ACL
    out = _ok(runner.mqadmin("getUser", "-b", b, "-u", USER["ak"], **ROOT), "#UserName")
    assert re.search(rf"^{USER['ak']}\s+{USER['sk']}\s+Normal\s+enable\s*$", out, re.M), out
    assert USER["ak"] in _ok(runner.mqadmin("listUser", "-b", b, **ROOT), "#UserName")
    out = _ok(runner.mqadmin("getAcl", "-b", b, "-s", f"User:{USER['ak']}", **ROOT), "#Subject")
    assert re.search(rf"User:{USER['ak']}\s+Custom\s+Topic:{line}_PreDenied\s+\[Pub\]\s+\[\]\s+Deny", out), out
    out = _ok(runner.mqadmin("listAcl", "-b", b, "-s", USER["ak"], "-r", "Group", **ROOT), "#Subject")
    assert f"Group:{group}" in out and f"Topic:{topic}" not in out, out

    # disabled, the user is refused; its ACL entry and then the user deleted
    _ok(runner.mqadmin("updateUser", "-b", b, "-u", USER["ak"], "-s", "disable", **ROOT), f"update user to {b} success.")
    out = send_as_user(f"{line}_PreOk")
    assert "result" not in out and out["responseCode"] == 16 and "disabled" in out["why"], out
    _ok(runner.mqadmin("deleteAcl", "-b", b, "-s", f"User:{USER['ak']}", "-r", f"Topic:{line}_PreDenied", **ROOT),
        f"delete acl to {b} success.")
    assert f"{line}_PreDenied" not in runner.mqadmin("getAcl", "-b", b, "-s", f"User:{USER['ak']}", **ROOT)
    _ok(runner.mqadmin("deleteUser", "-b", b, "-u", USER["ak"], **ROOT), f"delete user to {b} success.")
    assert USER["ak"] not in runner.mqadmin("listUser", "-b", b, **ROOT)
