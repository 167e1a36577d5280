"""Store-format records to Arrow columns, vectorised (no Python loop per record).

Both Spark sources turn bytes in the CommitLog record layout (:mod:`rocketq.store.record`) into
``pyarrow.RecordBatch`` objects: ``rocketq-store`` reads them from segment files, ``rocketq``
from PULL_MESSAGE bodies, which carry the same records back to back.

How a batch is built, for records with the V1 magic and IPv4 hosts (the common case):

- the 88-byte fixed headers of all records are gathered into one numpy structured array;
- body, topic and properties are variable-length slices of the source buffer; they become Arrow
  ``binary_view`` arrays (16 bytes per row: length, then the bytes inline when <= 12, else a
  4-byte prefix, buffer 0 and the slice's offset) over the buffer itself, cast to ``binary`` /
  ``string`` by Arrow in C++;
- properties ``k\\x01v\\x02...`` are split by Arrow's string kernels into a ``map<string,string>``;
  ``TAGS``, ``KEYS`` and ``UNIQ_KEY`` are looked up in it;
- ``msg_id`` is ``UNIQ_KEY`` when the producer set one, else the offset message id (store host
  ip + port + physical offset, 32 upper-case hex characters), computed from the header bytes.

Records with IPv6 hosts or the V2 magic (topics over 127 bytes) are rare; they are decoded one at
a time by :class:`rocketq.store.record.StoredMessage` and returned as a second batch.  Bodies with
the COMPRESSED sysflag are inflated (zlib, as RocketMQ's clients compress).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numpy.lib.stride_tricks import as_strided

from rocketq.common.hexdigits import hex_digits
from rocketq.common.sysflag import BORNHOST_V6, COMPRESSED, STOREHOST_V6, plain_body
from rocketq.store.record import MAGIC_V1, StoredMessage
from rocketq.store.record import header_struct


# The fixed header of a record with IPv4 hosts (the common case), as one numpy row.
HEADER_V4_DTYPE = np.dtype([("total", ">i4"), ("magic", ">u4"), ("crc", ">i4"), ("qid", ">i4"), ("flag", ">i4"),
                            ("qoff", ">i8"), ("phys", ">i8"), ("sysflag", ">i4"), ("born_ts", ">i8"),
                            ("born_host", "V8"), ("store_ts", ">i8"), ("store_host", "V8"), ("recon", ">i4"),
                            ("prepared", ">i8"), ("body_len", ">i4")])
assert HEADER_V4_DTYPE.itemsize == header_struct(False, False).size


def read_headers(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The 88-byte fixed headers at every position in *pos*, in one gather."""
    size = HEADER_V4_DTYPE.itemsize
    if len(pos) == 0:
        return np.zeros(0, dtype=HEADER_V4_DTYPE)
    rows = as_strided(u8, shape=(max(0, len(u8) - size + 1), size), strides=(1, 1), writeable=False)
    return np.ascontiguousarray(rows[np.minimum(pos, len(u8) - size)]).view(HEADER_V4_DTYPE).ravel()


def gather_be(u8: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """Big-endian unsigned integers of *width* (1 or 2) bytes at every position in *at*, as int64."""
    if width == 2:
        rows = as_strided(u8, shape=(max(0, len(u8) - 1), 2), strides=(1, 1), writeable=False)
        return rows[at].view(">u2").ravel().astype(np.int64)
    return u8[at].astype(np.int64)


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
_INLINE = 12


def slices(data: pa.Buffer, u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray, typ=pa.binary()) -> pa.Array:
    """``data[starts[i]:starts[i]+lengths[i]]`` for every i as one Arrow array of *typ* (binary or string).

    Strings are not validated as UTF-8 here: the store validated topics and properties on put.
    """
    n = len(starts)
    if n == 0:
        return pa.array([], type=typ)
    views = np.empty((n, 4), dtype="<u4")
    views[:, 0] = lengths
    words = _words(u8, starts)
    for k in range(3):                    # bytes 4k..4k+3 of the value, kept up to its length
        views[:, 1 + k] = words[k] & _WORD_MASK[np.clip(lengths - 4 * k, 0, 4)]
    long_ = lengths > _INLINE
    if long_.any():
        views[long_, 1] = words[0][long_]         # 4-byte prefix, buffer 0, offset
        views[long_, 2] = 0
        views[long_, 3] = starts[long_]
    binary = pa.Array.from_buffers(pa.binary_view(), n, [None, pa.py_buffer(views), data]).cast(pa.binary())
    return binary if typ == pa.binary() else binary.view(typ)


_WORD_MASK = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF, 0xFFFFFFFF], dtype=np.uint32)


def _words(u8: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The three little-endian 4-byte words at ``starts``, ``starts+4`` and ``starts+8`` (bytes past
    the end of *u8* read as zeros), gathered through an unaligned word view of the buffer."""
    if len(u8) >= 16 and int(starts.max()) + 12 <= len(u8):
        view = np.ndarray(shape=(len(u8) - 3,), dtype="<u4", buffer=u8, strides=(1,))
        return view[starts], view[starts + 4], view[starts + 8]
    padded = np.zeros(max(len(u8), int(starts.max())) + 16, dtype=np.uint8)
    padded[:len(u8)] = u8
    return _words(padded, starts)


def _window(u8: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """``u8[s:s+width]`` for every start, zero-padded past the end of *u8*, as an (n, width) array."""
    if len(u8) >= width:
        rows = as_strided(u8, shape=(len(u8) - width + 1, width), strides=(1, 1), writeable=False)
        near_end = starts > len(u8) - width
        if not near_end.any():
            return rows[starts]
    padded = np.zeros(len(u8) + width, dtype=np.uint8)
    padded[:len(u8)] = u8
    return _window(padded, starts, width)


def fixed_width(cells: np.ndarray, typ=pa.string()) -> pa.Array:
    """An (n, w) uint8 array as n values of w bytes (string or binary)."""
    n, w = cells.shape
    offsets = np.arange(0, (n + 1) * w, w, dtype=np.int32)
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(cells))])


def hex_strings(raw: np.ndarray) -> pa.Array:
    """Each row of an (n, w) uint8 array as 2w upper-case hex characters (RocketMQ's id spelling)."""
    return fixed_width(hex_digits(raw))


def offset_msg_ids(store_host: np.ndarray, phys: np.ndarray) -> pa.Array:
    """RocketMQ's offset message ids: hex of store ip (4) + port (4) + physical offset (8)."""
    n = len(phys)
    raw = np.empty((n, 16), dtype=np.uint8)
    raw[:, :8] = store_host
    raw[:, 8:] = phys.astype(">i8").view(np.uint8).reshape(n, 8)
    return hex_strings(raw)


class Properties:
    """The properties strings of n records split into a map column, with lookups by name."""

    def __init__(self, text: pa.Array):
        n = len(text)
        parts = pc.split_pattern(text, "\x02")         # the empty item after a final \x02 has no \x01: dropped
        flat = parts.flatten()
        parents = pc.list_parent_indices(parts).to_numpy()
        data = flat.buffers()[2] or pa.py_buffer(b"")
        u8 = np.frombuffer(data, dtype=np.uint8)
        offsets = np.frombuffer(flat.buffers()[1], dtype=np.int32)[flat.offset:flat.offset + len(flat) + 1]
        sep = pc.find_substring(flat, "\x01").to_numpy(zero_copy_only=False).astype(np.int64)
        ok = sep >= 0
        start = offsets[:-1].astype(np.int64)[ok]
        end = offsets[1:].astype(np.int64)[ok]
        sep = sep[ok]
        self.keys = slices(data, u8, start, sep, pa.string())
        self.values = slices(data, u8, start + sep + 1, end - start - sep - 1, pa.string())
        self.parents = parents[ok]
        counts = np.bincount(self.parents, minlength=n)
        map_offsets = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(counts, out=map_offsets[1:])
        self.map = pa.MapArray.from_arrays(pa.array(map_offsets), self.keys, self.values)
        self.n = n

    def get(self, name: str) -> pa.Array:
        """The value of property *name* per record (null where absent; the last one wins)."""
        hit = np.flatnonzero(pc.equal(self.keys, name).to_numpy(zero_copy_only=False))
        take = np.full(self.n, -1, dtype=np.int64)
        take[self.parents[hit]] = hit
        return self.values.take(pa.array(take, mask=take < 0))


def _same_or_slices(data: pa.Buffer, u8: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A string column that is usually one value repeated (the topic): checked, then repeated."""
    n = len(starts)
    first = int(lengths[0])
    if (lengths == first).all() and first <= 255:
        cells = _window(u8, starts, max(first, 1))[:, :first]
        if (cells == cells[0]).all():
            return pa.repeat(pa.scalar(bytes(cells[0]).decode(errors="replace"), pa.string()), n)
    return slices(data, u8, starts, lengths, pa.string())


def _timestamps(ms: np.ndarray) -> pa.Array:
    return pa.array(ms.astype(np.int64) * 1000, type=TIMESTAMP)


def decode(buf, base_offset: int, positions: np.ndarray, sizes: np.ndarray, *, broker: str | None,
           store_columns: bool) -> list[pa.RecordBatch]:
    """Record batches for the records at *positions* (relative to *buf*) of the given *sizes*.

    *base_offset* is the log offset of ``buf[0]`` when *buf* is a segment (0 for a pull body; the
    records' own PHYSICALOFFSET fields are used either way).
    """
    positions = np.asarray(positions, dtype=np.int64)
    sizes = np.asarray(sizes, dtype=np.int64)
    schema = STORE_SCHEMA if store_columns else TOPIC_SCHEMA
    if len(positions) == 0:
        return []
    u8 = np.frombuffer(buf, dtype=np.uint8)
    h = read_headers(u8, positions)
    special = (h["magic"] != MAGIC_V1) | ((h["sysflag"] & (BORNHOST_V6 | STOREHOST_V6)) != 0)
    out = []
    if special.any():
        plain = ~special
        odd = [StoredMessage(bytes(u8[p:p + s])) for p, s in zip(positions[special].tolist(), sizes[special].tolist())]
        positions, sizes, h = positions[plain], sizes[plain], h[plain]
    else:
        odd = []
    if len(positions):
        out.append(_decode_plain(buf, u8, positions, h, broker, schema))
    if odd:
        out.append(_decode_slow(odd, broker, schema))
    return out


def _decode_plain(buf, u8, pos, h, broker, schema) -> pa.RecordBatch:
    n = len(pos)
    data = pa.py_buffer(buf)
    body_start = pos + HEADER_V4_DTYPE.itemsize
    body_len = h["body_len"].astype(np.int64)
    topic_pos = body_start + body_len
    topic_len = u8[topic_pos].astype(np.int64)
    props_pos = topic_pos + 1 + topic_len
    props_len = gather_be(u8, props_pos, 2)
    props = Properties(slices(data, u8, props_pos + 2, props_len, pa.string()))
    sysflag = h["sysflag"].astype(np.int32)
    body = slices(data, u8, body_start, body_len)
    if (sysflag & COMPRESSED).any():
        body = _inflate(body, sysflag)
    phys = h["phys"].astype(np.int64)
    uniq = props.get("UNIQ_KEY")
    msg_id = uniq if uniq.null_count == 0 else pc.coalesce(uniq, offset_msg_ids(
        np.ascontiguousarray(h["store_host"]).view(np.uint8).reshape(n, 8), phys))
    columns = {
        "topic": _same_or_slices(data, u8, topic_pos + 1, topic_len),
        "broker": pa.nulls(n, pa.string()) if broker is None else pa.repeat(pa.scalar(broker, pa.string()), n),
        "queue_id": pa.array(h["qid"].astype(np.int32)),
        "queue_offset": pa.array(h["qoff"].astype(np.int64)),
        "keys": props.get("KEYS"),
        "tags": props.get("TAGS"),
        "body": body,
        "properties": props.map,
        "msg_id": msg_id,
        "born_timestamp": _timestamps(h["born_ts"]),
        "store_timestamp": _timestamps(h["store_ts"]),
        "reconsume_times": pa.array(h["recon"].astype(np.int32)),
        "physical_offset": pa.array(phys),
        "sysflag": pa.array(sysflag),
    }
    return pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=schema)


def _inflate(body: pa.Array, sysflag: np.ndarray) -> pa.Array:
    values = body.to_pylist()
    for i in np.flatnonzero(sysflag & COMPRESSED).tolist():
        values[i] = plain_body(values[i], COMPRESSED)
    return pa.array(values, type=pa.binary())


def _decode_slow(msgs: list[StoredMessage], broker, schema) -> pa.RecordBatch:
    rows = {name: [] for name in schema.names}
    for m in msgs:
        props = m.properties
        body = plain_body(m.body, m.sys_flag)
        row = {"topic": m.topic, "broker": broker, "queue_id": m.queue_id, "queue_offset": m.queue_offset,
               "keys": props.get("KEYS"), "tags": props.get("TAGS"), "body": body,
               "properties": list(props.items()), "msg_id": props.get("UNIQ_KEY") or m.msg_id,
               "born_timestamp": m.born_timestamp * 1000, "store_timestamp": m.store_timestamp * 1000,
               "reconsume_times": m.reconsume_times, "physical_offset": m.physical_offset, "sysflag": m.sys_flag}
        for name in schema.names:
            rows[name].append(row[name])
    return pa.RecordBatch.from_arrays([pa.array(rows[f.name], type=f.type) for f in schema], schema=schema)
