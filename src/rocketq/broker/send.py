"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320) onto the store.

Header fields (RocketMQ ``SendMessageRequestHeader``; V2 uses one-letter names)::

    producerGroup a | topic b | defaultTopic c | defaultTopicQueueNums d | queueId e | sysFlag f |
    bornTimestamp g | flag h | properties i | reconsumeTimes j | unitMode k | maxReconsumeTimes l | batch m

Batch body (``MessageDecoder.encodeMessages``), one record per message, big-endian::

    int32 totalSize | int32 magic (0) | int32 bodyCRC (0) | int32 flag | int32 bodyLen + body |
    int16 propertiesLen + properties

The topic is created on first use from ``defaultTopic`` when auto-creation is on; a queue id
beyond the topic's write queues is taken modulo their number, as RocketMQ does.  Store statuses
map one-to-one onto response codes; the response carries the offset message id (a batch: the
ids joined with commas), the queue id and the queue offset.
"""

from __future__ import annotations

import struct

from rocketq.common.message import Message
from rocketq.common.msgid import HostAddress
from rocketq.common.properties import decode_properties
from rocketq.common.sysflag import PROPERTY_DELAY
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
_BATCH_HEAD = struct.Struct(">iiiii")


def send_header(cmd: RemotingCommand) -> RemotingCommand:
    """Normalise a V2 header to V1 field names in place (V1 requests pass through)."""
    if "b" in cmd.ext_fields and "topic" not in cmd.ext_fields:
        cmd.ext_fields = {V2_NAMES.get(k, k): v for k, v in cmd.ext_fields.items()}
    return cmd


def message_from_header(cmd: RemotingCommand, body: bytes, born_host: HostAddress, *, queue_id: int,
                        props_text: str | None = None) -> Message:
    props = decode_properties(cmd.get_str("properties", "") if props_text is None else props_text)
    delay = props.get(PROPERTY_DELAY, "")
    return Message(topic=cmd.get_str("topic"), body=body, queue_id=queue_id, properties=props,
                   flag=cmd.get_int("flag", 0), sys_flag=cmd.get_int("sysFlag", 0),
                   born_timestamp=cmd.get_int("bornTimestamp", 0), born_host=born_host,
                   reconsume_times=cmd.get_int("reconsumeTimes", 0),
                   delay_level=int(delay) if delay.isdigit() else 0)


def decode_batch(body: bytes) -> list[tuple[int, bytes, str]]:
    """(flag, body, properties text) per message of a batch body; raises RemotingCommandError."""
    out = []
    pos, end = 0, len(body)
    while pos < end:
        if end - pos < _BATCH_HEAD.size:
            raise RemotingCommandError("body", f"batch record at byte {pos} is truncated")
        total, _magic, _crc, flag, blen = _BATCH_HEAD.unpack_from(body, pos)
        if total < _BATCH_HEAD.size + 2 or pos + total > end or blen < 0 or _BATCH_HEAD.size + blen + 2 > total:
            raise RemotingCommandError("body", f"batch record at byte {pos} has inconsistent lengths")
        p = pos + _BATCH_HEAD.size
        msg_body = body[p:p + blen]
        plen = int.from_bytes(body[p + blen:p + blen + 2], "big")
        if _BATCH_HEAD.size + blen + 2 + plen != total:
            raise RemotingCommandError("body", f"batch record at byte {pos}: properties length does not fit")
        out.append((flag, msg_body, body[p + blen + 2:p + blen + 2 + plen].decode()))
        pos += total
    return out


def encode_batch(messages: list[tuple[int, bytes, str]]) -> bytes:
    """The client side of :func:`decode_batch` (used by rocketq's client and tests)."""
    parts = []
    for flag, body, props in messages:
        p = props.encode()
        parts.append(_BATCH_HEAD.pack(_BATCH_HEAD.size + len(body) + 2 + len(p), 0, 0, flag, len(body)) + body
                     + len(p).to_bytes(2, "big") + p)
    return b"".join(parts)
