"""ACL 2.0 on gRPC: the same users and ACLs as remoting, the ``MQv2-HMAC-SHA1`` header signed with the
user's password; FORBIDDEN for a missing or denied permission, UNAUTHORIZED for a bad signature or an
unknown user.  The official Python client sends and receives as an allowed user.  The users are made
with ``rocketq user`` / ``rocketq acl`` (the CLI, in process) against the broker's address."""

import asyncio
import sys
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from grpc_helpers import ServerThread, sent_and_received

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "acl"))
from acl2_fixtures import ACL2_SETTINGS, SUPER, grant  # noqa: E402
from test_grpc_acl import _receive, _send, signed_md  # noqa: E402

from rocketq.cli.main import cli  # noqa: E402
from rocketq.grpc_endpoint.protocol import Code, pb, spb, spb_grpc  # noqa: E402


@pytest.fixture
def acl2_server(tmp_path):
    s = ServerThread(tmp_path, **ACL2_SETTINGS).start()
    try:
        for topic in ("Orders", "Other"):
            s.create_topic(topic)
        s.set_group("GID_C")
        asyncio.run(grant(s.broker.address, "pub", "p-secret", [("Topic:Orders", "Pub", "Allow")]))
        asyncio.run(grant(s.broker.address, "sub", "s-secret", [("Topic:Ord*", "Sub", "Allow"),
                                                                ("Group:GID_C", "Sub", "Allow"),
                                                                ("Topic:Orders", "Get", "Deny")]))
        yield s
    finally:
        s.shutdown()


@pytest.fixture
def stub(acl2_server):
    with grpc.insecure_channel(acl2_server.access_point) as ch:
        yield spb_grpc.MessagingServiceStub(ch)


def _config(server, ak, sk):
    from rocketmq import ClientConfiguration, Credentials
    return ClientConfiguration(server.access_point, Credentials(ak, sk), request_timeout=5)


def test_grpc_calls_are_allowed_and_refused_by_the_users_acl(acl2_server, stub):
    pub, sub = signed_md("pub", "p-secret"), signed_md("sub", "s-secret")
    assert _send(stub, pub, "Orders").code == Code.OK
    refused = _send(stub, pub, "Other")
    assert refused.code == Code.FORBIDDEN
    assert refused.message == ("User:pub has no permission to access Topic:Other from 127.0.0.1, no matched "
                               "policies (it needs Pub)")
    assert _send(stub, sub, "Orders").code == Code.FORBIDDEN                  # Sub is not Pub
    assert _send(stub, signed_md("pub", "wrong"), "Orders").code == Code.UNAUTHORIZED
    assert _send(stub, signed_md("nobody", "x"), "Orders").code == Code.UNAUTHORIZED
    # QueryRoute: Pub or Sub
    for md, topic, code in ((pub, "Orders", Code.OK), (sub, "Orders", Code.OK), (pub, "Other", Code.FORBIDDEN)):
        r = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name=topic)), metadata=md, timeout=5)
        assert r.status.code == code, (topic, r.status)
    # receive needs Sub on the topic and on the group
    assert [s.code for s in _receive(stub, pub, "Orders", "GID_C")] == [Code.FORBIDDEN]
    assert [s.code for s in _receive(stub, sub, "Orders", "GID_OTHER")] == [Code.FORBIDDEN]
    # QueryOffset needs Get on the topic, which sub is denied
    q = stub.QueryOffset(spb.QueryOffsetRequest(message_queue=pb.MessageQueue(topic=pb.Resource(name="Orders"))),
                         metadata=sub, timeout=5)
    assert q.status.code == Code.FORBIDDEN and "decision is deny" in q.status.message


def test_the_official_client_sends_and_receives_as_allowed_users(acl2_server):
    sent_and_received(_config(acl2_server, "pub", "p-secret"), _config(acl2_server, "sub", "s-secret"), "Orders", "GID_C")


def test_rocketq_user_and_acl_commands(acl2_server):
    addr = acl2_server.broker.address
    auth = ["--broker", addr, "--access-key", SUPER[0], "--secret-key", SUPER[1]]
    run = CliRunner().invoke

    def ok(*args):
        r = run(cli, [*args, *auth])
        assert r.exit_code == 0, r.output
        return r.output
    assert f"user hank created on {addr}" in ok("user", "create", "hank", "--password", "h-secret")
    ok("acl", "create", "User:hank", "-r", "Topic:Orders", "-r", "Group:GID_*", "-a", "Pub,Sub", "-d", "Allow")
    ok("acl", "update", "User:hank", "-r", "Topic:Orders", "-a", "Pub", "-d", "Deny", "-i", "10.0.0.0/8")
    out = ok("acl", "get", "User:hank", "--json")
    assert '"resource": "Topic:Orders"' in out and '"sourceIps": [\n' in out and "10.0.0.0/8" in out
    assert "hank" in ok("user", "list") and "h-secret" not in ok("user", "get", "hank", "--json")
    assert "Group:GID_*" in ok("acl", "list", "--resource-filter", "Group")
    ok("user", "update", "hank", "--status", "disable")
    assert '"userStatus": "disable"' in ok("user", "get", "hank", "--json")
    bad = run(cli, ["acl", "create", "User:hank", "-r", "Topic:a/b", "-a", "Pub", "-d", "Allow", *auth])
    assert bad.exit_code != 0 and "illegal characters" in bad.output, bad.output
    ok("acl", "delete", "User:hank", "-r", "Group:GID_*")
    ok("user", "delete", "hank")
    missing = run(cli, ["user", "get", "hank", *auth])
    assert missing.exit_code != 0 and "no user hank" in missing.output
