"""Store-format records to Arrow columns (the Spark sources' decoder).

Both Spark sources turn bytes in the CommitLog record layout (:mod:`rocketq.store.record`) into
``pyarrow.RecordBatch`` objects: ``rocketq-store`` reads them from segment files, ``rocketq`` from
PULL_MESSAGE bodies, which carry the same records back to back.  Both walk the records and decode
them in one native pass (:func:`rocketq._native.walk_columns`: the segment walk's checks, then the
columns; :func:`decode_body`, :func:`walked_batch`); :func:`decode` decodes records at positions
found before (:func:`rocketq._native.record_columns`), for callers that walked already.

The per-record work is native: one call fills the Arrow
buffers of every column for a chunk of records - fixed-width values, string/binary offsets and
bytes with validity bitmaps, the properties map (``k\\x01v\\x02...`` split into keys and values) -
and this module wraps them with ``pyarrow.Array.from_buffers`` (no copy: the native buffers export
themselves to pyarrow).  The store source's topic and store-time filter is applied in the same call,
so dropped records cost no column work and kept ones are not copied by a filter.  ``msg_id`` is ``UNIQ_KEY`` when the
producer set one, else the offset message id.  Bodies with the COMPRESSED sysflag are inflated here
(:func:`~rocketq.common.sysflag.plain_body`: zlib, or the LZ4 / ZSTD the sysflag names), the only
per-record Python, and only for those rows.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pyarrow as pa

from rocketq import _native
from rocketq.common.sysflag import plain_body

TIMESTAMP = pa.timestamp("us", tz="UTC")

# Column order and types are Spark's (``to_arrow_schema`` of the DDL below); both must match exactly.
TOPIC_COLUMNS = [
    ("topic", "STRING", pa.string()),
    ("broker", "STRING", pa.string()),
    ("queue_id", "INT", pa.int32()),
    ("queue_offset", "BIGINT", pa.int64()),
    ("keys", "STRING", pa.string()),
    ("tags", "STRING", pa.string()),
    ("body", "BINARY", pa.binary()),
    ("properties", "MAP<STRING,STRING>", pa.map_(pa.string(), pa.string())),
    ("msg_id", "STRING", pa.string()),
    ("born_timestamp", "TIMESTAMP", TIMESTAMP),
    ("store_timestamp", "TIMESTAMP", TIMESTAMP),
    ("reconsume_times", "INT", pa.int32()),
]
STORE_COLUMNS = TOPIC_COLUMNS + [("physical_offset", "BIGINT", pa.int64()), ("sysflag", "INT", pa.int32())]


def ddl(columns) -> str:
    return ", ".join(f"{name} {kind}" for name, kind, _ in columns)


def arrow_schema(columns) -> pa.Schema:
    return pa.schema([(name, typ) for name, _, typ in columns])


TOPIC_SCHEMA = arrow_schema(TOPIC_COLUMNS)
STORE_SCHEMA = arrow_schema(STORE_COLUMNS)


class DecodeError(ValueError):
    """Bytes at a record position that are no record (the caller walked them: this is damage)."""


def decode(buf, base_offset: int, positions: np.ndarray, sizes: np.ndarray, *, broker: str | None,
           store_columns: bool, topics: frozenset[str] | None = None, min_store_ms: int | None = None,
           max_store_ms: int | None = None) -> list[pa.RecordBatch]:
    """Record batches for the records at *positions* (relative to *buf*; *sizes* and *base_offset* are
    kept for the callers' symmetry - the records' own fields are used), keeping only records of
    *topics* (None: all) with a store time in ``[min_store_ms, max_store_ms)`` (None: unbounded)."""
    schema = STORE_SCHEMA if store_columns else TOPIC_SCHEMA
    positions = np.ascontiguousarray(positions, dtype=np.int64)
    wanted = sorted(topics) if topics is not None else None
    out = []
    while len(positions):
        cols = _native.record_columns(buf, positions, wanted, min_store_ms, max_store_ms)
        rows = cols["rows"]
        if rows:
            out.append(_batch(cols, rows, broker, schema))
        if cols["error"] is not None:
            raise DecodeError(cols["error"])
        positions = positions[cols["consumed"]:]     # a column reached 2 GiB: the rest in another batch
    return out


def decode_body(body, *, broker: str | None, max_rows: int) -> list[pa.RecordBatch]:
    """Record batches (topic columns) of a PULL_MESSAGE body: records back to back, walked and
    decoded in one native pass (:func:`rocketq._native.walk_columns`), *max_rows* a batch at most;
    bytes that are no record raise :class:`DecodeError` naming where."""
    out = []
    pos, end = 0, len(body)
    while pos < end:
        cols = _native.walk_columns(body, None, pos, end, end, max_rows, check_crc=False)
        if cols["rows"]:
            out.append(_batch(cols, cols["rows"], broker, TOPIC_SCHEMA))
        if cols["error"] is not None:
            at, reason = cols["error"]
            raise DecodeError(f"pulled body of {end} bytes, record at byte {at}: {reason}")
        if not cols["more"]:
            if cols["end"] < end:
                raise DecodeError(f"pulled body of {end} bytes ends in {end - cols['end']} bytes that are no record")
            break
        pos = cols["end"]
    return out


def decode_bodies(bodies: list, *, broker: str | None, max_rows: int) -> list[pa.RecordBatch]:
    """Record batches (topic columns) of several PULL_MESSAGE bodies in order, as :func:`decode_body`
    makes them of their concatenation, without the copy that joins them
    (:func:`rocketq._native.walk_bodies_columns`); bytes that are no record raise
    :class:`DecodeError` naming the body and the byte."""
    out = []
    body, pos = 0, 0
    while True:
        cols = _native.walk_bodies_columns(bodies, body, pos, max_rows)
        if cols["rows"]:
            out.append(_batch(cols, cols["rows"], broker, TOPIC_SCHEMA))
        if cols["error"] is not None:
            at_body, at, reason = cols["error"]
            raise DecodeError(f"pulled body {at_body + 1} of {len(bodies)} ({len(bodies[at_body])} bytes), "
                              f"record at byte {at}: {reason}")
        if not cols["more"]:
            return out
        body, pos = cols["end"]


def walked_batch(cols: dict, broker: str | None) -> pa.RecordBatch:
    """The store-columns batch of a :func:`rocketq._native.walk_columns` result with rows."""
    return _batch(cols, cols["rows"], broker, STORE_SCHEMA)


def _strings(cols: dict, name: str, n: int, typ) -> pa.Array:
    validity, offsets, data = cols[name]
    return pa.Array.from_buffers(typ, n, [pa.py_buffer(validity) if validity is not None else None,
                                          pa.py_buffer(offsets), pa.py_buffer(data)])


def _fixed(cols: dict, name: str, n: int, typ) -> pa.Array:
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(cols[name])])


def _batch(cols: dict, n: int, broker: str | None, schema: pa.Schema) -> pa.RecordBatch:
    entries = len(cols["prop_keys"][1]) // 4 - 1
    properties = pa.MapArray.from_arrays(_fixed(cols, "map_offsets", n + 1, pa.int32()),
                                         _strings(cols, "prop_keys", entries, pa.string()),
                                         _strings(cols, "prop_values", entries, pa.string()))
    if cols["uniform_topic"]:                # the native column holds the one topic once
        topic = _repeated(_strings(cols, "topic", 1, pa.binary())[0].as_py(), n)
    else:
        topic = _strings(cols, "topic", n, pa.string())
    body = _strings(cols, "body", n, pa.binary())
    if cols["compressed"]:
        body = _inflate(body, cols["compressed"], np.frombuffer(cols["sysflag"], dtype=np.int32))
    columns = {
        "topic": topic,
        "broker": _repeated(None if broker is None else broker.encode(), n),
        "queue_id": _fixed(cols, "queue_id", n, pa.int32()),
        "queue_offset": _fixed(cols, "queue_offset", n, pa.int64()),
        "keys": _strings(cols, "keys", n, pa.string()),
        "tags": _strings(cols, "tags", n, pa.string()),
        "body": body,
        "properties": properties,
        "msg_id": _strings(cols, "msg_id", n, pa.string()),
        "born_timestamp": _fixed(cols, "born_timestamp", n, TIMESTAMP),
        "store_timestamp": _fixed(cols, "store_timestamp", n, TIMESTAMP),
        "reconsume_times": _fixed(cols, "reconsume_times", n, pa.int32()),
        "physical_offset": _fixed(cols, "physical_offset", n, pa.int64()),
        "sysflag": _fixed(cols, "sysflag", n, pa.int32()),
    }
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


@lru_cache(maxsize=4)
def _repeated(value: bytes | None, n: int) -> pa.Array:
    """A string column of *n* rows all *value* (null for None), made once per process for each chunk
    size: Arrow arrays are immutable, so every full chunk of a queue shares its topic and broker columns.
    *value* is the column's bytes as they are: like every string column decoded here, not checked as
    UTF-8 (a torn record's topic must not fail the batch)."""
    if value is None:
        return pa.nulls(n, pa.string())
    return pa.repeat(pa.scalar(value, pa.binary()), n).view(pa.string())


def _inflate(body: pa.Array, rows: list[int], sys_flags: np.ndarray) -> pa.Array:
    values = body.to_pylist()
    for i in rows:
        values[i] = plain_body(values[i], int(sys_flags[i]))
    return pa.array(values, type=pa.binary())
