"""A pull without the SUBSCRIPTION flag is filtered by what the group registered in its heartbeat
(issue 19 item 2): the Java push consumer's default (``postSubscriptionWhenPull=false``) sends
neither flag nor expression, and RocketMQ filters it by the heartbeat's SubscriptionData, so the
messages it does not want never cross the wire."""

import asyncio
import json

from broker_helpers import send_v2, split_records, with_broker

from rocketq.broker.topic_config import TopicConfig
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

SUB_VERSION = 1_700_000_000_000


def heartbeat(group, topic, sub_string, expression_type="TAG", sub_version=SUB_VERSION):
    # what a Java 4.x/5.x push consumer sends (fastjson's field order)
    return RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, json.dumps({
        "clientID": "10.0.0.1@4242", "consumerDataSet": [{
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "consumeType": "CONSUME_PASSIVELY",
            "groupName": group, "messageModel": "CLUSTERING", "subscriptionDataSet": [{
                "classFilterMode": False, "codeSet": [], "expressionType": expression_type,
                "subString": sub_string, "subVersion": sub_version, "tagsSet": [], "topic": topic}],
            "unitMode": False}], "producerDataSet": []}).encode())


def java_pull(group, topic, offset=0, *, sub_version=SUB_VERSION, suspend_ms=0):
    """A Java push consumer's pull with postSubscriptionWhenPull=false: COMMIT_OFFSET | SUSPEND,
    no SUBSCRIPTION flag, no subscription."""
    return RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": 0x1 | (0x2 if suspend_ms else 0), "commitOffset": 0, "suspendTimeoutMillis": suspend_ms,
        "subVersion": sub_version})


async def _send_tagged(client, topic):
    for i, tag in enumerate(["TagA", "TagB", "TagA", "TagC"]):
        r = await client.invoke(send_v2(topic, f"m{i}".encode(), props=f"TAGS\x01{tag}\x02a\x01{i}\x02"))
        assert r.code == ResponseCode.SUCCESS, r.remark


def test_the_heartbeats_tags_filter_a_pull_without_subscription(tmp_path):
    async def scenario(broker, client):
        await _send_tagged(client, "Hb")
        await asyncio.to_thread(broker.store.wait_dispatched)
        r = await client.invoke(java_pull("GID_HB", "Hb"))
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST, r.remark    # no heartbeat yet: nothing served
        assert (await client.invoke(heartbeat("GID_HB", "Hb", "TagA"))).code == ResponseCode.SUCCESS
        r = await client.invoke(java_pull("GID_HB", "Hb"))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.body for m in split_records(r.body)] == [b"m0", b"m2"]
        # a pull from a consumer that subscribed again since: the broker's copy is older
        r = await client.invoke(java_pull("GID_HB", "Hb", sub_version=SUB_VERSION + 1))
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_LATEST
        assert (await client.invoke(heartbeat("GID_HB", "Hb", "TagB || TagC", sub_version=SUB_VERSION + 1))).code == 0
        r = await client.invoke(java_pull("GID_HB", "Hb", sub_version=SUB_VERSION + 1))
        assert [m.body for m in split_records(r.body)] == [b"m1", b"m3"]
    asyncio.run(with_broker(tmp_path, scenario))


def test_the_heartbeats_sql_selector_filters_a_pull_without_subscription(tmp_path):
    async def scenario(broker, client):
        await _send_tagged(client, "HbSql")
        await asyncio.to_thread(broker.store.wait_dispatched)
        await client.invoke(heartbeat("GID_HB_SQL", "HbSql", "a >= 2 OR TAGS = 'TagB'", "SQL92"))
        r = await client.invoke(java_pull("GID_HB_SQL", "HbSql"))
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert [m.body for m in split_records(r.body)] == [b"m1", b"m2", b"m3"]
        # a selector that does not parse: RocketMQ's FILTER_DATA_NOT_EXIST, with the reason
        await client.invoke(heartbeat("GID_HB_BAD", "HbSql", "a >>", "SQL92"))
        r = await client.invoke(java_pull("GID_HB_BAD", "HbSql"))
        assert r.code == ResponseCode.FILTER_DATA_NOT_EXIST and "position 4" in r.remark, r.remark
    asyncio.run(with_broker(tmp_path, scenario, enable_property_filter=True))


def test_a_long_poll_without_subscription_waits_for_a_wanted_tag(tmp_path):
    async def scenario(broker, client):
        broker.topics.update(TopicConfig("HbPoll", 1, 1))    # a pull of a topic not there yet is TOPIC_NOT_EXIST
        await client.invoke(heartbeat("GID_HB_POLL", "HbPoll", "TagA"))
        pull = asyncio.create_task(client.invoke(java_pull("GID_HB_POLL", "HbPoll", suspend_ms=10_000), timeout_s=15))
        await asyncio.sleep(0.2)
        await client.invoke(send_v2("HbPoll", b"unwanted", props="TAGS\x01TagB\x02"))
        await asyncio.sleep(0.3)
        assert not pull.done()                       # a TagB arrival does not end a TagA consumer's wait
        await client.invoke(send_v2("HbPoll", b"wanted", props="TAGS\x01TagA\x02"))
        r = await asyncio.wait_for(pull, 10)
        assert r.code == ResponseCode.SUCCESS and [m.body for m in split_records(r.body)] == [b"wanted"]
    asyncio.run(with_broker(tmp_path, scenario))


def test_the_requests_own_subscription_wins_with_the_flag(tmp_path):
    async def scenario(broker, client):
        await _send_tagged(client, "HbFlag")
        await asyncio.to_thread(broker.store.wait_dispatched)
        await client.invoke(heartbeat("GID_HB_FLAG", "HbFlag", "TagA"))
        cmd = java_pull("GID_HB_FLAG", "HbFlag")
        cmd.ext_fields.update(sysFlag=0x1 | 0x4, subscription="TagC", expressionType="TAG")
        r = await client.invoke(cmd)
        assert [m.body for m in split_records(r.body)] == [b"m3"]
    asyncio.run(with_broker(tmp_path, scenario))


def test_of_a_groups_heartbeats_the_newest_subscription_counts_not_the_last_to_arrive(tmp_path):
    """Two broadcasting consumers of one group rebalance at once and heartbeat their new subVersions;
    the older heartbeat arriving last must not make the newer member's pulls SUBSCRIPTION_NOT_LATEST
    (RocketMQ ``ConsumerGroupInfo.updateSubscription``: only a higher subVersion replaces)."""
    async def scenario(broker, client):
        await _send_tagged(client, "HbTwo")
        await asyncio.to_thread(broker.store.wait_dispatched)
        newer, older = SUB_VERSION + 2, SUB_VERSION + 1
        assert (await client.invoke(heartbeat("GID_HB_TWO", "HbTwo", "TagA", sub_version=newer))).code == 0
        assert (await client.invoke(heartbeat("GID_HB_TWO", "HbTwo", "TagB", sub_version=older))).code == 0
        for version in (older, newer):
            r = await client.invoke(java_pull("GID_HB_TWO", "HbTwo", sub_version=version))
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert [m.body for m in split_records(r.body)] == [b"m0", b"m2"]      # the newer one's TagA
        # a heartbeat that no longer names the topic drops its subscription, as RocketMQ
        assert (await client.invoke(heartbeat("GID_HB_TWO", "Elsewhere", "*", sub_version=newer + 1))).code == 0
        r = await client.invoke(java_pull("GID_HB_TWO", "HbTwo", sub_version=newer))
        assert r.code == ResponseCode.SUBSCRIPTION_NOT_EXIST, r.remark
    asyncio.run(with_broker(tmp_path, scenario))
