"""QueryRoute and QueryAssignment: the topic's queues on every broker group, each reached at its group's endpoint.

Every queue names its own group's gRPC endpoint (rocketq has no separate proxy: each broker serves
gRPC itself; which groups and endpoints: :mod:`~rocketq.grpc_endpoint.cluster_route`).  Queue permissions follow the proxy
(``RouteActivity.genMessageQueueFromQueueData``): with R read and W write queues, ids
``0 .. min(R, W) - 1`` are READ_WRITE and the surplus ones READ or WRITE only, so queue 0 is always
read-write when both counts are positive.  The accepted message types come from the topic's
``message.type`` attribute (RocketMQ 5 writes it ``+message.type=FIFO``); a topic without one
accepts every type, like the proxy's MIXED.

QueryAssignment gives, per broker group, one assignment with queue id -1 ("any queue": receives pop
across all that group's readable queues) for a normal group, and one per readable queue for a FIFO
group.
"""

from __future__ import annotations

import ipaddress

from rocketq.broker.topic_config import TopicConfig
from rocketq.grpc_endpoint.cluster_route import GroupQueues, queue_permissions
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


def message_queues(groups: list[GroupQueues], types: tuple[int, ...], topic: pb.Resource) -> list[pb.MessageQueue]:
    """The queues of every group (:mod:`~rocketq.grpc_endpoint.cluster_route`), each naming its group's endpoint."""
    out = []
    for g in groups:
        b = pb.Broker(name=g.broker_name, id=0, endpoints=g.endpoints)
        out += [pb.MessageQueue(topic=topic, id=qid, permission=perm, broker=b, accept_message_types=types)
                for qid, perm in enumerate(queue_permissions(g.read_queue_nums, g.write_queue_nums, g.perm))]
    return out


def assignments(groups: list[GroupQueues], types: tuple[int, ...], topic: pb.Resource, *,
                fifo: bool) -> list[pb.Assignment]:
    """FIFO: every readable queue of every group; otherwise one "any queue" (id -1) per group with one."""
    readable = [q for q in message_queues(groups, types, topic)
                if q.permission in (pb.Permission.READ, pb.Permission.READ_WRITE)]
    if not readable:
        raise V2Error(Code.FORBIDDEN, f"topic {topic.name!r} has no readable queue")
    if fifo:
        return [pb.Assignment(message_queue=q) for q in readable]
    out, seen = [], set()
    for q in readable:
        if q.broker.name not in seen:
            seen.add(q.broker.name)
            any_queue = pb.MessageQueue()
            any_queue.CopyFrom(q)
            any_queue.id = -1
            out.append(pb.Assignment(message_queue=any_queue))
    return out
