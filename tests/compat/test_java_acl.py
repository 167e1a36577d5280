"""ACL 1.0 with Apache RocketMQ's Java clients: AclClientRPCHook signatures against ``rocketq serve --acl``.

An ordinary account sends, and consumes with a push consumer (heartbeats, pulls, offset commits, all
signed); a producer with the right access key and a wrong secret is refused by the broker, and nothing of
it is stored; mqadmin signed by the admin account creates a topic, by the ordinary account it is refused.
"""

from __future__ import annotations

import pytest

import reader
from checks import assert_received_as_stored, assert_stored_as_sent
from rocketq.client.model import Credentials
from serve_proc import ServeProcess

# the first test of a session may build the clients (a cold Maven / Go cache downloads them): more than
# pytest's 300 s default; each scenario has its own, tighter timeout
pytestmark = pytest.mark.timeout(900)

ACL_YAML = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: compat-admin
    secretKey: admin-secret-1
    admin: true
  - accessKey: javauser
    secretKey: java-secret-1
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""
USER = {"ak": "javauser", "sk": "java-secret-1"}
ADMIN = {"ak": "compat-admin", "sk": "admin-secret-1"}


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("compat-acl")
    acl = workdir / "plain_acl.yml"
    acl.write_text(ACL_YAML)
    server = ServeProcess(workdir, acl_file=acl).start()
    yield server
    server.stop()


def test_signed_clients_pass_and_a_wrong_secret_is_refused(remoting, acl_server):
    runner, line = remoting
    ns, topic, group = acl_server.namesrv, f"{line}_AclTopic", f"{line}_acl_cg"
    data = runner.run("acl", namesrv=ns, topic=topic, group=group, n=2, badSk="not-the-secret", expect=2,
                      timeoutMs=20_000, settleMs=500, timeout_s=90, **USER)
    stored = reader.read_topic(ns, topic, credentials=Credentials(ADMIN["ak"], ADMIN["sk"]))
    assert_stored_as_sent(data["sent"], stored, topic=topic)          # the refused message is not there
    assert_received_as_stored(data["received"], stored)
    refused = data["refused"]
    assert "result" not in refused, f"a send signed with a wrong secret was accepted: {refused}"
    # rocketq answers NO_PERMISSION (16) naming the access key; Apache RocketMQ 4.9 answers SYSTEM_ERROR (1)
    # with its AclException text. Either way the client gives up on that send (no retry helps)
    assert refused["responseCode"] == 16 and "javauser" in refused["cause"], refused


def test_mqadmin_with_admin_credentials_only(remoting, acl_server):
    runner, line = remoting
    ns = acl_server.namesrv
    ok = runner.mqadmin("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", f"{line}_AclAdminTopic", **ADMIN)
    assert "create topic to" in ok and "success" in ok, ok
    denied = runner.mqadmin("updateTopic", "-n", ns, "-c", "DefaultCluster", "-t", f"{line}_AclDenied", **USER)
    assert "success" not in denied and "CODE: 16" in denied, denied
