"""REGISTER_BROKER bodies: JSON (fastjson quirks included) and the compressed Deflate form."""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from rocketq.namesrv import DataVersion, RegisterBodyError, RegisterBrokerBody, TopicConfigWrapper, TopicQueueConfig
from rocketq.namesrv import decode_register_body
from rocketq.namesrv.register_body import encode_compressed_body


def test_json_body():
    body = json.dumps({"topicConfigSerializeWrapper": {
        "topicConfigTable": {"T": {"topicName": "T", "readQueueNums": 8, "writeQueueNums": 4, "perm": 6,
                                   "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False}},
        "dataVersion": {"stateVersion": 0, "timestamp": 123, "counter": 7}}, "filterServerList": []}).encode()
    parsed = decode_register_body(body, compressed=False)
    assert parsed.wrapper.topic_configs == {"T": TopicQueueConfig("T", 8, 4, 6, 0)}
    assert parsed.wrapper.data_version == DataVersion(0, 123, 7)


def test_fastjson_unquoted_keys_and_empty_body():
    body = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{},"dataVersion":{"counter":1,"timestamp":5},' \
           b'"x":{0:"a"}},"filterServerList":[]}'
    assert decode_register_body(body, compressed=False).wrapper.data_version == DataVersion(0, 5, 1)
    assert decode_register_body(b"", compressed=False) == RegisterBrokerBody()


def test_compressed_round_trip_like_java():
    original = RegisterBrokerBody(TopicConfigWrapper(
        {"A": TopicQueueConfig("A", 4, 4, 6), "B": TopicQueueConfig("B", 2, 1, 4)}, DataVersion(0, 99, 3)), ["f:1"])
    parsed = decode_register_body(encode_compressed_body(original), compressed=True)
    assert parsed == original


def test_compressed_java_topic_config_without_attributes():
    dv = json.dumps({"counter": 2, "timestamp": 9}).encode()
    topic = b"T 4 4 6 SINGLE_TAG"                                   # 4.x TopicConfig.encode()
    raw = struct.pack(">i", len(dv)) + dv + struct.pack(">i", 1) + struct.pack(">i", len(topic)) + topic \
        + struct.pack(">i", 2) + b"[]"
    parsed = decode_register_body(zlib.compress(raw), compressed=True)
    assert parsed.wrapper.topic_configs["T"] == TopicQueueConfig("T", 4, 4, 6)


@pytest.mark.parametrize("body, compressed", [
    (b"not json", False), (b"[1,2]", False), (b"garbage", True),
    (zlib.compress(struct.pack(">i", 1000) + b"{}"), True),
    (zlib.compress(struct.pack(">i", 2) + b"{}" + struct.pack(">i", 1) + struct.pack(">i", 3) + b"T 4"), True),
])
def test_malformed_bodies_raise_register_body_error(body, compressed):
    with pytest.raises(RegisterBodyError):
        decode_register_body(body, compressed=compressed)
