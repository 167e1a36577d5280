"""ACL 1.0: plain_acl.yml, address patterns, signatures, and a broker that enforces them on the wire."""

import asyncio
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "broker"))
from acl_fixtures import ACL_YAML, write_acl_file  # noqa: E402
from broker_helpers import pull, send_v2, with_broker  # noqa: E402

from rocketq.acl import sign  # noqa: E402
from rocketq.acl.plain_acl import AclConfigError, AddressPattern, load_plain_acl  # noqa: E402
from rocketq.acl.signing import signature, signed_content  # noqa: E402
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode  # noqa: E402


@pytest.mark.parametrize("pattern, ip, ok", [
    ("*", "1.2.3.4", True), ("192.168.*.*", "192.168.9.1", True), ("192.168.*", "192.168.0.7", True),
    ("192.168.1.100-200", "192.168.1.150", True), ("192.168.1.100-200", "192.168.1.99", False),
    ("192.168.1.{1,2}", "192.168.1.2", True), ("192.168.1.{1,2}", "192.168.1.3", False),
    ("10.0.0.1", "10.0.0.1", True), ("10.0.0.1", "10.0.0.2", False), ("10.0.0.1", "::1", False),
    ("::1", "::1", True), ("fe80:*", "fe80::1", True),
])
def test_address_patterns(pattern, ip, ok):
    assert AddressPattern(pattern, "test").matches(ip) is ok


@pytest.mark.parametrize("bad", ["1.2.3", "1.2.300.4", "a.b.c.d", "1.2.3.4.5", "1.2.3.9-2"])
def test_bad_address_patterns_are_named(bad):
    with pytest.raises(AclConfigError, match="test"):
        AddressPattern(bad, "test")


def test_plain_acl_errors_name_the_account(tmp_path):
    f = tmp_path / "plain_acl.yml"
    f.write_text("accounts:\n  - accessKey: a\n    secretKey: s\n    topicPerms: [T=WRITE]\n")
    with pytest.raises(AclConfigError, match=r"accounts\[0\] topicPerms T: permission 'WRITE'"):
        load_plain_acl(f)
    f.write_text("accounts:\n  - accessKey: a\n")
    with pytest.raises(AclConfigError, match="secretKey are required"):
        load_plain_acl(f)
    f.write_text("accounts: [\n")
    with pytest.raises(AclConfigError, match="plain_acl.yml"):
        load_plain_acl(f)


def test_signature_covers_sorted_values_and_body():
    fields = {"topic": "T", "AccessKey": "ak", "queueId": "1", "Signature": "ignored"}
    assert signed_content(fields, b"BODY") == b"ak" + b"1" + b"T" + b"BODY"     # AccessKey < queueId < topic
    # the value for this content and key, computed independently with openssl and pinned here:
    #   printf 'ak1TBODY' | openssl dgst -sha1 -hmac sk -binary | base64
    assert signature("sk", fields, b"BODY") == "Gj2q3UDBvZ+dAxtkbsFs7u4ffts="


def _acl_file(tmp_path, text: str) -> Path:
    return write_acl_file(tmp_path, text)


def _acl_broker(tmp_path, scenario):
    _acl_file(tmp_path, ACL_YAML)
    return with_broker(tmp_path, scenario, acl_enable=True)


def _signed(cmd, ak, sk):
    return sign(cmd, ak, sk)


def test_broker_refuses_and_accepts_by_account(tmp_path):
    async def scenario(broker, client):
        async def code(cmd):
            return (await client.invoke(cmd, timeout_s=5)).code
        unsigned = await client.invoke(send_v2("Orders", b"x"), timeout_s=5)
        assert unsigned.code == ResponseCode.NO_PERMISSION and "no AccessKey" in unsigned.remark
        assert await code(_signed(send_v2("Orders", b"x"), "nobody", "x")) == ResponseCode.NO_PERMISSION
        wrong = await client.invoke(_signed(send_v2("Orders", b"x"), "producer", "wrong"), timeout_s=5)
        assert wrong.code == ResponseCode.NO_PERMISSION and "signature" in wrong.remark
        tampered = _signed(send_v2("Orders", b"x"), "producer", "p-secret")
        tampered.body = b"changed"
        assert await code(tampered) == ResponseCode.NO_PERMISSION
        assert await code(_signed(send_v2("Orders", b"x"), "producer", "p-secret")) == ResponseCode.SUCCESS
        denied = await client.invoke(_signed(send_v2("Other", b"x"), "producer", "p-secret"), timeout_s=5)
        assert denied.code == ResponseCode.NO_PERMISSION and "PUB permission for topic 'Other'" in denied.remark
        await asyncio.to_thread(broker.store.wait_dispatched)
        # consumer: SUB on topics by default, but only group GID_C
        ok_pull = pull("Orders", 0, 0)
        ok_pull.ext_fields["consumerGroup"] = "GID_C"
        assert await code(_signed(ok_pull, "consumer", "c-secret")) in (ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND)
        assert await code(_signed(pull("Orders", 0, 0), "consumer", "c-secret")) == ResponseCode.NO_PERMISSION  # group G
        secret = pull("Secret", 0, 0)
        secret.ext_fields["consumerGroup"] = "GID_C"
        assert await code(_signed(secret, "consumer", "c-secret")) == ResponseCode.NO_PERMISSION
        assert await code(_signed(send_v2("Orders", b"x"), "consumer", "c-secret")) == ResponseCode.NO_PERMISSION
        hb = RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, json.dumps({
            "clientID": "c1", "producerDataSet": [], "consumerDataSet": [{
                "groupName": "GID_X", "subscriptionDataSet": [{"topic": "Orders", "subString": "*"}]}]}).encode())
        assert await code(_signed(hb, "consumer", "c-secret")) == ResponseCode.NO_PERMISSION
        # admin requests need an admin account
        create = RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "New", "perm": 6})
        refused = await client.invoke(_signed(create, "producer", "p-secret"), timeout_s=5)
        assert refused.code == ResponseCode.NO_PERMISSION and "admin" in refused.remark
        create = RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "New", "perm": 6})
        assert await code(_signed(create, "admin", "a-secret")) == ResponseCode.SUCCESS
    asyncio.run(_acl_broker(tmp_path, scenario))


def test_acl_file_is_reloaded_when_it_changes_and_a_bad_edit_keeps_the_old(tmp_path):
    async def scenario(broker, client):
        acl_file = tmp_path / "config" / "plain_acl.yml"
        r = await client.invoke(_signed(send_v2("Fresh", b"x"), "producer", "p-secret"), timeout_s=5)
        assert r.code == ResponseCode.NO_PERMISSION
        acl_file.write_text(ACL_YAML.replace("[Orders=PUB, Audit=PUB|SUB]", "[Orders=PUB, Fresh=PUB]  "))
        for _ in range(300):
            r = await client.invoke(_signed(send_v2("Fresh", b"x"), "producer", "p-secret"), timeout_s=5)
            if r.code == ResponseCode.SUCCESS:
                break
            await asyncio.sleep(0.02)
        assert r.code == ResponseCode.SUCCESS
        acl_file.write_text("accounts: [ broken\n")
        assert not broker.acl.reload_if_changed()          # logged; the previous accounts stay
        r = await client.invoke(_signed(send_v2("Fresh", b"y"), "producer", "p-secret"), timeout_s=5)
        assert r.code == ResponseCode.SUCCESS
    asyncio.run(_acl_broker(tmp_path, scenario))


def test_global_whitelist_needs_no_signature(tmp_path):
    async def scenario(broker, client):
        r = await client.invoke(send_v2("Any", b"x"), timeout_s=5)
        assert r.code == ResponseCode.SUCCESS
    acl = _acl_file(tmp_path, "globalWhiteRemoteAddresses: ['127.0.0.*']\naccounts: []\n")
    asyncio.run(with_broker(tmp_path, scenario, acl_enable=True, acl_file=str(acl)))


def test_a_bad_acl_file_stops_the_broker_from_starting(tmp_path):
    from rocketq.broker.broker import Broker, BrokerSettings
    from broker_helpers import store_config
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n  - accessKey: a\n    secretKey: s\n    defaultTopicPerm: MAYBE\n")
    with pytest.raises(AclConfigError, match="defaultTopicPerm"):
        Broker(BrokerSettings(port=0, acl_enable=True, acl_file=str(acl)), store_config(tmp_path / "s"))
