"""Broker-side state files: topics.json, consumerOffset.json, subscriptionGroup.json in RocketMQ's format."""

import json

import pytest

from rocketq.broker.consumer_offsets import ConsumerOffsetManager
from rocketq.broker.subscription_groups import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketq.broker.topic_config import (DEFAULT_TOPIC, PERM_INHERIT, PERM_READ_WRITE, TopicConfig, TopicConfigError,
                                         TopicConfigManager)


def test_topics_json_round_trip_and_system_topics(tmp_path):
    path = tmp_path / "config" / "topics.json"
    m = TopicConfigManager(path, cluster_name="DefaultCluster", broker_name="broker-a")
    for name in ("TBW102", "SELF_TEST_TOPIC", "DefaultCluster", "broker-a", "SCHEDULE_TOPIC_XXXX",
                 "RMQ_SYS_TRANS_HALF_TOPIC"):
        assert m.get(name) is not None, name
    assert m.get(DEFAULT_TOPIC).perm & PERM_INHERIT
    m.update(TopicConfig("Orders", 4, 4))
    data = json.loads(path.read_text())
    assert data["topicConfigTable"]["Orders"] == {
        "topicName": "Orders", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0, "order": False, "attributes": {}}
    assert data["dataVersion"]["counter"] == 1
    again = TopicConfigManager(path, cluster_name="DefaultCluster", broker_name="broker-a")
    again.load()
    assert again.get("Orders") == m.get("Orders") and again.data_version.counter == 1


def test_auto_create_on_first_send_and_its_limits(tmp_path):
    m = TopicConfigManager(tmp_path / "topics.json", cluster_name="C", broker_name="b", default_queue_nums=4)
    tc = m.create_in_send("NewTopic", DEFAULT_TOPIC, queue_nums=8)
    assert (tc.read_queue_nums, tc.write_queue_nums, tc.perm) == (4, 4, PERM_READ_WRITE)
    assert m.create_in_send("Other", "SELF_TEST_TOPIC") is None            # no INHERIT bit: no creation
    off = TopicConfigManager(tmp_path / "t2.json", cluster_name="C", broker_name="b", auto_create_topic=False)
    assert off.create_in_send("NewTopic") is None and off.get(DEFAULT_TOPIC) is None


def test_bad_topic_configs_are_refused(tmp_path):
    m = TopicConfigManager(tmp_path / "topics.json", cluster_name="C", broker_name="b")
    with pytest.raises(TopicConfigError, match="characters"):
        m.update(TopicConfig("bad name"))
    with pytest.raises(TopicConfigError, match="readQueueNums 0"):
        m.update(TopicConfig("T", 0, 4))


def test_consumer_offsets_persist_in_rocketmq_format(tmp_path):
    path = tmp_path / "consumerOffset.json"
    m = ConsumerOffsetManager(path)
    assert m.query("G", "T", 0) == -1
    m.commit("G", "T", 0, 12)
    m.commit("G", "T", 1, 5)
    m.commit("G", "T", 1, -1)                 # "nothing to commit", as clients send
    assert m.persist() and not m.persist()     # second time: nothing changed
    assert json.loads(path.read_text())["offsetTable"] == {"T@G": {"0": 12, "1": 5}}
    path.write_text('{"offsetTable":{"T@G":{0:30,1:5},"U@G":{0:1}}}')     # as Java's fastjson writes it
    m2 = ConsumerOffsetManager(path)
    m2.load()
    assert m2.query("G", "T", 0) == 30 and m2.groups_of("T") == ["G"] and m2.topics_of("G") == ["T", "U"]


def test_subscription_groups(tmp_path):
    path = tmp_path / "subscriptionGroup.json"
    m = SubscriptionGroupManager(path)
    g = m.get("GID", create=True)
    assert (g.retry_max_times, g.retry_queue_nums, g.consume_enable) == (16, 1, True)
    m.update(SubscriptionGroupConfig("Orderly", consume_message_orderly=True, retry_max_times=3))
    data = json.loads(path.read_text())
    assert data["subscriptionGroupTable"]["Orderly"]["consumeMessageOrderly"] is True
    assert data["subscriptionGroupTable"]["Orderly"]["retryMaxTimes"] == 3
    m2 = SubscriptionGroupManager(path)
    m2.load()
    assert m2.get("Orderly").retry_max_times == 3 and m2.get("GID") is not None
    assert SubscriptionGroupManager(tmp_path / "x.json", auto_create=False).get("New", create=True) is None
