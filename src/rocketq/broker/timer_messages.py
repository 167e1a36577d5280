"""Timer messages: which sends the timer takes, when they are due, and recall handles.

A RocketMQ 5 broker delivers a single message at any time when it carries one of these properties
(``MessageConst``), from any producer, remoting or gRPC:

=====================  ====================================================
``TIMER_DELIVER_MS``   due time, ms since the epoch (gRPC DELAY messages)
``TIMER_DELAY_SEC``    due this many seconds after the broker received it
``TIMER_DELAY_MS``     due this many milliseconds after the broker received it
=====================  ====================================================

The rules are RocketMQ's (``broker/.../util/HookUtils.java#checkIfTimerMessage`` and
``#transformTimerMessage``, codes from ``AbstractSendMessageProcessor#handlePutMessageResult``):

* a message with a delay level (``DELAY`` > 0) keeps its level; its timer properties are dropped;
* one already in the timer topic, or carrying ``TIMER_OUT_MS`` (parked once already), is not
  parked again;
* ``TIMER_DELAY_SEC`` wins over ``TIMER_DELAY_MS``, which wins over ``TIMER_DELIVER_MS``; a value
  that is not an integer is illegal (``WHEEL_TIMER_MSG_ILLEGAL``, answered MESSAGE_ILLEGAL);
* due now or earlier: stored under its own topic at once (a recall marker then is illegal);
* due more than ``timerMaxDelaySec`` (3 days) ahead: illegal, MESSAGE_ILLEGAL;
* ``timerWheelEnable=false``: refused, SYSTEM_ERROR (``WHEEL_TIMER_NOT_ENABLE``);
* otherwise parked: ``TIMER_OUT_MS`` = the due time, ``REAL_TOPIC`` / ``REAL_QID`` = where it goes,
  stored under ``rmq_sys_wheel_timer`` queue 0 for :class:`rocketq.broker.timer.Timer`.

One difference on purpose: RocketMQ rounds the due time down to ``timerPrecisionMs`` (1 s by
default, so a message may come up to a second early); rocketq keeps the millisecond and never
delivers early.

Recall (RocketMQ 5.3, ``common/.../producer/RecallMessageHandle.java``,
``broker/.../processor/RecallMessageProcessor.java``): the send result of a parked message carries
a handle, URL-safe base64 of ``"v1 <topic> <brokerName> <due ms> <UNIQ_KEY>"``.  Recalling it
stores a marker in the timer topic whose ``TIMER_DEL_UNIQKEY`` is ``"<topic>+<UNIQ_KEY>"``
(``TimerMessageStore.buildDeleteKey``); the timer then drops the message with that key instead of
delivering it.  RocketMQ's handle holds ``TIMER_OUT_MS + 1`` (its floored due time, plus one);
rocketq's holds the due time itself.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from rocketq.common.message import Message
from rocketq.common.msgid import HostAddress
from rocketq.common.sysflag import PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, PROPERTY_UNIQ_KEY

TIMER_TOPIC = "rmq_sys_wheel_timer"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
TIMER_PROPERTIES = (PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS, PROPERTY_TIMER_DELIVER_MS)
_TIMER_PROPERTY_SET = frozenset(TIMER_PROPERTIES)
DEFAULT_MAX_DELAY_SEC = 3 * 24 * 3600           # timerMaxDelaySec
RECALL_TAG = "_RECALL_TAG_"
_HANDLE_VERSION = "v1"


class TimerRefused(Exception):
    """A timer message the broker does not take; the text is RocketMQ's remark."""


class TimerMessageIllegal(TimerRefused):
    """WHEEL_TIMER_MSG_ILLEGAL: a bad value, or due further ahead than the maximum delay."""


class TimerNotEnabled(TimerRefused):
    """WHEEL_TIMER_NOT_ENABLE: ``timerWheelEnable`` is off."""


@dataclass(frozen=True, slots=True)
class TimerPolicy:
    enabled: bool = True                          # timerWheelEnable
    max_delay_ms: int = DEFAULT_MAX_DELAY_SEC * 1000  # timerMaxDelaySec, in ms

    def __post_init__(self) -> None:
        if self.max_delay_ms <= 0:
            raise ValueError(f"timerMaxDelaySec must be positive, got {self.max_delay_ms // 1000}")


def has_timer_properties(msg: Message) -> bool:
    """Whether *msg* names a delivery time at all (the cheap test every send makes)."""
    return not _TIMER_PROPERTY_SET.isdisjoint(msg.properties)


def timer_due_ms(msg: Message, policy: TimerPolicy, *, now_ms: int) -> int | None:
    """The due time when *msg* must be parked in the timer, else None (not a timer message, or due
    already: stored as it is).  Raises :class:`TimerRefused` for what RocketMQ refuses."""
    props = msg.properties
    if not has_timer_properties(msg):
        return None
    if msg.delay_level > 0:
        for name in TIMER_PROPERTIES:
            props.pop(name, None)                   # the delay level wins
        return None
    if msg.topic == TIMER_TOPIC or PROPERTY_TIMER_OUT_MS in props:
        return None
    if not policy.enabled:
        raise TimerNotEnabled("accurate timer message is not enabled, timerWheelEnable is false")
    due = _due_from(props, now_ms)
    if due <= now_ms:
        if PROPERTY_TIMER_DEL_UNIQKEY in props:
            raise TimerMessageIllegal(_illegal_remark(policy))
        return None
    if due - now_ms > policy.max_delay_ms:
        raise TimerMessageIllegal(_illegal_remark(policy))
    return due


def _due_from(props: dict[str, str], now_ms: int) -> int:
    try:
        if PROPERTY_TIMER_DELAY_SEC in props:
            return now_ms + int(props[PROPERTY_TIMER_DELAY_SEC]) * 1000
        if PROPERTY_TIMER_DELAY_MS in props:
            return now_ms + int(props[PROPERTY_TIMER_DELAY_MS])
        return int(props[PROPERTY_TIMER_DELIVER_MS])
    except ValueError:
        raise TimerMessageIllegal("timer message illegal: a TIMER_* property is not an integer") from None


def _illegal_remark(policy: TimerPolicy) -> str:
    return (f"timer message illegal, the delay time should not be bigger than the max delay {policy.max_delay_ms}ms; "
            "or if set del msg, the delay time should be bigger than the current time")


def park(msg: Message, due_ms: int) -> Message:
    """*msg* rewritten for the timer: due at *due_ms*, going to its topic and queue then."""
    msg.properties[PROPERTY_TIMER_OUT_MS] = str(due_ms)
    msg.properties[PROPERTY_REAL_TOPIC] = msg.topic
    msg.properties[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.topic, msg.queue_id = TIMER_TOPIC, 0
    return msg


def parked_due_ms(props: dict[str, str]) -> int:
    """The due time of a record in the timer topic (``TIMER_OUT_MS``; records written before rocketq
    set it, and tools writing straight into the topic, have only ``TIMER_DELIVER_MS``); 0 if none."""
    text = props.get(PROPERTY_TIMER_OUT_MS) or props.get(PROPERTY_TIMER_DELIVER_MS) or "0"
    try:
        return int(text)
    except ValueError:
        return 0


def delete_key(topic: str, uniq_key: str) -> str:
    """What a recall marker names (``TimerMessageStore.buildDeleteKey``)."""
    return f"{topic}+{uniq_key}"


def delete_key_of(props: dict[str, str]) -> str | None:
    """The key a parked record is recalled by, or None when it has no UNIQ_KEY."""
    uniq = props.get(PROPERTY_UNIQ_KEY)
    topic = props.get(PROPERTY_REAL_TOPIC)
    return delete_key(topic, uniq) if uniq and topic else None


# -- recall handles ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RecallHandle:
    topic: str
    broker_name: str
    due_ms: int
    uniq_key: str

    def encode(self) -> str:
        raw = " ".join((_HANDLE_VERSION, self.topic, self.broker_name, str(self.due_ms), self.uniq_key))
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @staticmethod
    def parse(text: str) -> RecallHandle:
        """Raises ValueError (with a reason) for anything that is not a v1 handle."""
        try:
            raw = base64.b64decode(text.encode(), altchars=b"-_", validate=True).decode()
        except (binascii.Error, UnicodeError, ValueError):
            raise ValueError("recall handle is not URL-safe base64 text") from None
        items = raw.split(" ")
        if len(items) < 5 or items[0] != _HANDLE_VERSION:
            raise ValueError("recall handle is not of version v1")
        try:
            due = int(items[3])
        except ValueError:
            raise ValueError("recall handle has no valid timestamp") from None
        return RecallHandle(items[1], items[2], due, items[4])


def recall_handle(parked: Message, broker_name: str) -> str | None:
    """The handle for a message :func:`park` rewrote; None when it has no UNIQ_KEY, or is on its way
    to a retry topic (RocketMQ gives none for those, ``SendMessageProcessor#attachRecallHandle``)."""
    props = parked.properties
    topic, uniq = props.get(PROPERTY_REAL_TOPIC), props.get(PROPERTY_UNIQ_KEY)
    if not topic or not uniq or topic.startswith("%RETRY%"):
        return None
    return RecallHandle(topic, broker_name, int(props[PROPERTY_TIMER_OUT_MS]), uniq).encode()


def recall_marker(handle: RecallHandle, *, born_host: HostAddress, now_ms: int) -> Message:
    """The record that recalls *handle*'s message (``RecallMessageProcessor#buildMessage``), already
    in the timer topic, due when the message was."""
    props = {PROPERTY_TIMER_DEL_UNIQKEY: delete_key(handle.topic, handle.uniq_key),
             PROPERTY_UNIQ_KEY: handle.uniq_key, PROPERTY_TIMER_DELIVER_MS: str(handle.due_ms)}
    marker = Message(topic=handle.topic, body=b"0", queue_id=0, tags=RECALL_TAG, properties=props,
                     born_timestamp=now_ms, born_host=born_host)
    return park(marker, handle.due_ms)
