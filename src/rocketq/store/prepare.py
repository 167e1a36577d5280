"""Validating messages and computing their position-independent parts, a batch at a time.

Everything about a record except its queue offset, physical offset and store time can be
computed before the put lock is taken.  :func:`prepare_batch` does that column-wise: it reads the
messages' attributes with one C-level ``map``, validates whole columns (unique topics once, queue
ids by min/max, body sizes by max), and builds properties with ``str.format`` mapped over tags
and keys.  Messages that need more (user properties, a delay level, an IPv6 born host) take the
per-message path, :func:`prepare_one`; both produce the same :class:`PreparedBatch` columns.
:func:`prepare_encoded` takes a broker's SEND_BATCH_MESSAGE as it came off the wire (properties
already encoded) and builds the columns without a :class:`Message` per record.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import repeat
from operator import attrgetter

from rocketq.common.crc import body_crc, body_crcs
from rocketq.common.message import DEFAULT_BORN_HOST, Message
from rocketq.common.msgid import HostAddress
from rocketq.common.properties import IllegalPropertyError, PropertyColumns, check_separators, decode_properties
from rocketq.common.sysflag import (
    BORNHOST_V6,
    PROPERTY_DELAY,
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    SCHEDULE_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
)
from rocketq.common.validation import topic_error
from rocketq.store.record import MAX_PROPERTIES_BYTES
from rocketq.store.results import PutError, PutStatus

MAX_QUEUE_ID = (1 << 31) - 1
_ATTRS = attrgetter("topic", "body", "queue_id", "tags", "keys", "properties", "flag", "sys_flag",
                    "born_timestamp", "born_host", "reconsume_times", "prepared_transaction_offset", "delay_level")
_TAGS_KEYS = "TAGS\x01{}\x02KEYS\x01{}\x02".format


class PreparedBatch:
    """Column lists for the records of one append, in order."""

    __slots__ = ("topics", "topic_bs", "queue_ids", "flags", "sys_flags", "born_ts", "born_ips", "born_ports",
                 "reconsume", "prepared_offsets", "bodies", "crcs", "props_bs", "tags", "keys", "uniq_keys",
                 "props_texts", "body_lens", "any_born_v6")
    _COLUMNS = __slots__[:17]

    def __init__(self, **cols):
        for name in self._COLUMNS:
            setattr(self, name, cols[name])
        self.body_lens = cols.get("body_lens") or list(map(len, self.bodies))
        self.any_born_v6 = cols.get("any_born_v6", True)

    def __len__(self) -> int:
        return len(self.bodies)

    @classmethod
    def from_rows(cls, rows: list[tuple]) -> "PreparedBatch":
        return cls(**dict(zip(cls._COLUMNS, zip(*rows))))


def prepare_batch(msgs: list[Message], *, max_message_size: int, delay_levels: int) -> PreparedBatch:
    """Validate and pre-encode *msgs*; raises PutError naming the first bad message."""
    cols = list(zip(*map(_ATTRS, msgs)))
    topics, bodies, qids, tags, keys, props, flags, sys_flags, born_ts, borns, recons, preps, delays = cols
    born_set = set(borns)
    if any(props) or any(delays) or any(h.is_v6 for h in born_set):
        return PreparedBatch.from_rows([prepare_one(m, max_message_size=max_message_size, delay_levels=delay_levels)
                                        for m in msgs])
    _check_numeric({"flag": flags, "sys_flag": sys_flags, "reconsume_times": recons, "born_timestamp": born_ts,
                    "prepared_transaction_offset": preps})
    topic_bs = _check_topics(topics)
    if min(qids) < 0 or max(qids) > MAX_QUEUE_ID:
        bad = next(i for i, q in enumerate(qids) if not 0 <= q <= MAX_QUEUE_ID)
        raise PutError(PutStatus.MESSAGE_ILLEGAL, f"message {bad}: queue id {qids[bad]} is out of range")
    blens = list(map(len, bodies))
    if max(blens) > max_message_size:
        bad = next(i for i, n in enumerate(blens) if n > max_message_size)
        raise PutError(PutStatus.MESSAGE_ILLEGAL, f"message {bad} (topic {topics[bad]!r}): body of {blens[bad]} "
                                                  f"bytes exceeds maxMessageSize {max_message_size}")
    keys_texts = [k if k is None or k.__class__ is str else " ".join(k) for k in keys]
    if all(tags) and all(keys_texts):
        texts = list(map(_TAGS_KEYS, tags, keys_texts))
        pairs = 2 * len(texts)
    else:
        texts = [_tags_keys_text(t, k) for t, k in zip(tags, keys_texts)]
        pairs = sum(bool(t) + bool(k) for t, k in zip(tags, keys_texts))
    try:
        check_separators("".join(texts), pairs)
    except IllegalPropertyError as exc:
        raise PutError(PutStatus.MESSAGE_ILLEGAL, f"tags or keys: {exc}") from None
    props_bs = list(map(str.encode, texts))
    if max(map(len, props_bs)) > MAX_PROPERTIES_BYTES:
        bad = next(i for i, p in enumerate(props_bs) if len(p) > MAX_PROPERTIES_BYTES)
        raise PutError(PutStatus.PROPERTIES_SIZE_EXCEEDED,
                       f"message {bad} (topic {topics[bad]!r}): properties are {len(props_bs[bad])} bytes, "
                       f"at most {MAX_PROPERTIES_BYTES}")
    n = len(bodies)
    if len(born_set) == 1:
        born = borns[0]
        born_ips, born_ports = repeat(born.ip, n), repeat(born.port, n)
    else:
        born_ips, born_ports = [h.ip for h in borns], [h.port for h in borns]
    return PreparedBatch(
        topics=topics, topic_bs=topic_bs, queue_ids=qids, flags=flags, sys_flags=sys_flags,
        born_ts=born_ts, born_ips=tuple(born_ips), born_ports=tuple(born_ports), reconsume=recons,
        prepared_offsets=preps, bodies=bodies, crcs=body_crcs(bodies, blens), props_bs=props_bs,
        tags=tags if all(tags) else tuple(t or None for t in tags), keys=keys_texts, uniq_keys=(None,) * n,
        props_texts=texts, body_lens=blens, any_born_v6=False)


_INT32 = (-(1 << 31), (1 << 31) - 1)
_INT64 = (-(1 << 63), (1 << 63) - 1)
_NUMERIC_FIELDS = (("flag", _INT32), ("sys_flag", _INT32), ("reconsume_times", _INT32), ("born_timestamp", _INT64),
                   ("prepared_transaction_offset", _INT64))


def _check_numeric(columns: dict) -> None:
    """Every numeric field fits its on-disk width (int32 / int64); raises PutError naming the first that does not."""
    for name, (lo, hi) in _NUMERIC_FIELDS:
        values = columns[name]
        if min(values) < lo or max(values) > hi:
            bad = next(i for i, v in enumerate(values) if not lo <= v <= hi)
            raise PutError(PutStatus.MESSAGE_ILLEGAL, f"message {bad}: {name} {values[bad]} does not fit in "
                                                      f"{'32' if hi < 1 << 32 else '64'} bits")


def _tags_keys_text(tags, keys_text) -> str:
    return (f"TAGS\x01{tags}\x02" if tags else "") + (f"KEYS\x01{keys_text}\x02" if keys_text else "")


def _check_topics(topics) -> list[bytes]:
    encoded = {}
    for t in set(topics):
        err = topic_error(t)
        if err:
            raise PutError(PutStatus.MESSAGE_ILLEGAL, err)
        encoded[t] = t.encode()
    if len(encoded) == 1:
        return list(repeat(encoded[topics[0]], len(topics)))
    return [encoded[t] for t in topics]


def prepare_one(m: Message, *, max_message_size: int, delay_levels: int) -> tuple:
    """The general path: one message, any properties; returns a row in PreparedBatch column order."""
    topic = m.topic
    err = topic_error(topic)
    if err:
        raise PutError(PutStatus.MESSAGE_ILLEGAL, err)
    if not 0 <= m.queue_id <= MAX_QUEUE_ID:
        raise PutError(PutStatus.MESSAGE_ILLEGAL, f"queue id {m.queue_id} of topic {topic!r} is out of range")
    _check_numeric({"flag": (m.flag,), "sys_flag": (m.sys_flag,), "reconsume_times": (m.reconsume_times,),
                    "born_timestamp": (m.born_timestamp,), "prepared_transaction_offset": (m.prepared_transaction_offset,)})
    if m.delay_level > 0 and m.sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        m = _to_schedule_topic(m, delay_levels)
        topic = m.topic
    body = m.body
    try:
        props_text = m.properties_string()
    except IllegalPropertyError as exc:
        raise PutError(PutStatus.MESSAGE_ILLEGAL, f"topic {topic!r}: {exc}") from None
    props_b = props_text.encode()
    if len(props_b) > MAX_PROPERTIES_BYTES:
        raise PutError(PutStatus.PROPERTIES_SIZE_EXCEEDED,
                       f"topic {topic!r}: properties are {len(props_b)} bytes, at most {MAX_PROPERTIES_BYTES}")
    if len(body) > max_message_size:
        raise PutError(PutStatus.MESSAGE_ILLEGAL,
                       f"topic {topic!r}: body of {len(body)} bytes exceeds maxMessageSize {max_message_size}")
    born = m.born_host
    sys_flag = m.sys_flag | (BORNHOST_V6 if born.is_v6 else 0)
    props = m.properties
    keys = m.keys
    keys_text = keys if keys is None or isinstance(keys, str) else " ".join(keys)
    if keys is None:
        keys_text = props.get(PROPERTY_KEYS)
    return (topic, topic.encode(), m.queue_id, m.flag, sys_flag, m.born_timestamp, born.ip, born.port,
            m.reconsume_times, m.prepared_transaction_offset, body, body_crc(body), props_b,
            m.tags or props.get(PROPERTY_TAGS), keys_text, props.get(PROPERTY_UNIQ_KEY), props_text)


def _to_schedule_topic(m: Message, delay_levels: int) -> Message:
    level = min(m.delay_level, delay_levels)
    props = dict(m.properties)
    props[PROPERTY_REAL_TOPIC] = m.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(m.queue_id)
    return replace(m, topic=SCHEDULE_TOPIC, queue_id=level - 1, delay_level=level, properties=props)


@dataclass(frozen=True)
class EncodedBatch:
    """Messages of one topic and queue whose properties are already encoded (``k\\x01v\\x02...``), as a
    SEND_BATCH_MESSAGE body carries them: the broker hands them over without decoding each into a
    :class:`Message`."""
    topic: str
    queue_id: int
    flags: Sequence[int]
    bodies: Sequence[bytes]
    props_texts: Sequence[str]
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: HostAddress = DEFAULT_BORN_HOST
    reconsume_times: int = 0
    props_bytes: Sequence[bytes] | None = None     # props_texts UTF-8 encoded, when the caller has them

    def to_messages(self) -> list[Message]:
        out = []
        for flag, body, text in zip(self.flags, self.bodies, self.props_texts):
            props = decode_properties(text)
            delay = props.get(PROPERTY_DELAY, "")
            out.append(Message(topic=self.topic, body=body, queue_id=self.queue_id, properties=props, flag=flag,
                               sys_flag=self.sys_flag, born_timestamp=self.born_timestamp, born_host=self.born_host,
                               reconsume_times=self.reconsume_times, delay_level=int(delay) if delay.isdigit() else 0))
        return out


def prepare_encoded(eb: EncodedBatch, *, max_message_size: int) -> PreparedBatch | None:
    """The PreparedBatch of *eb*, or None when a message needs the general path (a delay level,
    transaction flags, an IPv6 born host).  Raises PutError naming the first bad message."""
    if eb.born_host.is_v6 or eb.sys_flag & TRANSACTION_MASK not in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        return None
    err = topic_error(eb.topic)
    if err:
        raise PutError(PutStatus.MESSAGE_ILLEGAL, err)
    if not 0 <= eb.queue_id <= MAX_QUEUE_ID:
        raise PutError(PutStatus.MESSAGE_ILLEGAL, f"queue id {eb.queue_id} of topic {eb.topic!r} is out of range")
    _check_numeric({"flag": eb.flags, "sys_flag": (eb.sys_flag,), "reconsume_times": (eb.reconsume_times,),
                    "born_timestamp": (eb.born_timestamp,), "prepared_transaction_offset": (0,)})
    n = len(eb.bodies)
    blens = list(map(len, eb.bodies))
    if max(blens) > max_message_size:
        bad = next(i for i, size in enumerate(blens) if size > max_message_size)
        raise PutError(PutStatus.MESSAGE_ILLEGAL, f"message {bad} (topic {eb.topic!r}): body of {blens[bad]} "
                                                  f"bytes exceeds maxMessageSize {max_message_size}")
    try:
        props = PropertyColumns(eb.props_texts)
    except IllegalPropertyError as exc:
        raise PutError(PutStatus.MESSAGE_ILLEGAL, str(exc)) from None
    if props.has(PROPERTY_DELAY):
        return None
    tags, keys, uniqs = (props.column(name) for name in (PROPERTY_TAGS, PROPERTY_KEYS, PROPERTY_UNIQ_KEY))
    props_bs = eb.props_bytes if eb.props_bytes is not None else list(map(str.encode, eb.props_texts))
    if max(map(len, props_bs)) > MAX_PROPERTIES_BYTES:
        bad = next(i for i, p in enumerate(props_bs) if len(p) > MAX_PROPERTIES_BYTES)
        raise PutError(PutStatus.PROPERTIES_SIZE_EXCEEDED, f"message {bad} (topic {eb.topic!r}): properties are "
                                                          f"{len(props_bs[bad])} bytes, at most {MAX_PROPERTIES_BYTES}")
    return PreparedBatch(
        topics=(eb.topic,) * n, topic_bs=[eb.topic.encode()] * n, queue_ids=(eb.queue_id,) * n, flags=eb.flags,
        sys_flags=(eb.sys_flag,) * n, born_ts=(eb.born_timestamp,) * n, born_ips=(eb.born_host.ip,) * n,
        born_ports=(eb.born_host.port,) * n, reconsume=(eb.reconsume_times,) * n, prepared_offsets=(0,) * n,
        bodies=eb.bodies, crcs=body_crcs(eb.bodies, blens), props_bs=props_bs, tags=tuple(tags), keys=keys,
        uniq_keys=tuple(uniqs), props_texts=eb.props_texts, body_lens=blens, any_born_v6=False)
