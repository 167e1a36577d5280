"""QueryRoute and QueryAssignment: the topic's queues on this broker, reached at this endpoint.

Every queue names this endpoint's own address as its broker's endpoints (rocketq has no separate
proxy: the broker serves gRPC itself).  Queue permissions follow the proxy
(``RouteActivity.genMessageQueueFromQueueData``): with R read and W write queues, ids
``0 .. min(R, W) - 1`` are READ_WRITE and the surplus ones READ or WRITE only, so queue 0 is always
read-write when both counts are positive.  The accepted message types come from the topic's
``message.type`` attribute (RocketMQ 5 writes it ``+message.type=FIFO``); a topic without one
accepts every type, like the proxy's MIXED.

QueryAssignment gives one assignment with queue id -1 ("any queue": receives pop across all
readable queues) for a normal group, and one per readable queue for a FIFO group.
"""

from __future__ import annotations

import ipaddress

from rocketq.broker.topic_config import PERM_READ, PERM_WRITE, TopicConfig
from rocketq.common.validation import topic_error
from rocketq.grpc_endpoint.protocol import Code, V2Error, pb

ALL_TYPES = (pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION)
_TYPE_NAMES = {"NORMAL": pb.MessageType.NORMAL, "FIFO": pb.MessageType.FIFO, "DELAY": pb.MessageType.DELAY,
               "TRANSACTION": pb.MessageType.TRANSACTION}
MESSAGE_TYPE_ATTRIBUTE = "message.type"


def endpoints_of(host: str, port: int) -> pb.Endpoints:
    try:
        ip = ipaddress.ip_address(host)
        scheme = pb.AddressScheme.IPv4 if ip.version == 4 else pb.AddressScheme.IPv6
    except ValueError:
        scheme = pb.AddressScheme.DOMAIN_NAME
    return pb.Endpoints(scheme=scheme, addresses=[pb.Address(host=host, port=port)])


def accepted_types(tc: TopicConfig) -> tuple[int, ...]:
    attrs = tc.attributes or {}
    value = str(attrs.get(MESSAGE_TYPE_ATTRIBUTE) or attrs.get("+" + MESSAGE_TYPE_ATTRIBUTE) or "").upper()
    return (_TYPE_NAMES[value],) if value in _TYPE_NAMES else ALL_TYPES


def topic_config(broker, topic: str, *, create: bool) -> TopicConfig:
    """The topic's config; unknown topics are created when the broker auto-creates topics and *create*."""
    err = topic_error(topic)
    if err:
        raise V2Error(Code.ILLEGAL_TOPIC, err)
    tc = broker.topics.get(topic)
    if tc is None and create:
        tc = broker.topics.create_in_send(topic, queue_nums=broker.settings.default_topic_queue_nums)
    if tc is None:
        raise V2Error(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist on broker "
                                            f"{broker.settings.broker_name}")
    return tc


def message_queues(broker, tc: TopicConfig, topic: pb.Resource, endpoints: pb.Endpoints) -> list[pb.MessageQueue]:
    b = pb.Broker(name=broker.settings.broker_name, id=broker.settings.broker_id, endpoints=endpoints)
    types = accepted_types(tc)
    readable = tc.read_queue_nums if tc.perm & PERM_READ else 0
    writable = tc.write_queue_nums if tc.perm & PERM_WRITE else 0
    out = []
    for qid in range(max(readable, writable)):
        if qid < min(readable, writable):
            perm = pb.Permission.READ_WRITE
        else:
            perm = pb.Permission.READ if qid < readable else pb.Permission.WRITE
        out.append(pb.MessageQueue(topic=topic, id=qid, permission=perm, broker=b, accept_message_types=types))
    return out


def assignments(broker, tc: TopicConfig, topic: pb.Resource, endpoints: pb.Endpoints, *,
                fifo: bool) -> list[pb.Assignment]:
    readable = [q for q in message_queues(broker, tc, topic, endpoints)
                if q.permission in (pb.Permission.READ, pb.Permission.READ_WRITE)]
    if not readable:
        raise V2Error(Code.FORBIDDEN, f"topic {tc.topic_name!r} has no readable queue")
    if fifo:
        return [pb.Assignment(message_queue=q) for q in readable]
    any_queue = pb.MessageQueue()
    any_queue.CopyFrom(readable[0])
    any_queue.id = -1
    return [pb.Assignment(message_queue=any_queue)]
