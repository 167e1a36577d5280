"""Read-only requests answered from the offset table and the store: consumer offsets, queue
bounds, offset by time, and message lookups.

=================================  ====  ==========================================================
request                            code  answer
=================================  ====  ==========================================================
QUERY_CONSUMER_OFFSET                14  ``offset``; a group new to a queue that still starts at 0
                                         gets 0 (``setZeroIfNotFound``), else QUERY_NOT_FOUND
UPDATE_CONSUMER_OFFSET               15  commits ``commitOffset`` for group/topic/queue
GET_MAX_OFFSET / GET_MIN_OFFSET   30/31  ``offset``: the queue's bounds
SEARCH_OFFSET_BY_TIMESTAMP           29  ``offset``: first (LOWER) or last (UPPER) stored at the time
GET_EARLIEST_MSG_STORETIME           32  ``timestamp`` of the queue's first message
QUERY_MESSAGE                        12  the raw records of up to ``maxNum`` (<= 64) messages with
                                         the key in the time range, else QUERY_NOT_FOUND
VIEW_MESSAGE_BY_ID                   33  the raw record at the commitlog ``offset`` (with ACL on: when
                                         the account may SUB its topic)
=================================  ====  ==========================================================
"""

from __future__ import annotations

from rocketq.acl.plain_acl import SUB
from rocketq.broker.admin import ok as _ok
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode


def handlers(broker) -> dict:
    """Request code -> coroutine(conn, cmd), bound to *broker*."""
    table = {
        RequestCode.QUERY_CONSUMER_OFFSET: query_offset, RequestCode.UPDATE_CONSUMER_OFFSET: update_offset,
        RequestCode.GET_MAX_OFFSET: max_offset, RequestCode.GET_MIN_OFFSET: min_offset,
        RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: search_offset, RequestCode.GET_EARLIEST_MSG_STORETIME: earliest_time,
        RequestCode.QUERY_MESSAGE: query_message, RequestCode.VIEW_MESSAGE_BY_ID: view_message,
    }

    def bind(fn):
        async def handle(conn, cmd):
            return fn(broker, cmd)
        return handle
    handlers = {code: bind(fn) for code, fn in table.items()}

    async def view(conn, cmd):
        return view_message(broker, cmd, conn)
    handlers[RequestCode.VIEW_MESSAGE_BY_ID] = view
    return handlers


def query_offset(broker, cmd):
    group, topic, qid = cmd.get_str("consumerGroup"), cmd.get_str("topic"), cmd.get_int("queueId")
    offset = broker.offsets.query(group, topic, qid)
    if offset >= 0:
        return _ok(cmd, {"offset": offset})
    if cmd.get_bool("setZeroIfNotFound", True) and broker.store.min_offset(topic, qid) <= 0:
        return _ok(cmd, {"offset": 0})         # a young queue: a new group starts at the beginning
    return RemotingCommand.create_response(cmd, ResponseCode.QUERY_NOT_FOUND, "Not found, maybe this group "
                                           "consumer boot first")


def update_offset(broker, cmd):
    group, topic, qid = cmd.get_str("consumerGroup"), cmd.get_str("topic"), cmd.get_int("queueId")
    if not broker.offsets.commit(group, topic, qid, cmd.get_int("commitOffset")) and \
            qid in broker.offsets.resets.get(f"{topic}@{group}", ()):
        return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, "Offset has been previously reset")
    return _ok(cmd)


def max_offset(broker, cmd):
    return _ok(cmd, {"offset": broker.store.max_offset(cmd.get_str("topic"), cmd.get_int("queueId"))})


def min_offset(broker, cmd):
    return _ok(cmd, {"offset": broker.store.min_offset(cmd.get_str("topic"), cmd.get_int("queueId"))})


def search_offset(broker, cmd):
    upper = cmd.get_str("boundaryType", "LOWER").upper() == "UPPER"
    return _ok(cmd, {"offset": broker.store.search_offset_by_time(cmd.get_str("topic"), cmd.get_int("queueId"),
                                                                  cmd.get_int("timestamp"), upper=upper)})


def earliest_time(broker, cmd):
    return _ok(cmd, {"timestamp": broker.store.earliest_store_time(cmd.get_str("topic"), cmd.get_int("queueId"))})


def query_message(broker, cmd):
    store = broker.store
    topic, key = cmd.get_str("topic"), cmd.get_str("key")
    found = store.query_by_key(topic, key, max(1, min(cmd.get_int("maxNum", 32), 64)),
                               cmd.get_int("beginTimestamp", 0), cmd.get_int("endTimestamp", 2 ** 62))
    if not found:
        return RemotingCommand.create_response(cmd, ResponseCode.QUERY_NOT_FOUND,
                                               "can not find message, maybe time range not correct")
    last = store.index.query(topic, key, 1, 0, 2 ** 62) if store.index else None
    return _ok(cmd, {"indexLastUpdateTimestamp": last.last_update_timestamp if last else 0,
                     "indexLastUpdatePhyoffset": last.last_update_phy_offset if last else 0},
               b"".join(m.raw for m in found))


def view_message(broker, cmd, conn=None):
    m = broker.store.read_message(cmd.get_int("offset"))
    if m is None:
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR,
                                               f"can not find message by the offset {cmd.get_int('offset')}")
    # the request names no topic: the account must be allowed to read the one the message is in
    denied = broker.authorize_found(conn, cmd, [("topic", m.topic, SUB)])
    return denied if denied is not None else _ok(cmd, body=m.raw)
