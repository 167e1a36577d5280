"""Messages between the v2 protobuf shape and the store's record shape.

Sending: a v2 ``Message`` becomes a :class:`~rocketq.common.message.Message` with RocketMQ's
property names, so remoting consumers read it unchanged: the client's message id becomes
``UNIQ_KEY``, tag ``TAGS``, keys ``KEYS``, the message group ``__SHARDINGKEY``, the delivery time
``TIMER_DELIVER_MS``, the client address ``__BORNHOST``; user properties are kept as they are and
may not use a system property's name.

Delivering: a stored record becomes a v2 ``Message`` the way RocketMQ's proxy fills it
(``GrpcConverter.buildSystemProperties``): message id = ``UNIQ_KEY`` (or the offset id), body
digest MD5 in upper-case hex, message type from the properties, ``delivery_attempt`` =
reconsume times + 1, bodies compressed by remoting producers (sysflag COMPRESSED, zlib) delivered
decompressed, and the user properties = every property that is not a system one.  A message that
went through the timer is DELAY; its ``delivery_timestamp`` is ``TIMER_DELIVER_MS``, or for one a
remoting producer scheduled with ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``, the due time the broker
worked out (``TIMER_OUT_MS``).
"""

from __future__ import annotations

import functools
import hashlib
import zlib

from rocketq.broker.timer_messages import PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_OUT_MS, TIMER_PROPERTIES
from rocketq.common.message import Message
from rocketq.common.msgid import HostAddress
from rocketq.common.sysflag import PROPERTY_UNIQ_KEY, plain_body
from rocketq.grpc_endpoint.protocol import Code, V2Error, pb, timestamp_ms
from rocketq.store.record import StoredMessage

PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
MAX_MESSAGE_GROUP_CHARS = 64
MAX_USER_PROPERTIES = 128

# enum values looked up once: protobuf's enum wrapper attribute access is slow on a hot path
_TRANSACTION, _DELAY, _FIFO, _NORMAL = (pb.MessageType.TRANSACTION, pb.MessageType.DELAY, pb.MessageType.FIFO,
                                        pb.MessageType.NORMAL)
_GZIP, _IDENTITY, _MD5 = pb.Encoding.GZIP, pb.Encoding.IDENTITY, pb.DigestType.MD5

_DELAY_PROPERTIES = (*TIMER_PROPERTIES, PROPERTY_TIMER_OUT_MS)

# RocketMQ's MessageConst names that are not the user's to set (a subset: the ones any code reads).
SYSTEM_PROPERTY_KEYS = frozenset({
    "TAGS", "KEYS", "UNIQ_KEY", "DELAY", "WAIT", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP", "MIN_OFFSET",
    "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG", "CORRECTION_FLAG", "MQ2_FLAG",
    "RECONSUME_TIME", "MSG_REGION", "TRACE_ON", "MAX_RECONSUME_TIMES", "CONSUME_START_TIME",
    "TRANSACTION_CHECK_TIMES", "CHECK_IMMUNITY_TIME_IN_SECONDS", "INSTANCE_ID", "CORRELATION_ID",
    "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "CLUSTER", "RETRY_TOPIC", "DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID",
    "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "SHARDING_KEY",
    PROPERTY_SHARDING_KEY, PROPERTY_BORN_HOST, "__transactionId__", PROPERTY_TRACE_CONTEXT,
})


def v2_to_message(msg: pb.Message, *, topic: str, queue_id: int, born_host: HostAddress,
                  max_body_bytes: int) -> Message:
    """The store message for one v2 message; raises :class:`V2Error` for what the proxy refuses."""
    sp = msg.system_properties
    body = _plain_body(msg, max_body_bytes)
    if not body:
        raise V2Error(Code.MESSAGE_BODY_EMPTY, f"message {sp.message_id!r} to topic {topic!r} has an empty body")
    if len(body) > max_body_bytes:
        raise V2Error(Code.MESSAGE_BODY_TOO_LARGE, f"message {sp.message_id!r}: body of {len(body)} bytes or more "
                                                   f"is over the limit of {max_body_bytes} bytes")
    if not sp.message_id:
        raise V2Error(Code.ILLEGAL_MESSAGE_ID, f"a message to topic {topic!r} has no message id")
    props = _user_properties(msg)
    props[PROPERTY_UNIQ_KEY] = sp.message_id
    tag = sp.tag if sp.HasField("tag") else None
    if tag is not None and (not tag.strip() or "|" in tag or _has_separator(tag)):
        raise V2Error(Code.ILLEGAL_MESSAGE_TAG, f"message {sp.message_id!r}: tag {tag!r} is blank or holds '|'")
    for key in sp.keys:
        if not key.strip() or _has_separator(key):
            raise V2Error(Code.ILLEGAL_MESSAGE_KEY, f"message {sp.message_id!r}: key {key!r} is blank")
    if sp.HasField("message_group"):
        group = sp.message_group
        if not group.strip() or len(group) > MAX_MESSAGE_GROUP_CHARS or _has_separator(group):
            raise V2Error(Code.ILLEGAL_MESSAGE_GROUP, f"message {sp.message_id!r}: message group {group!r} is blank "
                                                      f"or longer than {MAX_MESSAGE_GROUP_CHARS} characters")
        props[PROPERTY_SHARDING_KEY] = group
    if sp.born_host:
        props[PROPERTY_BORN_HOST] = sp.born_host
    if sp.HasField("trace_context") and sp.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = sp.trace_context
    born_ms = timestamp_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else 0
    return Message(topic=topic, body=body, queue_id=queue_id, tags=tag, keys=list(sp.keys) or None,
                   properties=props, born_timestamp=born_ms, born_host=born_host)


def _plain_body(msg: pb.Message, limit: int) -> bytes:
    """The body, gunzipped when labelled GZIP - at most *limit* + 1 bytes of it (a small gzip can
    stand for a huge body: decompressing stops as soon as the body is known to be too large)."""
    if msg.system_properties.body_encoding != _GZIP:
        return msg.body
    data, out = msg.body, bytearray()
    try:
        while data:                                 # one gzip member after the other, as gzip.decompress
            member = zlib.decompressobj(wbits=31)
            out += member.decompress(data, limit + 1 - len(out))
            if len(out) > limit:
                break
            if not member.eof:
                raise EOFError("the gzip data ends early")
            data = member.unused_data
    except (OSError, EOFError, zlib.error) as exc:
        raise V2Error(Code.MESSAGE_CORRUPTED, f"message {msg.system_properties.message_id!r}: body is labelled GZIP "
                                              f"but does not decompress: {exc}") from None
    return bytes(out)


def _has_separator(text: str) -> bool:
    return "\x01" in text or "\x02" in text


def _user_properties(msg: pb.Message) -> dict[str, str]:
    if len(msg.user_properties) > MAX_USER_PROPERTIES:
        raise V2Error(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"message {msg.system_properties.message_id!r} has "
                                                         f"{len(msg.user_properties)} user properties, over "
                                                         f"{MAX_USER_PROPERTIES}")
    props = {}
    for k, v in msg.user_properties.items():
        if not k or k in SYSTEM_PROPERTY_KEYS or _has_separator(k) or _has_separator(v):
            raise V2Error(Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                          f"message {msg.system_properties.message_id!r}: user property {k!r} is empty, holds a "
                          "separator, or is a system property name")
        props[k] = v
    return props


def message_type_of(props: dict[str, str]) -> int:
    if props.get("TRAN_MSG") == "true":
        return _TRANSACTION
    if any(name in props for name in _DELAY_PROPERTIES) or props.get("DELAY", "0") not in ("", "0"):
        return _DELAY
    if PROPERTY_SHARDING_KEY in props:
        return _FIFO
    return _NORMAL


def stored_to_v2(m: StoredMessage, *, topic: str, namespace: str = "", receipt_handle: str | None = None,
                 invisible_ms: int | None = None, attempt: int | None = None) -> pb.Message:
    """The v2 message a consumer receives (or a producer is asked about, without a receipt handle)."""
    return pb.Message(**v2_fields(m, topic=topic, namespace=namespace, receipt_handle=receipt_handle,
                                  invisible_ms=invisible_ms, attempt=attempt))


def v2_fields(m: StoredMessage, *, topic: str, namespace: str = "", receipt_handle: str | None = None,
              invisible_ms: int | None = None, attempt: int | None = None) -> dict:
    """:func:`stored_to_v2`'s message as the dict protobuf builds it from, nested messages as dicts
    too: a response made from it (``ReceiveMessageResponse(message=...)``) builds the message once,
    in place, instead of building six message objects and copying them into it."""
    props = m.properties
    body = plain_body(m.body, m.sys_flag)
    sp = {"keys": m.keys, "message_id": props.get(PROPERTY_UNIQ_KEY) or m.msg_id,
          "body_digest": {"type": _MD5, "checksum": hashlib.md5(body).hexdigest().upper()},
          "body_encoding": _IDENTITY, "message_type": message_type_of(props),
          "born_timestamp": _ms_timestamp(m.born_timestamp),
          "born_host": props.get(PROPERTY_BORN_HOST) or _ip(m.born_host),
          "store_timestamp": _ms_timestamp(m.store_timestamp), "store_host": _host_port(m.store_host),
          "queue_id": m.queue_id, "queue_offset": m.queue_offset,
          "delivery_attempt": attempt if attempt is not None else m.reconsume_times + 1}
    if m.tags is not None:
        sp["tag"] = m.tags
    due = props.get(PROPERTY_TIMER_DELIVER_MS) or props.get(PROPERTY_TIMER_OUT_MS)
    if due is not None and due.isdigit():
        sp["delivery_timestamp"] = _ms_timestamp(int(due))
    if PROPERTY_SHARDING_KEY in props:
        sp["message_group"] = props[PROPERTY_SHARDING_KEY]
    if PROPERTY_TRACE_CONTEXT in props:
        sp["trace_context"] = props[PROPERTY_TRACE_CONTEXT]
    if receipt_handle is not None:
        sp["receipt_handle"] = receipt_handle
    if invisible_ms is not None:
        sp["invisible_duration"] = {"seconds": invisible_ms // 1000, "nanos": (invisible_ms % 1000) * 1_000_000}
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_KEYS}
    return {"topic": {"name": topic, "resource_namespace": namespace}, "user_properties": user,
            "system_properties": sp, "body": body}


def _ms_timestamp(ms: int) -> dict:
    """A Timestamp's fields (:func:`~rocketq.grpc_endpoint.protocol.ms_timestamp`) as a dict."""
    return {"seconds": ms // 1000, "nanos": (ms % 1000) * 1_000_000}


@functools.lru_cache(maxsize=1024)
def _host_port(host: HostAddress) -> str:
    """``str(host)`` (formatting through ipaddress costs more than the rest of a delivery)."""
    return str(host)


@functools.lru_cache(maxsize=1024)
def _ip(host: HostAddress) -> str:
    text = str(host)
    return text.rpartition(":")[0].strip("[]")
