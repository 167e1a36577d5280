"""ali-ons with ACL credentials against a broker with ACL on: a signed producer and consumer work,
a wrong secret and a missing permission are refused (a real third-party client's signatures)."""

from __future__ import annotations

import asyncio

import pytest
from compat_helpers import consume, ensure_client, run_phase, servers

from rocketq.broker.topic_config import TopicConfig

ACL = """
accounts:
  - accessKey: ons-user
    secretKey: "ons-secret-1"
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AclTopic=PUB|SUB]
    groupPerms: [GID_ACL=SUB]
"""


@pytest.fixture(scope="module", autouse=True)
def _client_installed():
    ensure_client()


def test_signed_client_works_and_bad_credentials_are_refused(tmp_path):
    acl = tmp_path / "store" / "config" / "plain_acl.yml"
    acl.parent.mkdir(parents=True)
    acl.write_text(ACL)
    creds = {"accessKey": "ons-user", "secretKey": "ons-secret-1"}

    async def main():
        async with servers(tmp_path, acl_enable=True) as env:
            env.broker.topics.update(TopicConfig("AclTopic", 4, 4))
            env.broker.topics.update(TopicConfig("OtherTopic", 4, 4))
            await env.broker.registrar.register_once()
            sent = await run_phase(env, "produce", topic="AclTopic", **creds,
                                   messages=[{"key": f"a{i}", "tag": "T", "body": f"acl {i}"} for i in range(5)])
            assert [s["sendStatus"] for s in sent["sent"]] == ["SEND_OK"] * 5
            got = await consume(env, topic="AclTopic", group="GID_ACL", expect={f"a{i}": 1 for i in range(5)}, **creds)
            assert sorted(d["key"] for d in got["deliveries"]) == [f"a{i}" for i in range(5)]
            cases = [({"accessKey": "ons-user", "secretKey": "wrong"}, "AclTopic", "signature"),
                     (creds, "OtherTopic", "no PUB permission for topic 'OtherTopic'")]
            for bad, topic, reason in cases:
                with pytest.raises(AssertionError, match="exited 1"):
                    await run_phase(env, "produce", topic=topic, **bad,
                                    messages=[{"key": "x", "tag": "T", "body": "refused"}])
                assert reason in env.broker.acl.last_refusal
            assert sum(env.broker.store.max_offset("OtherTopic", q) for q in range(4)) == 0
    asyncio.run(main())
