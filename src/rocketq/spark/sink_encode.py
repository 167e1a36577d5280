"""Rows to SEND_BATCH_MESSAGE bodies (the sink's encoder; the per-row work is native).

A batch body is messages back to back, each::

    int32 total size | int32 magic (0) | int32 body CRC (0) | int32 flag (0) | int32 body length | body
    | int16 properties length | properties "k\\x01v\\x02..."

Per row the properties are ``UNIQ_KEY`` (a fresh id, RocketMQ's layout: ip, pid, a random
per-process word, ms since the start of the month, a counter), then ``TAGS`` and ``KEYS`` when
set, then the row's ``properties`` map.  :func:`rocketq._native.encode_sink_rows` reads the Arrow
buffers of the body, tags, keys and properties columns and writes every entry back to back, so the
result *is* the batch body; a chunk of rows is one slice of it.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketq.client.ids import _MONTH_START, local_ip
from rocketq.common.validation import topic_error
from rocketq import _native

MAX_BODY_BYTES = 4 << 20
MAX_PROPERTIES_BYTES = 32767
HEAD = 20
# a prefix of its own (a random word unlike the client's), so ids never collide with the client's counter
_PREFIX = (socket.inet_aton(local_ip()) + (os.getpid() & 0xFFFF).to_bytes(2, "big")
           + secrets.randbits(32).to_bytes(4, "big"))
_LAST = -1                       # the last (ms << 16 | counter) handed out
_COUNTER_LOCK = threading.Lock()


class RowError(ValueError):
    """A row cannot be sent as a message; the text names the row."""


@dataclass
class Encoded:
    topic: str
    hint: object                 # None, a queue id (int) or a sharding key (str)
    messages: pa.Array           # binary: one encoded message per element
    body_bytes: np.ndarray       # body length per message


def _reserve_ids(n: int) -> int:
    """The first of *n* fresh id counters (ms since the month's start << 16 | counter, 48 bits).

    The counter only grows within the process, so a block of more than 65,536 ids in one millisecond
    borrows from the next milliseconds instead of wrapping into duplicates."""
    global _LAST
    since = (int(time.time() * 1000) - _MONTH_START) & 0xFFFFFFFF
    with _COUNTER_LOCK:
        first = max(since << 16, _LAST + 1)
        _LAST = first + n - 1
    return first


def _buffers(column: pa.Array, typ) -> tuple:
    """The Arrow buffers of a variable-width column as the native encoder takes them."""
    column = column.cast(typ)
    validity, offsets, data = column.buffers()
    return validity, offsets, data if data is not None else b"", column.offset, len(column)


def _parts(column: pa.Array | None, typ) -> tuple | None:
    """:func:`_buffers`, or None for a column that is absent or all null (the encoder leaves it out)."""
    if column is None or column.null_count == len(column):
        return None
    return _buffers(column, typ)


def _map_parts(column: pa.Array | None) -> tuple | None:
    if column is None or column.null_count == len(column):
        return None
    offsets = column.buffers()[1]
    # keys and values as they are, also when every map is empty or every value null
    return offsets, column.offset, _buffers(column.keys, pa.string()), _buffers(column.items, pa.string())


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    return batch.column(name) if name in batch.schema.names else None


def _topics(batch: pa.RecordBatch, default: str | None, row0: int) -> pa.Array:
    column = _column(batch, "topic")
    topics = pa.repeat(pa.scalar(default, pa.string()), batch.num_rows) if column is None else \
        pc.fill_null(column.cast(pa.string()), pa.scalar(default, pa.string())) if default else column.cast(pa.string())
    missing = np.flatnonzero(topics.is_null().to_numpy(zero_copy_only=False))
    if len(missing):
        raise RowError(f"row {row0 + int(missing[0])}: no topic (set a 'topic' column or the 'topic' option)")
    for t in pc.unique(topics).to_pylist():
        err = topic_error(t)
        if err:
            raise RowError(f"topic {t!r}: {err}")
    return topics


def encode(batch: pa.RecordBatch, default_topic: str | None, row0: int = 0) -> list[Encoded]:
    """The rows of *batch* as encoded messages, grouped by topic and destination hint."""
    n = batch.num_rows
    if n == 0:
        return []
    topics = _topics(batch, default_topic, row0)
    body = _column(batch, "body")
    if body is None:
        raise RowError("the rows to write need a 'body' column (binary or string)")
    try:
        data, offsets, blen = encode_rows(batch, uniq_prefix=_PREFIX, first_counter=_reserve_ids(n))
    except ValueError as exc:
        raise RowError(_shift_row(str(exc), row0)) from None
    messages = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return _group(batch, topics, messages, np.frombuffer(blen, dtype=np.int64))


def encode_rows(batch: pa.RecordBatch, *, uniq_prefix: bytes, first_counter: int,
                max_body_bytes: int = MAX_BODY_BYTES) -> tuple[bytes, bytes, bytes]:
    """The native encoder's ``(entries, int64 entry offsets, int64 body lengths)`` for *batch*'s rows
    (its ``body`` column is there); ValueError names a row that cannot be a message."""
    n = batch.num_rows
    return _native.encode_sink_rows(
        n, _parts(batch.column("body"), pa.binary()) or (None, pa.py_buffer(bytes(4 * (n + 1))), b"", 0, n),
        _parts(_column(batch, "tags"), pa.string()), _parts(_column(batch, "keys"), pa.string()),
        _map_parts(_column(batch, "properties")), uniq_prefix=uniq_prefix, first_counter=first_counter,
        max_body_bytes=max_body_bytes)


def _shift_row(message: str, row0: int) -> str:
    """The native encoder numbers rows from 0 in the batch; the caller's numbering starts at *row0*."""
    if message.startswith("row ") and row0:
        head, _, rest = message.partition(":")
        return f"row {int(head[4:]) + row0}:{rest}"
    return message


def _group(batch, topics: pa.Array, messages: pa.Array, blen: np.ndarray) -> list[Encoded]:
    qids, keys = _column(batch, "queue_id"), _column(batch, "sharding_key")
    distinct = pc.unique(topics)
    if len(distinct) == 1 and (qids is None or qids.null_count == len(qids)) and \
            (keys is None or keys.null_count == len(keys)):
        return [Encoded(distinct[0].as_py(), None, messages, blen)]
    hints = [q if q is not None else k for q, k in zip(
        (qids.to_pylist() if qids is not None else [None] * len(topics)),
        (keys.to_pylist() if keys is not None else [None] * len(topics)))]
    rows: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(topics.to_pylist(), hints)):
        rows.setdefault(key, []).append(i)
    out = []
    for (topic, hint), idx in rows.items():
        take = pa.array(idx, pa.int64())
        out.append(Encoded(topic, hint, messages.take(take), blen[idx]))
    return out


def chunks(encoded: Encoded, max_messages: int, max_bytes: int):
    """(body bytes, message count, body byte total) for consecutive runs of *encoded*'s messages."""
    arr = encoded.messages
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    start = 0
    n = len(arr)
    while start < n:
        end = min(n, start + max_messages)
        # shrink to max_bytes (at least one message)
        limit = int(np.searchsorted(offsets, offsets[start] + max_bytes, side="right")) - 1
        end = max(start + 1, min(end, limit))
        yield data[int(offsets[start]):int(offsets[end])].to_pybytes(), end - start, int(encoded.body_bytes[start:end].sum())
        start = end
