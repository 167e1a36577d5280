"""Admin requests (RocketMQ ``AdminBrokerProcessor``): topics, subscription groups, stats.

=================================  ====  =====================================================
request                            code  answer
=================================  ====  =====================================================
UPDATE_AND_CREATE_TOPIC              17  header: topic, read/writeQueueNums, perm, attributes, ...
GET_TOPIC_CONFIG                    351  header: topic; body: the TopicConfig JSON (attributes incl.)
DELETE_TOPIC_IN_BROKER              215  header: topic; drops its config, consume queues, offsets
GET_ALL_TOPIC_CONFIG                 21  body: {"topicConfigTable": {...}, "dataVersion": {...}}
UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200  body: SubscriptionGroupConfig JSON
GET_ALL_SUBSCRIPTIONGROUP_CONFIG    201  body: {"subscriptionGroupTable": {...}, "dataVersion": {...}}
DELETE_SUBSCRIPTIONGROUP            207  header: groupName, cleanOffset
GET_TOPIC_STATS_INFO                202  body: TopicStatsTable, MessageQueue-keyed (fastjson form)
GET_CONSUME_STATS                   208  body: ConsumeStats, MessageQueue-keyed (fastjson form)
GET_CONSUMER_CONNECTION_LIST        203  body: ConsumerConnection
GET_BROKER_RUNTIME_INFO              28  body: KVTable {"table": {name: text}}
GET_ALL_CONSUMER_OFFSET              43  body: {"offsetTable": {"topic@group": {queueId: offset}}}
GET_ALL_DELAY_OFFSET                 45  body: delayOffset.json, {"offsetTable": {level: offset}, ...}
=================================  ====  =====================================================

UPDATE_AND_CREATE_TOPIC's ``attributes`` (``+message.type=FIFO,-key``) are validated and merged into
the topic's (:mod:`rocketq.broker.topic_attributes`); without the header a topic keeps its attributes.
Creating or deleting a topic re-registers with the NameServers before answering, as RocketMQ's
``registerIncrementBrokerData`` does, so the route is there when the admin command returns.
The stats bodies key their maps by MessageQueue objects, as fastjson writes them; Java's admin
tools read exactly that (see :mod:`rocketq.common.fastjson`).
"""

from __future__ import annotations

import json

from rocketq import __version__
from rocketq.broker.subscription_groups import SubscriptionGroupConfig
from rocketq.broker.topic_attributes import TopicAttributeError, alter, parse_modification
from rocketq.broker.topic_config import TopicConfig, TopicConfigError
from rocketq.common import fastjson
from rocketq.common.fastjson import ObjectKey
from rocketq.common.validation import is_system_topic
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode


def handlers(broker) -> dict:
    """Request code -> coroutine(conn, cmd) for every admin request, bound to *broker*."""
    table = {
        RequestCode.UPDATE_AND_CREATE_TOPIC: create_topic, RequestCode.DELETE_TOPIC_IN_BROKER: delete_topic,
        RequestCode.GET_ALL_TOPIC_CONFIG: all_topic_config, RequestCode.GET_TOPIC_CONFIG: topic_config,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: update_group,
        RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: all_groups, RequestCode.DELETE_SUBSCRIPTIONGROUP: delete_group,
        RequestCode.GET_TOPIC_STATS_INFO: topic_stats, RequestCode.GET_CONSUME_STATS: consume_stats,
        RequestCode.GET_CONSUMER_CONNECTION_LIST: consumer_connections,
        RequestCode.GET_BROKER_RUNTIME_INFO: runtime_info, RequestCode.GET_ALL_CONSUMER_OFFSET: all_offsets,
        RequestCode.GET_ALL_DELAY_OFFSET: all_delay_offsets,
    }

    def bind(fn):
        async def handle(conn, cmd):
            response = fn(broker, cmd)
            if cmd.code in _REGISTER_AFTER and response.code == ResponseCode.SUCCESS and broker.registrar is not None:
                await broker.registrar.published()   # the route is at the NameServers when we answer
            return response
        return handle
    return {code: bind(fn) for code, fn in table.items()}


_REGISTER_AFTER = frozenset({RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER})


def ok(cmd: RemotingCommand, ext=None, body: bytes = b"") -> RemotingCommand:
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, None, ext, body)


def _error(cmd: RemotingCommand, code: int, remark: str) -> RemotingCommand:
    return RemotingCommand.create_response(cmd, code, remark)


# -- topics ------------------------------------------------------------------------------------

def create_topic(broker, cmd):
    refused = _system_topic_refusal(broker, cmd)
    if refused is not None:
        return refused
    topic = cmd.get_str("topic")
    old = broker.topics.get(topic)
    try:
        attributes = alter(old.attributes if old is not None else {}, parse_modification(cmd.get_str("attributes", "")),
                           create=old is None, allow_mixed=broker.settings.enable_mixed_message_type)
        broker.topics.update(TopicConfig(topic, cmd.get_int("readQueueNums", 8),
                                         cmd.get_int("writeQueueNums", 8), cmd.get_int("perm", 6),
                                         cmd.get_str("topicFilterType", "SINGLE_TAG"), cmd.get_int("topicSysFlag", 0),
                                         cmd.get_bool("order", False), attributes))
    except (TopicConfigError, TopicAttributeError) as exc:
        return _error(cmd, ResponseCode.INVALID_PARAMETER, f"topic {topic!r}: {exc}"
                      if isinstance(exc, TopicAttributeError) else str(exc))
    return ok(cmd)


def topic_config(broker, cmd):
    topic = cmd.get_str("topic")
    tc = broker.topics.get(topic)
    if tc is None:
        return _error(cmd, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
    return ok(cmd, body=json.dumps(tc.to_json()).encode())


def delete_topic(broker, cmd):
    topic = cmd.get_str("topic")
    refused = _system_topic_refusal(broker, cmd)
    if refused is not None:
        return refused
    try:
        broker.topics.delete(topic)
    except TopicConfigError as exc:            # system topics cannot be deleted
        return _error(cmd, ResponseCode.INVALID_PARAMETER, str(exc))
    broker.offsets.remove_topic(topic)
    broker.store.delete_topic(topic)
    return ok(cmd)


def _system_topic_refusal(broker, cmd):
    """RocketMQ's ``validateSystemTopicWhenUpdateTopic`` (on by default): its system topics are not an
    admin's to create, change or delete (the broker makes them itself)."""
    topic = cmd.get_str("topic")
    if broker.settings.validate_system_topic and is_system_topic(topic):
        return _error(cmd, ResponseCode.INVALID_PARAMETER, f"The topic[{topic}] is conflict with system topic.")
    return None


def all_topic_config(broker, cmd):
    return ok(cmd, body=json.dumps(broker.topics.encode()).encode())


# -- subscription groups -----------------------------------------------------------------------

def update_group(broker, cmd):
    try:
        data = json.loads(cmd.body or b"")
        cfg = SubscriptionGroupConfig.from_json(data)
    except (ValueError, TypeError) as exc:
        return _error(cmd, ResponseCode.INVALID_PARAMETER, f"bad SubscriptionGroupConfig body: {exc}")
    try:
        broker.groups.update(cfg)
    except ValueError as exc:              # an illegal groupName
        return _error(cmd, ResponseCode.INVALID_PARAMETER, str(exc))
    return ok(cmd)


def all_groups(broker, cmd):
    return ok(cmd, body=json.dumps(broker.groups.encode()).encode())


def delete_group(broker, cmd):
    group = cmd.get_str("groupName")
    broker.groups.delete(group)
    if cmd.get_bool("cleanOffset", False):
        broker.offsets.remove_group(group)
    return ok(cmd)


# -- stats -------------------------------------------------------------------------------------

def _queue_key(broker, topic: str, qid: int) -> ObjectKey:
    return ObjectKey.of(brokerName=broker.settings.broker_name, queueId=qid, topic=topic)


def topic_stats(broker, cmd):
    topic = cmd.get_str("topic")
    tc = broker.topics.get(topic)
    if tc is None:
        return _error(cmd, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    table = {}
    for qid in range(tc.write_queue_nums):
        max_off = broker.store.max_offset(topic, qid)
        last = broker.store.last_store_time(topic, qid) if max_off > 0 else 0
        table[_queue_key(broker, topic, qid)] = {"minOffset": broker.store.min_offset(topic, qid),
                                                 "maxOffset": max_off, "lastUpdateTimestamp": last}
    return ok(cmd, body=fastjson.dumps({"offsetTable": table}).encode())


def consume_stats(broker, cmd):
    group, only_topic = cmd.get_str("consumerGroup"), cmd.get_str("topic", "")
    topics = [only_topic] if only_topic else broker.offsets.topics_of(group)
    table = {}
    for topic in topics:
        tc = broker.topics.get(topic)
        committed = broker.offsets.offsets(group, topic)
        # a slave acting as master may not have copied a young topic's config yet: the queues it has offsets for
        queue_ids = range(tc.read_queue_nums) if tc is not None else sorted(committed)
        for qid in queue_ids:
            max_off = broker.store.max_offset(topic, qid)
            done = committed.get(qid, -1)
            last = broker.store.store_time_at(topic, qid, done - 1) if done > 0 else 0
            table[_queue_key(broker, topic, qid)] = {"brokerOffset": max_off, "consumerOffset": max(done, 0),
                                                     "pullOffset": max(done, 0), "lastTimestamp": last or 0}
    if not table:
        return _error(cmd, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] has no offsets on "
                      f"{broker.settings.broker_name}" + (f" for topic {only_topic}" if only_topic else ""))
    return ok(cmd, body=fastjson.dumps({"consumeTps": 0.0, "offsetTable": table}).encode())


def consumer_connections(broker, cmd):
    group = cmd.get_str("consumerGroup")
    info = broker.clients.consumers.get(group)
    if info is None or not info.clients:
        return _error(cmd, ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
    conns = [{"clientId": cid, "clientAddr": getattr(conn, "peer", ""), "language": "JAVA", "version": 0}
             for cid, (conn, _) in info.clients.items()]
    body = {"connectionSet": conns, "subscriptionTable": info.subscriptions, "consumeType": info.consume_type,
            "messageModel": info.message_model, "consumeFromWhere": info.consume_from_where}
    return ok(cmd, body=json.dumps(body).encode())


def all_offsets(broker, cmd):
    return ok(cmd, body=json.dumps(broker.offsets.encode()).encode())


def all_delay_offsets(broker, cmd):
    return ok(cmd, body=json.dumps(broker.store.schedule.encode()).encode())


def runtime_info(broker, cmd):
    store = broker.store
    table = broker.stats.runtime_table()
    table.update({
        "brokerVersionDesc": f"rocketq {__version__}", "brokerVersion": "0",
        "commitLogMinOffset": str(store.min_physical_offset()), "commitLogMaxOffset": str(store.max_physical_offset()),
        "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
        "sendThreadPoolQueueSize": str(broker.flow_control.inflight_sends),
        "sendThreadPoolQueueCapacity": str(broker.flow_control.max_inflight_sends),
        "earliestMessageTimeStamp": str(store.earliest_physical_time()),
        "commitLogDiskRatio": f"{store.disk_used_ratio():.4f}",
        "pageCacheLockTimeMills": "0",
        # the rest of what mqadmin clusterList prints: one event loop, no thread pools, so no queue waits
        "getTransferredTps": table.get("getTransferedTps", "0.00 0.00 0.00"),
        "sendThreadPoolQueueHeadWaitTimeMills": "0", "pullThreadPoolQueueSize": "0",
        "pullThreadPoolQueueHeadWaitTimeMills": "0", "ackThreadPoolQueueSize": "0",
        "ackThreadPoolQueueHeadWaitTimeMills": "0",
        "timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0", "timerEnqueueTps": "0.0",
        "timerDequeueTps": "0.0",
        "brokerActive": _active(broker),
    })
    table.update(_ha_figures(broker))
    return ok(cmd, body=json.dumps({"table": table}).encode())


def _active(broker) -> str:
    """RocketMQ's isSpecialServiceRunning: whether delayed, timer and transactional messages are delivered
    here (:mod:`rocketq.broker.acting_master`: a master once it took back its slaves' progress, an acting slave)."""
    acting = getattr(broker, "acting_master", None)
    if acting is not None:
        return str(acting.active).lower()
    return "true" if broker.settings.broker_role != "SLAVE" else "false"


def _ha_figures(broker) -> dict[str, str]:
    """The role and replication state the console shows (RocketMQ's keys where it has them:
    ``brokerRole``, ``haSlaveCount``... are rocketq's names for what ``mqadmin`` reads off HA)."""
    rep = getattr(broker, "replication", None)
    out = {"brokerRole": getattr(rep, "role", broker.settings.broker_role), "storePath":
           str(broker.store.config.store_path)}
    master = getattr(rep, "master", None)
    if master is not None:
        out["haSlaveCount"] = str(len(master.slaves))
        out["haBestSlaveOffset"] = str(master.best_slave_offset)
    slave = getattr(rep, "slave", None)
    if slave is not None:
        out["haMasterConnected"] = str(bool(slave.connected)).lower()
    return out
