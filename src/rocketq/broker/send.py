"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) onto the store.

Header fields (RocketMQ ``SendMessageRequestHeader``; V2 uses one-letter names)::

    producerGroup a | topic b | defaultTopic c | defaultTopicQueueNums d | queueId e | sysFlag f |
    bornTimestamp g | flag h | properties i | reconsumeTimes j | unitMode k | maxReconsumeTimes l | batch m

Batch body (``MessageDecoder.encodeMessages``), one record per message, big-endian::

    int32 totalSize | int32 magic (0) | int32 bodyCRC (0) | int32 flag | int32 bodyLen + body |
    int16 propertiesLen + properties

The topic is created on first use from ``defaultTopic`` when auto-creation is on; queue id -1
picks a writable queue at random, and a queue id the topic does not have is refused with
SYSTEM_ERROR, as RocketMQ 5 does (its client then tries another queue).  Store statuses
map one-to-one onto response codes; the response carries the offset message id (a batch: the
ids joined with commas), the queue id and the queue offset.

A single message (not a batch, not a transaction's half, as in RocketMQ) carrying
``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC`` or ``TIMER_DELAY_MS`` goes to the broker's timer
(:func:`route_timer`, rules in :mod:`rocketq.broker.timer_messages`): parked in
``rmq_sys_wheel_timer`` until due, and its response carries a ``recallHandle`` (RocketMQ 5.3's
``SendMessageResponseHeader`` field) that gRPC RecallMessage takes.  Refusals are RocketMQ's:
MESSAGE_ILLEGAL for a bad value or a delay over ``timerMaxDelaySec``, SYSTEM_ERROR when
``timerWheelEnable`` is off.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from itertools import repeat
from typing import NamedTuple

from rocketq.broker.timer_messages import (
    TimerMessageIllegal,
    TimerNotEnabled,
    TimerPolicy,
    has_timer_properties,
    park,
    recall_handle,
    timer_due_ms,
)
from rocketq.broker.transactions import is_half, to_half
from rocketq.common.message import Message
from rocketq.common.msgid import HostAddress
from rocketq.common.properties import decode_properties
from rocketq.common.sysflag import PROPERTY_DELAY
from rocketq.common.validation import NOT_ALLOWED_SEND_TOPICS
from rocketq.remoting import RemotingCommand, RemotingCommandError, ResponseCode
from rocketq.store.results import PutStatus

V2_NAMES = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
            "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes",
            "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch", "n": "brokerName"}

STATUS_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS, PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.CREATE_MAPPED_FILE_FAILED: ResponseCode.SYSTEM_ERROR, PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL, PutStatus.OS_PAGE_CACHE_BUSY: ResponseCode.SYSTEM_BUSY,
    PutStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
}
_U16 = struct.Struct(">H")
_BATCH_HEAD = struct.Struct(">iiiii")


PROPERTY_SHARDING_KEY = "__SHARDINGKEY"          # a FIFO message's group (RocketMQ 5 MessageGroup)
_PARKED_KINDS = {"RMQ_SYS_TRANS_HALF_TOPIC": "transaction", "SCHEDULE_TOPIC_XXXX": "delay",
                 "rmq_sys_wheel_timer": "delay"}


def message_kind(topic: str, stored: Message) -> str:
    """RocketMQ's message_type metrics label of a message sent to *topic* and stored as *stored*:
    parked in the half, schedule or timer topic, FIFO by its sharding key, else normal."""
    if stored.topic != topic:
        return _PARKED_KINDS.get(stored.topic, "normal")
    return "fifo" if PROPERTY_SHARDING_KEY in stored.properties else "normal"


def send_header(cmd: RemotingCommand) -> RemotingCommand:
    """Normalise a V2 header to V1 field names in place (V1 requests pass through)."""
    if "b" in cmd.ext_fields and "topic" not in cmd.ext_fields:
        cmd.ext_fields = {V2_NAMES.get(k, k): v for k, v in cmd.ext_fields.items()}
    return cmd


def topic_for_send(broker, cmd: RemotingCommand):
    """:func:`topic_config_for_send` of the topic named in *cmd*'s (V1-named) header."""
    return topic_config_for_send(broker, cmd, cmd.get_str("topic"), cmd.get_str("defaultTopic", "TBW102"),
                                 cmd.get_int("defaultTopicQueueNums", 4))


def topic_config_for_send(broker, cmd: RemotingCommand, topic: str, default_topic: str, default_queue_nums: int):
    """The ``TopicConfig`` of the topic a send names (created from *default_topic* when auto-creation
    is on), or the answer refusing the send."""
    if topic in NOT_ALLOWED_SEND_TOPICS:      # the broker's own (schedule, half, op ...) topics
        return RemotingCommand.create_response(cmd, ResponseCode.NO_PERMISSION,
                                               f"Sending message to topic[{topic}] is forbidden.")
    tc = broker.topics.get(topic) or broker.topics.create_in_send(topic, default_topic, default_queue_nums)
    if tc is None:
        return RemotingCommand.create_response(cmd, ResponseCode.TOPIC_NOT_EXIST,
                                               f"topic[{topic}] not exist, apply first please!")
    if not tc.is_writable():
        return RemotingCommand.create_response(cmd, ResponseCode.NO_PERMISSION,
                                               f"the topic[{topic}] sending is forbidden")
    return tc


SEND_WAITS_FOR_ROUTE_S = 2.0   # under the Java producer's 3 s send timeout: a hung NameServer delays, never fails, a send


def unpublished(broker):
    """The NameServer registrar while a topic change is not registered yet, else None.  A send waits for
    it before it is answered, as RocketMQ's does after its createTopicInSendMessageMethod created the
    topic, so a consumer started right after the first send finds the route.  Any send in that window
    waits (a few milliseconds with a NameServer that answers): then an answered send means every topic
    created before it is at the NameServers."""
    registrar = broker.registrar
    return registrar if registrar is not None and registrar.behind else None


def queue_for_send(cmd: RemotingCommand, qid: int, tc, conn) -> int | RemotingCommand:
    """Queue *qid* as asked for, a random writable one for -1, or Java's SYSTEM_ERROR for a queue the topic
    does not have (a producer whose route is older than a shrunk topic): its client then tries another queue."""
    if qid < 0:
        return random.randrange(tc.write_queue_nums)
    if qid >= max(tc.write_queue_nums, tc.read_queue_nums):
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, (
            f"request queueId[{qid}] is illegal, TopicConfig [topicName={tc.topic_name}, readQueueNums="
            f"{tc.read_queue_nums}, writeQueueNums={tc.write_queue_nums}] Producer: {getattr(conn, 'peer', '')}"))
    return qid


def host_of(conn) -> HostAddress:
    """The client's address as born host (parsed once per connection)."""
    host = conn.context.get("born_host")
    if host is None:
        try:
            host = HostAddress.parse(conn.peer)
        except (ValueError, AttributeError):
            host = HostAddress(b"\x7f\x00\x00\x01", 0)
        conn.context["born_host"] = host
    return host


def message_from_header(cmd: RemotingCommand, body: bytes, born_host: HostAddress, *, queue_id: int,
                        props_text: str | None = None) -> Message:
    props = decode_properties(cmd.get_str("properties", "") if props_text is None else props_text)
    delay = props.get(PROPERTY_DELAY, "")
    return Message(topic=cmd.get_str("topic"), body=body, queue_id=queue_id, properties=props,
                   flag=cmd.get_int("flag", 0), sys_flag=cmd.get_int("sysFlag", 0),
                   born_timestamp=cmd.get_int("bornTimestamp", 0), born_host=born_host,
                   reconsume_times=cmd.get_int("reconsumeTimes", 0),
                   delay_level=int(delay) if delay.isdigit() else 0)


@dataclass(slots=True)
class TimerRouting:
    """What one sent message becomes with respect to the timer."""

    message: Message
    recall_handle: str | None = None            # parked: the handle its response carries
    refusal: tuple[int, str] | None = None      # refused: (response code, remark)


def route_single(msg: Message, policy: TimerPolicy, *, broker_name: str, clock_ms) -> TimerRouting:
    """Where one sent message is stored: a transaction's half in the half topic, a timer message in
    the timer topic (:func:`route_timer`), anything else as it is.  *clock_ms* is read only for a
    message with timer properties."""
    if is_half(msg):
        return TimerRouting(to_half(msg))
    if not has_timer_properties(msg):
        return TimerRouting(msg)
    return route_timer(msg, policy, broker_name=broker_name, now_ms=clock_ms())


def route_timer(msg: Message, policy: TimerPolicy, *, broker_name: str, now_ms: int) -> TimerRouting:
    """Park *msg* in the timer when its TIMER_* properties ask for a later delivery."""
    try:
        due = timer_due_ms(msg, policy, now_ms=now_ms)
    except TimerNotEnabled as exc:
        return TimerRouting(msg, refusal=(ResponseCode.SYSTEM_ERROR, str(exc)))
    except TimerMessageIllegal as exc:
        return TimerRouting(msg, refusal=(ResponseCode.MESSAGE_ILLEGAL, str(exc)))
    if due is None:
        return TimerRouting(msg)
    parked = park(msg, due)
    return TimerRouting(parked, recall_handle=recall_handle(parked, broker_name))


class BatchColumns(NamedTuple):
    flags: list[int]
    bodies: list[bytes]
    texts: list[str]            # properties, decoded
    props: list[bytes]          # the same, as they came


def decode_batch(body: bytes) -> BatchColumns:
    """The flags, bodies and properties of a batch body's messages; raises RemotingCommandError."""
    flags, bodies, props = [], [], []
    pos, end = 0, len(body)
    head, unpack_head, unpack_u16 = _BATCH_HEAD.size, _BATCH_HEAD.unpack_from, _U16.unpack_from
    while pos < end:
        if end - pos < head:
            raise RemotingCommandError("body", f"batch record at byte {pos} is truncated")
        total, _magic, _crc, flag, blen = unpack_head(body, pos)
        if total < head + 2 or pos + total > end or blen < 0 or head + blen + 2 > total:
            raise RemotingCommandError("body", f"batch record at byte {pos} has inconsistent lengths")
        p = pos + head + blen
        if head + blen + 2 + unpack_u16(body, p)[0] != total:
            raise RemotingCommandError("body", f"batch record at byte {pos}: properties length does not fit")
        flags.append(flag)
        bodies.append(body[pos + head:p])
        props.append(body[p + 2:pos + total])
        pos += total
    try:
        texts = list(map(bytes.decode, props))
    except UnicodeDecodeError:
        bad = next(i for i, p in enumerate(props) if not _is_utf8(p))
        raise RemotingCommandError("body", f"batch record {bad}: properties are not UTF-8") from None
    return BatchColumns(flags, bodies, texts, props)


def terminate_properties(body: bytes) -> bytes | None:
    """*body* with a final ``\x02`` added to every record's properties that lacks it, or None when no
    record lacks it (or the body is no batch).

    RocketMQ 4.x clients (``MessageDecoder.messageProperties2String`` up to 4.9.8) drop the separator
    after the last property; Java's broker reads both forms (and adds the separator itself when it
    appends the batch's own properties). The native batch parser takes only whole pairs, so the broker
    rewrites such a body here, once per batch, before it parses it again."""
    try:
        records = decode_batch(body)
    except RemotingCommandError:
        return None
    texts = [t if not t or t.endswith("\x02") else t + "\x02" for t in records.texts]
    if texts == records.texts:
        return None
    return encode_batch(list(zip(records.flags, records.bodies, texts)))


def batch_messages(records: BatchColumns, *, topic: str, queue_id: int, sys_flag: int, born_timestamp: int,
                   born_host: HostAddress, reconsume_times: int) -> list[Message]:
    """A decoded batch as messages, for the store's general path (a message with a delay level)."""
    out = []
    for flag, body, text in zip(records.flags, records.bodies, records.texts):
        props = decode_properties(text)
        delay = props.get(PROPERTY_DELAY, "")
        out.append(Message(topic=topic, body=body, queue_id=queue_id, properties=props, flag=flag, sys_flag=sys_flag,
                           born_timestamp=born_timestamp, born_host=born_host, reconsume_times=reconsume_times,
                           delay_level=int(delay) if delay.isdigit() else 0))
    return out


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def encode_batch(messages: list[tuple[int, bytes, str]]) -> bytes:
    """The client side of :func:`decode_batch` (used by rocketq's client and tests)."""
    if not messages:
        return b""
    flags, bodies, texts = zip(*messages)
    props = [t.encode() for t in texts]
    blens, plens = list(map(len, bodies)), list(map(len, props))
    sizes = [_BATCH_HEAD.size + b + 2 + p for b, p in zip(blens, plens)]
    n = len(bodies)
    parts: list = [b""] * (4 * n)
    parts[0::4] = map(_BATCH_HEAD.pack, sizes, repeat(0, n), repeat(0, n), flags, blens)
    parts[1::4] = bodies
    parts[2::4] = map(_U16.pack, plens)
    parts[3::4] = props
    return b"".join(parts)
