"""ACL 2.0 on a real broker over remoting: users and ACLs made with rocketq's admin client (3001-3010),
then requests signed as those users allowed or refused - each resource type and action, prefixes, Deny
over Allow, source addresses, authentication failures - kept across a restart, and hostile admin
requests refused with nothing stored."""

import asyncio
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "broker"))
sys.path.insert(0, str(Path(__file__).parent))
from acl2_fixtures import ACL2_SETTINGS, SUPER, admin_for, grant  # noqa: E402
from broker_helpers import store_config  # noqa: E402
from request_templates import build  # noqa: E402

from rocketq.acl import sign  # noqa: E402
from rocketq.broker.broker import Broker, BrokerSettings  # noqa: E402
from rocketq.client.model import MQClientError  # noqa: E402
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode  # noqa: E402

R = RequestCode
C = "Cluster:DefaultCluster"
# (code, names for request_templates.build, the entries that allow it): each resource type and action
ROWS = [
    (R.SEND_MESSAGE_V2, {}, [("Topic:Orders", "Pub")]),
    (R.SEND_MESSAGE_V2, {}, [("Topic:Orders", "All")]),
    (R.PULL_MESSAGE, {}, [("Topic:Orders", "Sub"), ("Group:GID_A", "Sub")]),
    (R.HEART_BEAT, {}, [("Topic:Orders", "Sub"), ("Group:GID_A", "Sub")]),
    (R.GET_MAX_OFFSET, {}, [("Topic:Orders", "Get")]),
    (R.QUERY_CONSUMER_OFFSET, {}, [("Topic:Orders", "Get"), ("Group:GID_A", "Get")]),
    (R.UPDATE_CONSUMER_OFFSET, {}, [("Topic:Orders", "Update"), ("Group:GID_A", "Update")]),
    (R.GET_CONSUMER_CONNECTION_LIST, {}, [("Group:GID_A", "Get")]),
    (R.UPDATE_AND_CREATE_TOPIC, {"topic": "Created"}, [("Topic:Created", "Create")]),
    (R.DELETE_TOPIC_IN_BROKER, {"topic": "Doomed"}, [("Topic:Doomed", "Delete")]),
    (R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {"group": "GID_NEW"}, [("Group:GID_NEW", "Create")]),
    (R.DELETE_SUBSCRIPTIONGROUP, {"group": "GID_GONE"}, [("Group:GID_GONE", "Delete")]),
    (R.INVOKE_BROKER_TO_RESET_OFFSET, {}, [("Topic:Orders", "Update"), ("Group:GID_A", "Update")]),
    (R.GET_BROKER_RUNTIME_INFO, {}, [(C, "Get")]),
    (R.GET_ALL_TOPIC_CONFIG, {}, [(C, "Get")]),
    (R.UPDATE_BROKER_CONFIG, {}, [(C, "Update")]),
]


async def _start(tmp_path, **extra) -> Broker:
    return await Broker(BrokerSettings(port=0, **{**ACL2_SETTINGS, **extra}), store_config(tmp_path)).start()


async def _code(client, cmd, user) -> RemotingCommand:
    return await client.invoke(sign(cmd, *user), timeout_s=10)


def test_each_resource_type_and_action_allows_exactly_what_it_names(tmp_path):
    async def scenario():
        broker = await _start(tmp_path)
        addr = broker.address
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            await _code(client, build(R.UPDATE_AND_CREATE_TOPIC, topic="Doomed"), SUPER)
            await _code(client, build(R.SEND_MESSAGE_V2), SUPER)
            await grant(addr, "nobody", "n-secret")
            wrong = []
            for i, (code, names, entries) in enumerate(ROWS):
                ok, other, deny = (f"ok{i}", "pw-ok"), (f"other{i}", "pw-other"), (f"deny{i}", "pw-deny")
                await grant(addr, *ok, [(r, a, "Allow") for r, a in entries])
                # the same resources with an action the request does not need; then the right one denied
                await grant(addr, *other, [(r, "List", "Allow") for r, _ in entries])
                await grant(addr, *deny, [(r, a, "Allow") for r, a in entries] + [(entries[0][0], entries[0][1], "Deny")])
                for user, allowed in ((("nobody", "n-secret"), False), (other, False), (deny, False), (ok, True)):
                    r = await _code(client, build(code, **names), user)
                    if (r.code == ResponseCode.NO_PERMISSION) == allowed:
                        wrong.append(f"code {int(code)} as {user[0]} {entries}: {r.code} {r.remark}")
            assert not wrong, "\n".join(wrong)
            assert broker.topics.get("Created") is not None and broker.topics.get("Doomed") is None
        finally:
            await client.close()
            await broker.close()
    asyncio.run(scenario())


def test_prefixes_deny_over_allow_and_source_addresses(tmp_path):
    async def scenario():
        broker = await _start(tmp_path)
        addr = broker.address
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            alice = ("alice", "a-secret")
            await grant(addr, *alice, [("Topic:ord*", "Pub", "Allow"), ("Topic:orders-audit", "Pub", "Deny"),
                                                  ("Topic:orders-x", "Pub", "Allow"),
                                                  ("Topic:orders-x", "Pub", "Deny")])
            sends = {t: (await _code(client, build(R.SEND_MESSAGE_V2, topic=t), alice)).code
                     for t in ("orders", "orders-2", "orders-audit", "orders-x", "other")}
            # the second orders-x entry replaced the first (one entry per resource, as in RocketMQ's merge)
            assert sends == {"orders": 0, "orders-2": 0, "orders-audit": 16, "orders-x": 16, "other": 16}, sends
            r = await _code(client, build(R.SEND_MESSAGE_V2, topic="orders-audit"), alice)
            assert "User:alice has no permission to access Topic:orders-audit from 127.0.0.1" in r.remark
            assert "decision is deny" in r.remark
            # Topic:* allows, a prefix denies within it, a literal allows within that
            bob = ("bob", "b-secret")
            await grant(addr, *bob, [("Topic:*", "Pub", "Allow"), ("Topic:sec*", "Pub", "Deny"),
                                     ("Topic:secure-ok", "Pub", "Allow")])
            assert (await _code(client, build(R.SEND_MESSAGE_V2, topic="anything"), bob)).code == 0
            assert (await _code(client, build(R.SEND_MESSAGE_V2, topic="secret"), bob)).code == 16
            assert (await _code(client, build(R.SEND_MESSAGE_V2, topic="secure-ok"), bob)).code == 0
            # source addresses: the loopback client is outside 10.9.9.9 and inside 127.0.0.0/8
            await grant(addr, "far", "f-secret", [("Topic:Orders", "Pub", "Allow")], source_ips=["10.9.9.9"])
            await grant(addr, "near", "n-secret", [("Topic:Orders", "Pub", "Allow")], source_ips=["127.0.0.0/8"])
            assert (await _code(client, build(R.SEND_MESSAGE_V2), ("far", "f-secret"))).code == 16
            assert (await _code(client, build(R.SEND_MESSAGE_V2), ("near", "n-secret"))).code == 0
        finally:
            await client.close()
            await broker.close()
    asyncio.run(scenario())


def test_authentication_refusals_and_a_disabled_user(tmp_path):
    async def scenario():
        broker = await _start(tmp_path)
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            await grant(broker.address, "carol", "c-secret", [("Topic:Orders", "Pub", "Allow")])
            unsigned = await client.invoke(build(R.SEND_MESSAGE_V2), timeout_s=10)
            assert unsigned.code == 16 and "carries no AccessKey" in unsigned.remark
            unknown = await _code(client, build(R.SEND_MESSAGE_V2), ("mallory", "c-secret"))
            assert unknown.code == 16 and "User:mallory is not found" in unknown.remark
            forged = await _code(client, build(R.SEND_MESSAGE_V2), ("carol", "guess"))
            assert forged.code == 16 and "check signature failed" in forged.remark
            tampered = sign(build(R.SEND_MESSAGE_V2), "carol", "c-secret")
            tampered.body = b"changed after signing"
            assert (await client.invoke(tampered, timeout_s=10)).code == 16
            assert (await _code(client, build(R.SEND_MESSAGE_V2), ("carol", "c-secret"))).code == 0
            admin, addr = admin_for(broker.address)
            async with admin:
                await admin.auth.update_user("carol", user_status="disable", broker_addr=addr)
            disabled = await _code(client, build(R.SEND_MESSAGE_V2), ("carol", "c-secret"))
            assert disabled.code == 16 and "disabled" in disabled.remark
            # the super user is checked by no ACL (it has none)
            assert (await _code(client, build(R.DELETE_TOPIC_IN_BROKER, topic="Orders"), SUPER)).code == 0
        finally:
            await client.close()
            await broker.close()
    asyncio.run(scenario())


def test_users_and_acls_survive_a_restart_in_owner_only_files(tmp_path):
    async def scenario():
        broker = await _start(tmp_path)
        await grant(broker.address, "dave", "d-secret", [("Topic:Orders", "Pub", "Allow")])
        await broker.close()
        broker = await _start(tmp_path, init_authentication_user=None)     # the bootstrap user is stored too
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            assert (await _code(client, build(R.SEND_MESSAGE_V2), ("dave", "d-secret"))).code == 0
            assert (await _code(client, build(R.SEND_MESSAGE_V2, topic="Other"), ("dave", "d-secret"))).code == 16
            admin, addr = admin_for(broker.address)
            async with admin:
                assert (await admin.auth.get_acl("User:dave", broker_addr=addr))["policies"][0]["entries"] == [
                    {"resource": "Topic:Orders", "actions": ["Pub"], "sourceIps": [], "decision": "Allow"}]
                assert {u["username"] for u in await admin.auth.list_users(broker_addr=addr)} == {"root", "dave"}
        finally:
            await client.close()
            await broker.close()
        for name in ("authUsers.json", "authAcls.json"):
            assert os.stat(tmp_path / "config" / name).st_mode & 0o777 == 0o600
    asyncio.run(scenario())


HOSTILE = [
    (R.AUTH_CREATE_USER, {"username": "eve"}, b"not json", 29, "not JSON"),
    (R.AUTH_CREATE_USER, {"username": "eve"}, b"[1, 2]", 29, "not a JSON object"),
    (R.AUTH_CREATE_USER, {"username": "../../etc"}, b'{"password": "x"}', 29, "username"),
    (R.AUTH_CREATE_USER, {"username": "eve\u0000"}, b'{"password": "x"}', 29, "username"),
    (R.AUTH_CREATE_USER, {}, b'{"password": "x"}', 29, "The username is blank"),
    (R.AUTH_CREATE_USER, {"username": "eve"}, b'{"password": ""}', 29, "password is blank"),
    (R.AUTH_CREATE_USER, {"username": "eve"}, b'{"password": "x", "userType": "God"}', 29, "userType"),
    (R.AUTH_CREATE_USER, {"username": "eve"}, b'{"password": "' + b"x" * 600_000 + b'"}', 29, "more than"),
    (R.AUTH_CREATE_USER, {"username": "root"}, b'{"password": "x"}', 16, "is existed"),
    (R.AUTH_UPDATE_USER, {"username": "ghost"}, b'{"password": "x"}', 16, "is not exist"),
    (R.AUTH_UPDATE_USER, {"username": "root"}, b'{"userStatus": "sleeping"}', 29, "userStatus"),
    (R.AUTH_DELETE_USER, {"username": "a b"}, b"", 29, "username"),
    (R.AUTH_GET_USER, {}, b"", 29, "The username is blank"),
    (R.AUTH_CREATE_ACL, {"subject": "User:ghost"}, json.dumps({"policies": [{"entries": [
        {"resource": "Topic:t", "actions": ["Pub"], "decision": "Allow"}]}]}).encode(), 16, "is not exist"),
    (R.AUTH_CREATE_ACL, {"subject": "User:root"}, b"{}", 29, "policies are empty"),
    (R.AUTH_CREATE_ACL, {"subject": "User:root"}, json.dumps({"policies": [{"entries": [
        {"resource": "Topic:t", "actions": ["Pub"], "decision": "Allow"},
        {"resource": "Topic:a/b", "actions": ["Pub"], "decision": "Allow"}]}]}).encode(), 29, "illegal"),
    (R.AUTH_UPDATE_ACL, {"subject": "User:root"}, json.dumps({"subject": "User:other", "policies": [{"entries": [
        {"resource": "Topic:t", "actions": ["Pub"], "decision": "Allow"}]}]}).encode(), 29, "differ"),
    (R.AUTH_UPDATE_ACL, {"subject": "Group:x"}, b"{}", 29, "User:<username>"),
    (R.AUTH_DELETE_ACL, {"subject": "User:root", "resource": "Topic:*x"}, b"", 29, "'*' only"),
    (R.AUTH_DELETE_ACL, {"subject": "User:root", "policyType": "Other"}, b"", 29, "policyType"),
    (R.AUTH_DELETE_ACL, {"subject": "User:root"}, b"", 16, "is not exist"),
    (R.AUTH_GET_ACL, {"subject": "root"}, b"", 29, "User:<username>"),
]


def test_hostile_admin_requests_are_refused_clearly_and_store_nothing(tmp_path):
    async def scenario():
        broker = await _start(tmp_path)
        client = RemotingClient("127.0.0.1", broker.server.port)
        config = tmp_path / "config"
        try:
            await grant(broker.address, "frank", "f-secret", [(C, "Update", "Allow"), ("Topic:t", "Pub", "Allow")])
            before = {p.name: p.read_bytes() for p in config.glob("auth*.json")}
            wrong = []
            for code, header, body, want, says in HOSTILE:
                r = await _code(client, RemotingCommand.create_request(code, header, body), SUPER)
                if r.code != want or says not in (r.remark or ""):
                    wrong.append(f"{int(code)} {header}: {r.code} {r.remark!r}, wanted {want} {says!r}")
            # a normal user allowed to change users may not make, change or delete a super user
            frank = ("frank", "f-secret")
            for code, header, body in ((R.AUTH_CREATE_USER, {"username": "boss"}, b'{"password":"x","userType":"Super"}'),
                                       (R.AUTH_UPDATE_USER, {"username": "frank"}, b'{"userType": "Super"}'),
                                       (R.AUTH_UPDATE_USER, {"username": "root"}, b'{"password": "mine"}'),
                                       (R.AUTH_DELETE_USER, {"username": "root"}, b"")):
                r = await _code(client, RemotingCommand.create_request(code, header, body), frank)
                if r.code == 0 or "super user" not in (r.remark or ""):
                    wrong.append(f"frank {int(code)} {header}: {r.code} {r.remark!r}")
            assert not wrong, "\n".join(wrong)
            assert {p.name: p.read_bytes() for p in config.glob("auth*.json")} == before
        finally:
            await client.close()
            await broker.close()
    asyncio.run(scenario())


def test_admin_client_round_trip_and_delete(tmp_path):
    async def scenario():
        broker = await _start(tmp_path)
        admin, addr = admin_for(broker.address)
        try:
            async with admin:
                await grant(broker.address, "gina", "g-secret", [("Topic:a", "Pub,Sub", "Allow"),
                                                                 ("Group:g*", "Sub", "Deny")])
                assert (await admin.auth.get_user("gina", broker_addr=addr))["userType"] == "Normal"
                listed = await admin.auth.list_acls(resource_filter="Group", broker_addr=addr)
                assert [a["subject"] for a in listed] == ["User:gina"]
                assert [e["resource"] for e in listed[0]["policies"][0]["entries"]] == ["Group:g*"]
                await admin.auth.delete_acl("User:gina", "Topic:a", broker_addr=addr)
                entries = (await admin.auth.get_acl("User:gina", broker_addr=addr))["policies"][0]["entries"]
                assert [e["resource"] for e in entries] == ["Group:g*"]
                await admin.auth.delete_user("gina", broker_addr=addr)
                assert await admin.auth.get_user("gina", broker_addr=addr) is None
                assert await admin.auth.list_acls(broker_addr=addr) == []      # the user's ACL went with it
                try:
                    await admin.auth.get_acl("User:gina", broker_addr=addr)
                    raise AssertionError("the ACL of a deleted user was answered")
                except MQClientError as exc:
                    assert exc.code == 16 and "not exist" in str(exc)
        finally:
            await broker.close()
    asyncio.run(scenario())


def test_configuration_mistakes_are_named(tmp_path):
    async def scenario():
        for settings, says in (({"acl_enable": True}, "both on"),
                               ({"authentication_metadata_provider": "com.example.LdapProvider"}, "only the local"),
                               ({"init_authentication_user": '{"username": "x"}'}, "initAuthenticationUser")):
            try:
                await _start(tmp_path, **settings)
            except ValueError as exc:
                assert says in str(exc), exc
            else:
                raise AssertionError(f"{settings} started")
    asyncio.run(scenario())


def test_every_served_code_is_refused_without_an_acl_and_allowed_with_all(tmp_path):
    """Deny by default for every code the broker serves (test_acl_matrix's list, checked there against the
    wire); a user allowed All on * and the super user pass everywhere."""
    from test_acl_matrix import ALLOWED, UNSERVED, _request
    from rocketq.common.msgid import decode_offset_msg_id
    from rocketq.common.sysflag import TRANSACTION_PREPARED_TYPE

    async def scenario():
        broker = await _start(tmp_path)
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            sent = await _code(client, build(R.SEND_MESSAGE_V2), SUPER)
            half = build(R.SEND_MESSAGE_V2)
            half.ext_fields.update(f=TRANSACTION_PREPARED_TYPE, i="TRAN_MSG\x01true\x02")
            half = await _code(client, half, SUPER)
            offsets = {"plain": decode_offset_msg_id(sent.ext_fields["msgId"])[1],
                       R.END_TRANSACTION: decode_offset_msg_id(half.ext_fields["msgId"])[1]}
            await asyncio.to_thread(broker.store.wait_dispatched)
            await grant(broker.address, "none", "n-secret")
            await grant(broker.address, "everything", "e-secret", [("*", "All", "Allow")])
            wrong = []
            for code in ALLOWED:
                for user, allowed in ((("none", "n-secret"), False), (("everything", "e-secret"), True), (SUPER, True)):
                    r = await _code(client, _request(code, offsets), user)
                    if (r.code == ResponseCode.NO_PERMISSION) == allowed and code != UNSERVED:
                        wrong.append(f"code {int(code)} as {user[0]}: {r.code} {r.remark}")
            assert not wrong, "\n".join(wrong)
        finally:
            await client.close()
            await broker.close()
    asyncio.run(scenario())
