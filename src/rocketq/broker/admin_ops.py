"""The admin requests mqadmin needs about who uses a topic or a group, beyond :mod:`rocketq.broker.admin`.

=================================  ====  =====================================================
request                            code  answer
=================================  ====  =====================================================
QUERY_TOPIC_CONSUME_BY_WHO          300  body: GroupList {"groupList"}: groups online on the topic or with
                                         offsets for it
GET_PRODUCER_CONNECTION_LIST        204  body: ProducerConnection {"connectionSet"}; a group with no
                                         producer connected: SYSTEM_ERROR "the producer group[...] not exist"
=================================  ====  =====================================================

(GET_TOPIC_CONFIG is in :mod:`rocketq.broker.admin`; resetting offsets in :mod:`rocketq.broker.offset_reset`;
GET / UPDATE_BROKER_CONFIG in :mod:`rocketq.broker.runtime_config`; CHECK_CLIENT_CONFIG in
:mod:`rocketq.broker.client_config`.)
"""

from __future__ import annotations

import json

from rocketq.broker.admin import _error, ok
from rocketq.remoting import RequestCode, ResponseCode


def handlers(broker) -> dict:
    table = {RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: consumed_by,
             RequestCode.GET_PRODUCER_CONNECTION_LIST: producer_connections}

    def bind(fn):
        async def handle(conn, cmd):
            return fn(broker, cmd)
        return handle
    return {code: bind(fn) for code, fn in table.items()}


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
