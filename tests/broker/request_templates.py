"""One well-formed request per request code a broker serves, with the topic and group names it
carries as replaceable slots - for the tests that go over every code (hostile names, ACL matrix).

``build(code, **names)`` makes the request; each slot has a default name.  ``SLOTS[code]`` lists
(slot, kind, optional): an optional slot may be left empty (the request then names nothing there).
Slots whose names live in a JSON body are filled in the body.
"""

from __future__ import annotations

import json

from rocketq.common.sysflag import TRANSACTION_ROLLBACK_TYPE
from rocketq.remoting import RemotingCommand, RequestCode

R = RequestCode
DEFAULTS = {"topic": "Orders", "group": "GID_A", "producer": "PID_A", "origin": "Orders"}


def _header(code, fields, body=b""):
    return RemotingCommand.create_request(code, fields, body)


def _send_v1(n, offset):
    return _header(R.SEND_MESSAGE, {"producerGroup": n["producer"], "topic": n["topic"], "defaultTopic": "TBW102",
                                    "defaultTopicQueueNums": 4, "queueId": 0, "sysFlag": 0, "bornTimestamp": 0,
                                    "flag": 0, "properties": "", "reconsumeTimes": 0, "unitMode": False}, b"v1")


def _send_v2(n, offset, code=R.SEND_MESSAGE_V2, body=b"v2"):
    return _header(code, {"a": n["producer"], "b": n["topic"], "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0,
                          "h": 0, "i": "", "j": 0, "k": False}, body)


def _batch_body() -> bytes:
    body, props = b"one", b""
    size = 4 + 4 + 4 + 4 + 4 + len(body) + 2 + len(props)
    return (size.to_bytes(4, "big") + bytes(12) + len(body).to_bytes(4, "big") + body
            + len(props).to_bytes(2, "big") + props)


def _heartbeat(n, offset):
    return _header(R.HEART_BEAT, {}, json.dumps({
        "clientID": "client-1",
        "producerDataSet": [{"groupName": n["producer"]}],
        "consumerDataSet": [{"groupName": n["group"], "consumeType": "CONSUME_PASSIVELY",
                             "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                             "subscriptionDataSet": [{"topic": n["topic"], "subString": "*"}], "unitMode": False}],
    }).encode())


def _locks(code):
    def build(n, offset):
        return _header(code, {}, json.dumps({"consumerGroup": n["group"], "clientId": "client-1",
                                             "mqSet": [{"topic": n["topic"], "brokerName": "broker-a",
                                                        "queueId": 0}]}).encode())
    return build


def _topic_only(code, **extra):
    return lambda n, offset: _header(code, {"topic": n["topic"], "queueId": 0, **extra})


def _topic_and_group(code, **extra):
    return lambda n, offset: _header(code, {"topic": n["topic"], "consumerGroup": n["group"], "queueId": 0, **extra})


# code -> (builder(names, offset), [(slot, kind, optional)])
TEMPLATES = {
    R.SEND_MESSAGE: (_send_v1, [("topic", "topic", False), ("producer", "group", True)]),
    R.SEND_MESSAGE_V2: (_send_v2, [("topic", "topic", False), ("producer", "group", True)]),
    R.SEND_BATCH_MESSAGE: (lambda n, o: _send_v2(n, o, R.SEND_BATCH_MESSAGE, _batch_body()),
                           [("topic", "topic", False), ("producer", "group", True)]),
    R.PULL_MESSAGE: (_topic_and_group(R.PULL_MESSAGE, queueOffset=0, maxMsgNums=1, sysFlag=0, commitOffset=0,
                                      suspendTimeoutMillis=0, subscription="*", subVersion=0),
                     [("topic", "topic", False), ("group", "group", False)]),
    R.LITE_PULL_MESSAGE: (_topic_and_group(R.LITE_PULL_MESSAGE, queueOffset=0, maxMsgNums=1, sysFlag=0, commitOffset=0,
                                           suspendTimeoutMillis=0, subscription="*", subVersion=0),
                          [("topic", "topic", False), ("group", "group", False)]),
    R.QUERY_MESSAGE: (_topic_only(R.QUERY_MESSAGE, key="k", maxNum=1, beginTimestamp=0, endTimestamp=1),
                      [("topic", "topic", False)]),
    R.QUERY_CONSUMER_OFFSET: (_topic_and_group(R.QUERY_CONSUMER_OFFSET),
                              [("topic", "topic", False), ("group", "group", False)]),
    R.UPDATE_CONSUMER_OFFSET: (_topic_and_group(R.UPDATE_CONSUMER_OFFSET, commitOffset=0),
                               [("topic", "topic", False), ("group", "group", False)]),
    R.UPDATE_AND_CREATE_TOPIC: (_topic_only(R.UPDATE_AND_CREATE_TOPIC, readQueueNums=1, writeQueueNums=1, perm=6),
                                [("topic", "topic", False)]),
    R.GET_ALL_TOPIC_CONFIG: (lambda n, o: _header(R.GET_ALL_TOPIC_CONFIG, {}), []),
    R.GET_BROKER_RUNTIME_INFO: (lambda n, o: _header(R.GET_BROKER_RUNTIME_INFO, {}), []),
    R.SEARCH_OFFSET_BY_TIMESTAMP: (_topic_only(R.SEARCH_OFFSET_BY_TIMESTAMP, timestamp=0), [("topic", "topic", False)]),
    R.GET_MAX_OFFSET: (_topic_only(R.GET_MAX_OFFSET), [("topic", "topic", False)]),
    R.GET_MIN_OFFSET: (_topic_only(R.GET_MIN_OFFSET), [("topic", "topic", False)]),
    R.GET_EARLIEST_MSG_STORETIME: (_topic_only(R.GET_EARLIEST_MSG_STORETIME), [("topic", "topic", False)]),
    R.VIEW_MESSAGE_BY_ID: (lambda n, offset: _header(R.VIEW_MESSAGE_BY_ID, {"offset": offset}), []),
    R.HEART_BEAT: (_heartbeat, [("topic", "topic", False), ("group", "group", False), ("producer", "group", False)]),
    R.UNREGISTER_CLIENT: (lambda n, o: _header(R.UNREGISTER_CLIENT, {"clientID": "client-1", "consumerGroup": n["group"],
                                                                     "producerGroup": n["producer"]}),
                          [("group", "group", True), ("producer", "group", True)]),
    R.CONSUMER_SEND_MSG_BACK: (lambda n, offset: _header(R.CONSUMER_SEND_MSG_BACK, {
        "offset": offset, "group": n["group"], "delayLevel": 0, "originMsgId": "", "originTopic": n["origin"]}),
        [("group", "group", False), ("origin", "topic", True)]),
    R.END_TRANSACTION: (lambda n, offset: _header(R.END_TRANSACTION, {
        "producerGroup": n["producer"], "tranStateTableOffset": 0, "commitLogOffset": offset,
        "commitOrRollback": TRANSACTION_ROLLBACK_TYPE, "fromTransactionCheck": False, "msgId": "", "transactionId": ""}),
        [("producer", "group", True)]),
    R.GET_CONSUMER_LIST_BY_GROUP: (lambda n, o: _header(R.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": n["group"]}),
                                   [("group", "group", False)]),
    R.LOCK_BATCH_MQ: (_locks(R.LOCK_BATCH_MQ), [("topic", "topic", False), ("group", "group", False)]),
    R.UNLOCK_BATCH_MQ: (_locks(R.UNLOCK_BATCH_MQ), [("topic", "topic", False), ("group", "group", False)]),
    R.GET_ALL_CONSUMER_OFFSET: (lambda n, o: _header(R.GET_ALL_CONSUMER_OFFSET, {}), []),
    R.GET_ALL_DELAY_OFFSET: (lambda n, o: _header(R.GET_ALL_DELAY_OFFSET, {}), []),
    R.GET_TIMER_CHECK_POINT: (lambda n, o: _header(R.GET_TIMER_CHECK_POINT, {}), []),
    R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: (lambda n, o: _header(R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {},
                                                                 json.dumps({"groupName": n["group"]}).encode()),
                                            [("group", "group", False)]),
    R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: (lambda n, o: _header(R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {}), []),
    R.GET_TOPIC_STATS_INFO: (_topic_only(R.GET_TOPIC_STATS_INFO), [("topic", "topic", False)]),
    R.GET_CONSUMER_CONNECTION_LIST: (lambda n, o: _header(R.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": n["group"]}),
                                     [("group", "group", False)]),
    R.DELETE_SUBSCRIPTIONGROUP: (lambda n, o: _header(R.DELETE_SUBSCRIPTIONGROUP, {"groupName": n["group"]}),
                                 [("group", "group", False)]),
    R.GET_CONSUME_STATS: (_topic_and_group(R.GET_CONSUME_STATS), [("group", "group", False), ("topic", "topic", True)]),
    R.DELETE_TOPIC_IN_BROKER: (_topic_only(R.DELETE_TOPIC_IN_BROKER), [("topic", "topic", False)]),
    # issue 19's codes
    R.CHECK_CLIENT_CONFIG: (lambda n, o: _header(R.CHECK_CLIENT_CONFIG, {}, json.dumps({
        "clientId": "client-1", "group": n["group"], "subscriptionData": {
            "topic": n["topic"], "subString": "a > 1", "expressionType": "SQL92"}}).encode()),
        [("group", "group", False), ("topic", "topic", False)]),
    R.GET_TOPIC_CONFIG: (_topic_only(R.GET_TOPIC_CONFIG), [("topic", "topic", False)]),
    R.POP_MESSAGE: (_topic_and_group(R.POP_MESSAGE, maxMsgNums=1, invisibleTime=10_000, pollTime=0, bornTime=0,
                                     initMode=0), [("topic", "topic", False), ("group", "group", False)]),
    R.ACK_MESSAGE: (_topic_and_group(R.ACK_MESSAGE, offset=0, extraInfo="0 1 10000 0 0 broker-a 0 0"),
                    [("topic", "topic", False), ("group", "group", False)]),
    R.CHANGE_MESSAGE_INVISIBLETIME: (_topic_and_group(R.CHANGE_MESSAGE_INVISIBLETIME, offset=0, invisibleTime=1000,
                                                      extraInfo="0 1 10000 0 0 broker-a 0 0"),
                                     [("topic", "topic", False), ("group", "group", False)]),
    R.BATCH_ACK_MESSAGE: (lambda n, o: _header(R.BATCH_ACK_MESSAGE, {}, json.dumps({"brokerName": "broker-a", "acks": [
        {"c": n["group"], "t": n["topic"], "r": "0", "so": 0, "q": 0, "rq": 0, "pt": 1, "it": 10_000, "b": "AQ=="}]}
    ).encode()), [("group", "group", False), ("topic", "topic", False)]),
    R.QUERY_ASSIGNMENT: (lambda n, o: _header(R.QUERY_ASSIGNMENT, {}, json.dumps({
        "topic": n["topic"], "consumerGroup": n["group"], "clientId": "client-1", "strategyName": "AVG",
        "messageModel": "CLUSTERING"}).encode()), [("topic", "topic", False), ("group", "group", False)]),
    R.SEND_REPLY_MESSAGE: (lambda n, o: _header(R.SEND_REPLY_MESSAGE, _send_v1(n, o).ext_fields, b"reply"),
                           [("topic", "topic", False), ("producer", "group", True)]),
    R.SEND_REPLY_MESSAGE_V2: (lambda n, o: _send_v2(n, o, R.SEND_REPLY_MESSAGE_V2, b"reply"),
                              [("topic", "topic", False), ("producer", "group", True)]),
    R.INVOKE_BROKER_TO_RESET_OFFSET: (lambda n, o: _header(R.INVOKE_BROKER_TO_RESET_OFFSET, {
        "topic": n["topic"], "group": n["group"], "timestamp": -1, "isForce": True}),
        [("topic", "topic", False), ("group", "group", False)]),
    R.GET_BROKER_CONFIG: (lambda n, o: _header(R.GET_BROKER_CONFIG, {}), []),
    R.GET_BROKER_EPOCH_CACHE: (lambda n, o: _header(R.GET_BROKER_EPOCH_CACHE, {}), []),
    R.UPDATE_BROKER_CONFIG: (lambda n, o: _header(R.UPDATE_BROKER_CONFIG, {}, b"enablePropertyFilter=false\n"), []),
    R.RECALL_MESSAGE: (lambda n, o: _header(R.RECALL_MESSAGE, {"producerGroup": n["producer"], "topic": n["topic"],
                                                               "recallHandle": "djE"}),
                       [("topic", "topic", False), ("producer", "group", True)]),
    R.QUERY_TOPIC_CONSUME_BY_WHO: (_topic_only(R.QUERY_TOPIC_CONSUME_BY_WHO), [("topic", "topic", False)]),
    R.GET_PRODUCER_CONNECTION_LIST: (lambda n, o: _header(R.GET_PRODUCER_CONNECTION_LIST,
                                                          {"producerGroup": n["producer"]}), []),
}


def build(code: int, offset: int = 0, **names: str) -> RemotingCommand:
    """The request for *code*, with *names* (slot=name) replacing the default names and *offset* the
    commitlog offset for the requests that look a message up."""
    builder, _ = TEMPLATES[code]
    return builder({**DEFAULTS, **names}, offset)
