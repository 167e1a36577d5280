"""The admin requests mqadmin needs beyond :mod:`rocketq.broker.admin`: one topic's config, who consumes a
topic, producer connections, resetting a group's offsets by time, and the broker's configuration.

=================================  ====  =====================================================
request                            code  answer
=================================  ====  =====================================================
GET_TOPIC_CONFIG                    351  body: TopicConfigAndQueueMapping (the topic's config, no mapping)
QUERY_TOPIC_CONSUME_BY_WHO          300  body: GroupList {"groupList"}: groups online on the topic or with
                                         offsets for it
GET_PRODUCER_CONNECTION_LIST        204  body: ProducerConnection {"connectionSet"}
INVOKE_BROKER_TO_RESET_OFFSET       222  per queue the offset at ``timestamp`` (-1: the end); sent to every
                                         online client of the group (RESET_CONSUMER_CLIENT_OFFSET, oneway),
                                         body ResetOffsetBody; no client online: CONSUMER_NOT_ONLINE, and
                                         mqadmin then commits the offsets itself (its "old" way)
CHECK_CLIENT_CONFIG                  46  SUCCESS for a TAG subscription; SQL92 is refused as Java refuses it
                                         with enablePropertyFilter=false (its default; rocketq has no SQL92)
GET_BROKER_CONFIG                    26  body: ``key=value`` lines, the effective settings (RocketMQ names)
UPDATE_BROKER_CONFIG                 25  body: ``key=value`` lines; the keys in :data:`LIVE_KEYS` change at
                                         once (until restart: rocketq has no writable config file); any
                                         other key is refused naming it
=================================  ====  =====================================================

As in Java, a reset offset moves a queue back only with ``isForce``; without it a queue keeps its
committed offset when that is already before the time's offset.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging

from rocketq.broker.admin import _error, _queue_key, ok
from rocketq.common import fastjson
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

RESET_TO_END = -1


def handlers(broker) -> dict:
    table = {
        RequestCode.GET_TOPIC_CONFIG: topic_config, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: consumed_by,
        RequestCode.GET_PRODUCER_CONNECTION_LIST: producer_connections,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: reset_offset,
        RequestCode.GET_BROKER_CONFIG: broker_config, RequestCode.UPDATE_BROKER_CONFIG: update_broker_config,
        RequestCode.CHECK_CLIENT_CONFIG: check_client_config,
    }

    def bind(fn):
        async def handle(conn, cmd):
            return fn(broker, cmd)
        return handle
    return {code: bind(fn) for code, fn in table.items()}


def topic_config(broker, cmd):
    topic = cmd.get_str("topic")
    tc = broker.topics.get(topic)
    if tc is None:
        return _error(cmd, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
    return ok(cmd, body=json.dumps({**tc.to_json(), "mappingDetail": None}).encode())


def consumed_by(broker, cmd):
    topic = cmd.get_str("topic")
    groups = set(broker.offsets.groups_of(topic))
    groups.update(g for g, info in broker.clients.consumers.items() if info.clients and topic in info.subscriptions)
    return ok(cmd, body=json.dumps({"groupList": sorted(groups)}).encode())


def producer_connections(broker, cmd):
    group = cmd.get_str("producerGroup")
    conns = [{"clientId": cid, "clientAddr": getattr(conn, "peer", ""), "language": "JAVA", "version": 0}
             for cid, conn in (broker.clients.producers.get(group) or {}).items()]
    if not conns:
        return _error(cmd, ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
    return ok(cmd, body=json.dumps({"connectionSet": conns}).encode())


def reset_offset(broker, cmd):
    topic, group = cmd.get_str("topic"), cmd.get_str("group")
    timestamp, force = cmd.get_int("timestamp", RESET_TO_END), cmd.get_bool("isForce", True)
    tc = broker.topics.get(topic)
    if tc is None:
        return _error(cmd, ResponseCode.TOPIC_NOT_EXIST, f"[reset-offset] topic not exist, topic={topic}")
    committed = broker.offsets.offsets(group, topic)
    table = {}
    for qid in range(tc.read_queue_nums):
        target = (broker.store.max_offset(topic, qid) if timestamp == RESET_TO_END
                  else broker.store.search_offset_by_time(topic, qid, timestamp))
        current = committed.get(qid, -1)
        table[_queue_key(broker, topic, qid)] = target if force or current < 0 or target < current else current
    body = fastjson.dumps({"offsetTable": table}).encode()
    conns = broker.clients.connections(group)
    if not conns:
        return _error(cmd, ResponseCode.CONSUMER_NOT_ONLINE, f"Consumer not online, so can not reset offset, "
                      f"Group: {group} Topic: {topic} Timestamp: {timestamp}")
    for conn in conns:          # the clients move their offsets and commit them (Java's ClientRemotingProcessor)
        note = RemotingCommand.create_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, {
            "topic": topic, "group": group, "timestamp": timestamp, "isForce": force}, body, oneway=True)
        asyncio.ensure_future(_quietly(conn.send_oneway(note)))
    log.info("offsets of group %s on %s reset to time %d for %d client(s)", group, topic, timestamp, len(conns))
    return ok(cmd, body=body)


async def _quietly(coro) -> None:
    try:
        await coro
    except (ConnectionError, OSError, asyncio.TimeoutError):
        pass                    # a client that left: it reads the committed offsets when it comes back


def check_client_config(broker, cmd):
    try:
        data = fastjson.loads(cmd.body or b"{}")
        sub = data.get("subscriptionData") or {}
        expression_type = str(sub.get("expressionType") or "TAG")
    except (ValueError, AttributeError) as exc:
        return _error(cmd, ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"bad CheckClientRequestBody: {exc}")
    if expression_type != "TAG":
        return _error(cmd, ResponseCode.SYSTEM_ERROR,
                      f"The broker does not support consumer to filter message by {expression_type}")
    return ok(cmd)


# -- configuration -------------------------------------------------------------------------------

# RocketMQ key -> how to apply it to the running broker. Anything else needs a restart in rocketq.
LIVE_KEYS = {
    "autoCreateTopicEnable": ("auto_create_topic", lambda b, v: setattr(b.topics, "auto_create_topic", v)),
    "brokerFastFailureEnable": ("fast_failure", lambda b, v: setattr(b.flow_control, "enabled", v)),
    "waitTimeMillsInSendQueue": ("wait_in_send_queue_ms",
                                 lambda b, v: setattr(b.flow_control, "max_wait_in_queue_ms", v)),
    "transactionCheckMax": ("transaction_check_max", lambda b, v: setattr(b.transaction_checker, "max_checks", v)),
    "fileReservedTime": ("file_reserved_time_hours", lambda b, v: b.store.cleaner.set_reserved_hours(v)),
}
STORE_KEYS = {"fileReservedTime"}          # kept in the store's config, not the broker's settings


def effective_properties(broker) -> dict[str, str]:
    from rocketq.server.config import rocketmq_properties      # server.config imports the broker module
    props = rocketmq_properties(broker.settings, broker.store.config)
    props["listenPort"] = str(broker.server.port)
    return props


def broker_config(broker, cmd):
    text = "".join(f"{k}={v}\n" for k, v in effective_properties(broker).items())
    version = json.dumps(broker.topics.data_version.to_json())
    return ok(cmd, {"version": version}, text.encode())


def update_broker_config(broker, cmd):
    from rocketq.server.config import ConfigError, build
    pairs = [line.split("=", 1) for line in (cmd.body or b"").decode(errors="replace").splitlines()
             if "=" in line and not line.lstrip().startswith("#")]
    if not pairs:
        return _error(cmd, ResponseCode.INVALID_PARAMETER, "no key=value in the request body")
    fixed = sorted(k.strip() for k, _ in pairs if k.strip() not in LIVE_KEYS)
    if fixed:
        return _error(cmd, ResponseCode.INVALID_PARAMETER, f"rocketq cannot change {', '.join(fixed)} while it runs: "
                      f"set it in broker.conf and restart (live keys: {', '.join(sorted(LIVE_KEYS))})")
    try:
        parsed = build([(k.strip(), v.strip(), "updateBrokerConfig") for k, v in pairs])
    except ConfigError as exc:
        return _error(cmd, ResponseCode.INVALID_PARAMETER, str(exc))
    changes, store_changes = {}, {}
    for key, _ in pairs:
        key = key.strip()
        name, apply = LIVE_KEYS[key]
        value = getattr(parsed.store if key in STORE_KEYS else parsed.broker, name)
        apply(broker, value)
        (store_changes if key in STORE_KEYS else changes)[name] = value
    broker.settings = dataclasses.replace(broker.settings, **changes)
    if store_changes:                         # what GET_BROKER_CONFIG shows (the store reads its own copy)
        broker.store.config = broker.store.config.replace(**store_changes)
    log.info("broker config updated at run time: %s", ", ".join(f"{k}={v}" for k, v in pairs))
    return ok(cmd)
