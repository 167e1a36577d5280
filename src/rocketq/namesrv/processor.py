"""The NameServer's request processors: one small function per request code, in one table.

Theory of operation
-------------------
``dispatch(ctx, conn_key, cmd)`` looks the request code up in :data:`PROCESSORS` and returns the
response; codes not in the table get REQUEST_CODE_NOT_SUPPORTED like Java.  Processors are plain
functions of (context, connection key, request): they read headers with the lenient accessors (a
JSON-only client sends numbers and booleans as raw JSON), change :class:`RouteInfoManager` /
:class:`KVConfigManager`, and answer.  They know nothing of sockets: the connection is only a
hashable key, so a broker can be dropped when that connection closes.  Responses keep the
request's serialize type (``create_response``), and bodies are always standard JSON (quoted keys)
- every client parses that, while Java's unquoted-key form breaks strict parsers.

A missing or unparseable header field raises :class:`RemotingCommandError`, which the transport
answers SYSTEM_ERROR naming the field.
"""

from __future__ import annotations

import json
import logging
import zlib
from dataclasses import dataclass
from collections.abc import Callable, Hashable

from rocketq.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from rocketq.namesrv.register_body import DataVersion, RegisterBodyError, decode_register_body
from rocketq.namesrv.route_info import RouteInfoManager
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode, error_response, not_supported_response
from rocketq.store.config_files import loads_lenient

log = logging.getLogger(__name__)


@dataclass
class NamesrvContext:
    routes: RouteInfoManager
    kv: KVConfigManager
    now_ms: Callable[[], int]
    controller: object | None = None        # rocketq.namesrv.controller.Controller, when enabled


Processor = Callable[[NamesrvContext, Hashable, RemotingCommand], RemotingCommand]


def json_body(data: object) -> bytes:
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _ok(cmd: RemotingCommand, body: bytes = b"", **ext_fields: object) -> RemotingCommand:
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, ext_fields=ext_fields, body=body)


# -- brokers ----------------------------------------------------------------------------------

def register_broker(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    expected_crc = cmd.get_int("bodyCrc32", 0)
    if expected_crc != 0 and expected_crc != zlib.crc32(cmd.body) & 0x7FFFFFFF:
        log.warning("REGISTER_BROKER from %s: body crc32 does not match bodyCrc32=%d",
                    cmd.get_str("brokerAddr", "?"), expected_crc)
        return error_response(cmd, "crc32 not match")
    try:
        body = decode_register_body(cmd.body, compressed=cmd.get_bool("compressed", False))
    except RegisterBodyError as exc:
        log.warning("REGISTER_BROKER from %s: %s", cmd.get_str("brokerAddr", "?"), exc)
        return error_response(cmd, str(exc))
    result = ctx.routes.register_broker(
        cmd.get_str("clusterName"), cmd.get_str("brokerAddr"), cmd.get_str("brokerName"), cmd.get_int("brokerId"),
        cmd.get_str("haServerAddr", ""), body.wrapper, ctx.now_ms(), conn_key,
        filter_servers=body.filter_server_list, timeout_ms=cmd.get_int("heartbeatTimeoutMillis", None),
        enable_acting_master=cmd.get_bool("enableActingMaster", False))
    order_conf = ctx.kv.list_namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
    return _ok(cmd, json_body({"table": order_conf}) if order_conf else b"",
               haServerAddr=result.ha_server_addr, masterAddr=result.master_addr)


def unregister_broker(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    ctx.routes.unregister_broker(cmd.get_str("clusterName"), cmd.get_str("brokerAddr"),
                                 cmd.get_str("brokerName"), cmd.get_int("brokerId"))
    return _ok(cmd)


def broker_heartbeat(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    ctx.routes.touch(cmd.get_str("brokerAddr"), ctx.now_ms())
    return _ok(cmd)


def query_data_version(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    """Whether the broker's topics changed since its last registration (then it registers in full)."""
    addr = cmd.get_str("brokerAddr")
    theirs = DataVersion.from_json(loads_lenient(cmd.body.decode("utf-8")) if cmd.body else None)
    ours = ctx.routes.data_version_of(addr)
    changed = ours is None or ours != theirs
    if not changed:
        ctx.routes.touch(addr, ctx.now_ms())
    return _ok(cmd, json_body(ours.to_json()) if ours else b"", changed=changed)


def wipe_write_perm(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    name = cmd.get_str("brokerName")
    count = ctx.routes.wipe_write_perm(name)
    log.info("wiped write permission of broker %s on %d topics", name, count)
    return _ok(cmd, wipeTopicCount=count)


# -- routes and topics ------------------------------------------------------------------------

def get_route(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    topic = cmd.get_str("topic")
    route = ctx.routes.route(topic)
    if route is None:
        return RemotingCommand.create_response(
            cmd, ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}")
    return _ok(cmd, json_body(route))


def get_cluster_info(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    return _ok(cmd, json_body(ctx.routes.cluster_info()))


def get_all_topics(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    return _ok(cmd, json_body({"topicList": ctx.routes.all_topics(), "brokerAddr": None}))


def get_topics_by_cluster(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    topics = ctx.routes.topics_by_cluster(cmd.get_str("cluster"))
    return _ok(cmd, json_body({"topicList": topics, "brokerAddr": None}))


def delete_topic(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    topic, cluster = cmd.get_str("topic"), cmd.get_str("clusterName", None) or None
    removed = ctx.routes.delete_topic(topic, cluster)
    log.info("delete topic %s%s: %s", topic, f" on cluster {cluster}" if cluster else "",
             "removed" if removed else "not found")
    return _ok(cmd)


# -- KV config --------------------------------------------------------------------------------

def put_kv(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    ctx.kv.put(cmd.get_str("namespace"), cmd.get_str("key"), cmd.get_str("value"))
    return _ok(cmd)


def get_kv(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    namespace, key = cmd.get_str("namespace"), cmd.get_str("key")
    value = ctx.kv.get(namespace, key)
    if value is None:
        return RemotingCommand.create_response(
            cmd, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}")
    return _ok(cmd, value=value)


def delete_kv(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    ctx.kv.delete(cmd.get_str("namespace"), cmd.get_str("key"))
    return _ok(cmd)


def get_kv_list(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    namespace = cmd.get_str("namespace")
    table = ctx.kv.list_namespace(namespace)
    if table is None:
        return RemotingCommand.create_response(
            cmd, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace}")
    return _ok(cmd, json_body({"table": table}))


PROCESSORS: dict[int, Processor] = {
    RequestCode.REGISTER_BROKER: register_broker,
    RequestCode.UNREGISTER_BROKER: unregister_broker,
    RequestCode.BROKER_HEARTBEAT: broker_heartbeat,
    RequestCode.QUERY_DATA_VERSION: query_data_version,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: wipe_write_perm,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: get_route,
    RequestCode.GET_BROKER_CLUSTER_INFO: get_cluster_info,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: get_all_topics,
    RequestCode.GET_TOPICS_BY_CLUSTER: get_topics_by_cluster,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: delete_topic,
    RequestCode.PUT_KV_CONFIG: put_kv,
    RequestCode.GET_KV_CONFIG: get_kv,
    RequestCode.DELETE_KV_CONFIG: delete_kv,
    RequestCode.GET_KVLIST_BY_NAMESPACE: get_kv_list,
}


def _add_controller_processors() -> None:
    from rocketq.namesrv.controller import PROCESSORS as CONTROLLER_PROCESSORS
    PROCESSORS.update(CONTROLLER_PROCESSORS)


_add_controller_processors()


def dispatch(ctx: NamesrvContext, conn_key: Hashable, cmd: RemotingCommand) -> RemotingCommand:
    processor = PROCESSORS.get(cmd.code)
    if processor is None:
        log.debug("request code %d not supported by the NameServer", cmd.code)
        return not_supported_response(cmd)
    return processor(ctx, conn_key, cmd)
