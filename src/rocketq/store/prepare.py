"""Turning what producers hand the store into a :class:`~rocketq._native.RecordBatch`, outside the put lock.

Everything about a record except its queue offset, physical offset and store time is known before
the lock is taken: the native batch validates the messages (queue ids, numeric widths, body and
properties sizes) and builds the properties of plain messages (``TAGS``/``KEYS``); the body CRCs
are computed as the bodies are copied into the segment (one pass over each body).  What is policy
stays here, in Python:

* a message with a delay level is re-addressed to ``SCHEDULE_TOPIC_XXXX`` (queue = level - 1) with
  its real topic and queue in ``REAL_TOPIC`` / ``REAL_QID``, unless it is a transaction's prepared
  or rolled-back record (RocketMQ's ``CommitLog.asyncPutMessage``);
* user properties are folded with tags, keys and the delay level into the properties string.

Both happen in :func:`general_row`, which the native batch calls for the messages that need it
(any user property, a delay level, an IPv6 born host); plain messages never come back to Python.
Topic names are checked by :func:`rocketq.common.validation.topic_error`, once per distinct topic.
"""

from __future__ import annotations

from dataclasses import replace

from rocketq import _native
from rocketq.common.message import Message
from rocketq.common.msgid import HostAddress
from rocketq.common.properties import IllegalPropertyError
from rocketq.common.sysflag import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    SCHEDULE_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
)
from rocketq.common.validation import topic_error
from rocketq.store.results import PutError, PutStatus

RecordBatch = _native.RecordBatch


class Preparer:
    """Builds record batches for one store (its size limit, delay levels and store host family)."""

    def __init__(self, *, max_message_size: int, delay_levels: int, store_host: HostAddress):
        self._max_body = max_message_size
        self._delay_levels = delay_levels
        self._store_v6 = store_host.is_v6

    def messages(self, msgs: list[Message]) -> RecordBatch:
        """The batch of *msgs* (a list); raises PutError naming the first bad message."""
        try:
            return RecordBatch.from_messages(msgs if msgs.__class__ is list else list(msgs), max_body_bytes=self._max_body, store_v6=self._store_v6,
                                             general=self._general_row, check_topic=topic_error)
        except _native.BatchError as exc:
            raise PutError(PutStatus[exc.args[0]], exc.args[1]) from None

    def wire_batch(self, body: bytes, *, topic: str, queue_id: int, sys_flag: int, born_timestamp: int,
                   born_host: HostAddress, reconsume_times: int) -> RecordBatch | None:
        """A SEND_BATCH_MESSAGE body as it came off the wire, or None when a message in it carries a
        delay level (decode it and go through :meth:`messages`).  Raises PutError for a message the
        store refuses and ``_native.BatchFormatError`` for a body that does not parse."""
        try:
            return RecordBatch.from_wire(body, topic, queue_id, sys_flag=sys_flag, born_timestamp=born_timestamp,
                                         born_ip=born_host.ip, born_port=born_host.port,
                                         reconsume_times=reconsume_times, max_body_bytes=self._max_body,
                                         store_v6=self._store_v6, check_topic=topic_error)
        except _native.BatchError as exc:
            raise PutError(PutStatus[exc.args[0]], exc.args[1]) from None

    def sent(self, topic: str, queue_id: int, *, flag: int, sys_flag: int, born_timestamp: int,
             born_host: HostAddress, reconsume_times: int, body: bytes, properties: str,
             cluster: str) -> tuple[RecordBatch, str | None, bool] | None:
        """The one-record batch of a SEND_MESSAGE(_V2) header's message, its properties string taken as
        the client sent it with ``CLUSTER`` appended: ``(batch, UNIQ_KEY or None, has a sharding
        key)``; None when the properties need policy (a delay level, a timer, a transaction half,
        anything not plain ``k\x01v\x02`` pairs: build a ``Message`` and use :meth:`messages`).
        Raises PutError as :meth:`messages` does, with the same text."""
        try:
            return _native.stage_send(topic, queue_id, flag, sys_flag, born_timestamp, born_host.ip, born_host.port,
                                      reconsume_times, body, properties, cluster, max_body_bytes=self._max_body,
                                      store_v6=self._store_v6, check_topic=topic_error)
        except _native.BatchError as exc:
            raise PutError(PutStatus[exc.args[0]], exc.args[1]) from None

    def _general_row(self, m: Message) -> tuple:
        return general_row(m, self._delay_levels)


def general_row(m: Message, delay_levels: int) -> tuple:
    """A message with user properties, a delay level or an IPv6 born host, as the native batch takes
    it: ``(topic, queue_id, flag, sys_flag, born_timestamp, born_ip, born_port, reconsume_times,
    prepared_offset, body, properties bytes)``."""
    if m.delay_level > 0 and m.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        m = _to_schedule_topic(m, delay_levels)
    try:
        props = m.properties_string().encode()
    except IllegalPropertyError as exc:
        raise _native.BatchError("MESSAGE_ILLEGAL", f"topic {m.topic!r}: {exc}") from None
    return (m.topic, m.queue_id, m.flag, m.sys_flag, m.born_timestamp, m.born_host.ip, m.born_host.port,
            m.reconsume_times, m.prepared_transaction_offset, m.body, props)


def _to_schedule_topic(m: Message, delay_levels: int) -> Message:
    level = min(m.delay_level, delay_levels)
    props = dict(m.properties)
    props[PROPERTY_REAL_TOPIC] = m.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(m.queue_id)
    return replace(m, topic=SCHEDULE_TOPIC, queue_id=level - 1, delay_level=level, properties=props)
