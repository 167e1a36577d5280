"""Rows to SEND_BATCH_MESSAGE bodies, column-wise (the sink's per-row cost is Arrow's, not Python's).

A batch body is messages back to back, each::

    int32 total size | int32 magic (0) | int32 body CRC (0) | int32 flag (0) | int32 body length | body
    | int16 properties length | properties "k\\x01v\\x02..."

Per row the properties are ``UNIQ_KEY`` (a fresh id, RocketMQ's layout: ip, pid, a random
per-process word, ms since the start of the month, a counter), then ``TAGS`` and ``KEYS`` when
set, then the row's ``properties`` map.  Every piece is an Arrow array and the message is their
element-wise concatenation (``binary_join_element_wise``), so the concatenated values buffer of
that array *is* the batch body; a chunk of rows is one slice of it.
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
from rocketq.spark.decode import fixed_width, hex_strings

MAX_BODY_BYTES = 4 << 20
MAX_PROPERTIES_BYTES = 32767
HEAD = 20
# a prefix of its own (a random word unlike the client's), so ids never collide with the client's counter
_PREFIX = np.frombuffer(socket.inet_aton(local_ip()) + (os.getpid() & 0xFFFF).to_bytes(2, "big")
                        + secrets.randbits(32).to_bytes(4, "big"), dtype=np.uint8)
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


def unique_keys(n: int) -> pa.Array:
    """*n* fresh UNIQ_KEY ids (32 upper-case hex characters each).

    The last 6 bytes (ms since the month's start, counter) are taken as one 48-bit number that
    only grows within the process, so a block of more than 65,536 ids in one millisecond borrows
    from the next milliseconds instead of wrapping the counter into duplicates.
    """
    global _LAST
    since = (int(time.time() * 1000) - _MONTH_START) & 0xFFFFFFFF
    with _COUNTER_LOCK:
        first = max(since << 16, _LAST + 1)
        _LAST = first + n - 1
    raw = np.empty((n, 16), dtype=np.uint8)
    raw[:, :10] = _PREFIX
    tail = (np.arange(first, first + n, dtype=np.int64) & 0xFFFFFFFFFFFF).astype(">i8")
    raw[:, 10:16] = tail.view(np.uint8).reshape(n, 8)[:, 2:]
    return hex_strings(raw)


def _be(values: np.ndarray, width: int) -> pa.Array:
    kind = ">i4" if width == 4 else ">u2"
    return fixed_width(values.astype(kind).view(np.uint8).reshape(len(values), width), pa.binary())


def _piece(name: str, column: pa.Array | None) -> pa.Array | None:
    """``name\\x01value\\x02`` where the value is set, else empty."""
    if column is None or column.null_count == len(column):
        return None
    text = pc.binary_join_element_wise(pa.scalar(name + "\x01"), column.cast(pa.string()), pa.scalar("\x02"), "")
    return pc.fill_null(text, "")


def _user_properties(column: pa.Array | None, row0: int) -> pa.Array | None:
    if column is None or column.null_count == len(column):
        return None
    out = []
    for i, pairs in enumerate(column.to_pylist()):
        text = []
        for k, v in pairs or ():
            if v is None:
                continue
            if any(c in s for s in (k, v) for c in "\x01\x02"):
                raise RowError(f"row {row0 + i}: property {k!r} contains a \\x01 or \\x02 separator")
            text.append(f"{k}\x01{v}\x02")
        out.append("".join(text))
    return pa.array(out, pa.string())


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    return batch.column(name) if name in batch.schema.names else None


def _bodies(batch: pa.RecordBatch, row0: int) -> pa.Array:
    body = _column(batch, "body")
    if body is None:
        raise RowError("the rows to write need a 'body' column (binary or string)")
    body = body.cast(pa.binary())
    lengths = pc.fill_null(pc.binary_length(body), 0).to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(lengths == 0)
    if len(bad):
        raise RowError(f"row {row0 + int(bad[0])}: the body is null or empty")
    big = np.flatnonzero(lengths > MAX_BODY_BYTES)
    if len(big):
        raise RowError(f"row {row0 + int(big[0])}: body of {int(lengths[big[0]])} bytes exceeds {MAX_BODY_BYTES}")
    return body


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
    body = _bodies(batch, row0)
    pieces = [p for p in (pc.binary_join_element_wise(pa.scalar("UNIQ_KEY\x01"), unique_keys(n), pa.scalar("\x02"), ""),
                          _piece("TAGS", _column(batch, "tags")), _piece("KEYS", _column(batch, "keys")),
                          _user_properties(_column(batch, "properties"), row0)) if p is not None]
    props = pc.binary_join_element_wise(*pieces, "") if len(pieces) > 1 else pieces[0]
    plen = pc.binary_length(props).to_numpy(zero_copy_only=False).astype(np.int64)
    too_long = np.flatnonzero(plen > MAX_PROPERTIES_BYTES)
    if len(too_long):
        raise RowError(f"row {row0 + int(too_long[0])}: properties of {int(plen[too_long[0]])} bytes exceed "
                       f"{MAX_PROPERTIES_BYTES}")
    blen = pc.binary_length(body).to_numpy(zero_copy_only=False).astype(np.int64)
    head = np.zeros((n, 5), dtype=">i4")
    head[:, 0] = HEAD + blen + 2 + plen
    head[:, 4] = blen
    head_arr = fixed_width(head.view(np.uint8).reshape(n, HEAD), pa.binary())
    messages = pc.binary_join_element_wise(head_arr, body, _be(plen, 2), props.cast(pa.binary()), b"")
    return _group(batch, topics, messages, blen)


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
    offsets = np.frombuffer(arr.buffers()[1], dtype=np.int32)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
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
