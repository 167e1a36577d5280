"""Walking the CommitLog fast: record boundaries, validation, and dispatch rows parsed back.

Recovery must check every record from the checkpoint on (1 GiB in well under 3 s), so the walk
is split in two: a tight loop that only follows TOTALSIZE fields to collect record positions,
then numpy checks over all positions at once (magic, PHYSICALOFFSET, length arithmetic), then
one CRC pass.  The first record that fails any check ends the valid data; the caller decides
whether that is a torn tail (truncate) or corruption (stop).
"""

from __future__ import annotations

import logging
import os
import struct
import sys
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from rocketq.common.crc import raw_crc32_for
from rocketq.common.properties import decode_properties
from rocketq.common.sysflag import BORNHOST_V6, PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, STOREHOST_V6
from rocketq.store.dispatcher import DispatchBatch
from rocketq.store.record import (BLANK_MAGIC, MAGIC_V1, MAGIC_V2, RecordError, StoredMessage, check_record,
                                  header_struct)

log = logging.getLogger(__name__)

_INT = struct.Struct(">i")
_MIN_RECORD = header_struct(False, False).size + 3


@dataclass
class SegmentScan:
    """Result of walking one segment from ``start``."""

    positions: np.ndarray          # int64 start of each valid record (segment-relative)
    sizes: np.ndarray              # int64
    end: int                       # segment-relative end of valid data
    blank: bool                    # the segment was closed by a blank record at ``end``
    error: RecordError | None      # why the walk stopped early, None at clean end of data


def scan_segment(buf, base_offset: int, start: int, limit: int, *, check_crc: bool,
                 parallel: bool = True) -> SegmentScan:
    """Walk and check records from *start*; *parallel* lets the large passes use a forked second core
    (recovery; not where the caller already runs one task per core, as Spark's readers do)."""
    pos_arr, size_arr, stop = find_records(buf, start, limit, parallel=parallel)
    first_bad = _first_invalid(buf, pos_arr, size_arr, base_offset, check_crc, parallel)
    if first_bad is not None:
        stop = int(pos_arr[first_bad])
        pos_arr, size_arr = pos_arr[:first_bad], size_arr[:first_bad]
    return _classify_stop(buf, base_offset, stop, limit, pos_arr, size_arr, check_crc)


MAGIC_CHUNK_WORDS = 16 << 20
_MAGIC_V1_NATIVE = int.from_bytes(MAGIC_V1.to_bytes(4, "big"), sys.byteorder)


PARALLEL_MAGIC_MIN_BYTES = 64 << 20


def _magic_positions(buf, start: int, limit: int, parallel: bool = True) -> np.ndarray:
    """Sorted byte positions p in [start+4, limit) holding the V1 record magic (two cores when large)."""
    if limit - start < PARALLEL_MAGIC_MIN_BYTES or not parallel:
        return _magic_positions_in(buf, start, limit)
    mid = (start + limit) // 2
    # the first half finds magics starting at or before mid, the second those starting after it
    first, second = on_two_cores(lambda: _magic_positions_in(buf, start, mid + 4),
                                 lambda: _magic_positions_in(buf, mid - 3, limit).tobytes())
    second = np.frombuffer(second, dtype=np.int64)
    return np.concatenate([first, second[second > (first[-1] if len(first) else -1)]])


def _magic_positions_in(buf, start: int, limit: int) -> np.ndarray:
    """Sorted byte positions p in [start+4, limit) holding the V1 record magic.

    Four native-order uint32 views of the buffer, shifted by 0..3 bytes, cover every alignment;
    comparing them with the (byte-swapped) magic finds every candidate in a few vectorised passes.
    V2 records (2-byte topic length, for topics over 127 bytes) are picked up by the chain walk.
    """
    found = []
    for k in range(4):
        first_word = max(0, (start + 4 - k + 3) // 4)
        end_word = (limit - k) // 4
        for w0 in range(first_word, end_word, MAGIC_CHUNK_WORDS):
            w1 = min(end_word, w0 + MAGIC_CHUNK_WORDS)
            words = np.frombuffer(buf, dtype="=u4", count=w1 - w0, offset=k + 4 * w0)
            hits = np.flatnonzero(words == _MAGIC_V1_NATIVE)
            if len(hits):
                found.append((hits + w0) * 4 + k)
    if not found:
        return np.zeros(0, dtype=np.int64)
    out = np.concatenate(found).astype(np.int64)
    out.sort(kind="stable")            # sorted runs, one per alignment: timsort merges them in one pass
    return out


FIRST_WINDOW_BYTES = 16 << 20
MAX_WINDOW_BYTES = 256 << 20


def find_records(buf, start: int, limit: int, *, parallel: bool = True) -> tuple[np.ndarray, np.ndarray, int]:
    """Record positions and sizes from *start*, following TOTALSIZE from magic candidates.

    Candidates come from :func:`_magic_positions`; the chain ``next = pos + size`` must land on
    the next candidate.  A candidate inside a record (the magic bytes occurring in a body) is
    skipped; the walk stops where the chain leads to no candidate (end of data, a blank record,
    or damage), which the caller then classifies.  V2-magic records are taken one at a time.

    Candidates are searched window by window (16 MiB, doubling up to 256 MiB), each window
    starting where the chain has got to: the walk of a segment that is mostly unwritten (the
    newest one after a crash, 1 GiB preallocated with a few records in it) stops after one small
    window instead of searching the zeros up to *limit*.
    """
    pos_parts, size_parts = [], []
    window = FIRST_WINDOW_BYTES
    while True:
        search_end = min(limit, start + window)
        pos, sizes, stop = _find_records_in(buf, start, search_end, limit, parallel)
        pos_parts.append(pos)
        size_parts.append(sizes)
        # a record at `stop` would have had its magic (stop+4 .. stop+8) inside this window
        if search_end >= limit or stop + 8 <= search_end:
            break
        start, window = stop, min(2 * window, MAX_WINDOW_BYTES)
    if len(pos_parts) == 1:
        return pos_parts[0], size_parts[0], stop
    return np.concatenate(pos_parts), np.concatenate(size_parts), stop


def _find_records_in(buf, start: int, search_end: int, limit: int,
                     parallel: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`find_records` with candidates from ``[start, search_end)`` only (records may end up to *limit*)."""
    empty = np.zeros(0, dtype=np.int64)
    starts = _magic_positions(buf, start, search_end, parallel) - 4
    if len(starts) == 0 or starts[0] > start:
        starts = empty
    u8 = np.frombuffer(buf, dtype=np.uint8)
    sizes = gather_be(u8, np.minimum(starts, len(u8) - 4), 4, signed=True)
    ends = starts + sizes
    sane = (sizes >= _MIN_RECORD) & (ends <= limit) & (starts + HEADER_V4_DTYPE.itemsize <= limit)
    ok = np.zeros(len(starts), dtype=bool)
    ok[:-1] = ends[:-1] == starts[1:]
    ok &= sane
    breaks = np.flatnonzero(~ok)
    runs: list[np.ndarray] = []            # index ranges into starts, or (-1 - position) for V2 records
    v2_sizes: dict[int, int] = {}
    i = int(np.searchsorted(starts, start))
    stop = start
    while True:
        if i < len(starts) and starts[i] == stop and sane[i]:
            b = int(breaks[np.searchsorted(breaks, i)])       # last record of this run (ok is False there)
            last = b if sane[b] else b - 1
            runs.append(np.arange(i, last + 1))
            stop = int(ends[last])
            if not sane[b]:
                break
            i = int(np.searchsorted(starts, stop))
            continue
        v2 = _v2_record_size(buf, stop, limit)
        if not v2:
            break
        v2_sizes[stop] = v2
        stop += v2
        i = int(np.searchsorted(starts, stop))
    if v2_sizes:        # rare: rebuild in log order with V2 records merged in
        pos = np.sort(np.concatenate([starts[np.concatenate(runs)] if runs else empty,
                                      np.array(list(v2_sizes), dtype=np.int64)]))
        return pos, _sizes_at(pos, starts, sizes, v2_sizes), stop
    if not runs:
        return empty, empty, start
    if len(runs) == 1:                     # the usual case: one unbroken chain, take views
        sl = slice(int(runs[0][0]), int(runs[0][-1]) + 1)
        return starts[sl], sizes[sl], stop
    idx = np.concatenate(runs)
    return starts[idx], sizes[idx], stop


def _sizes_at(pos: np.ndarray, starts: np.ndarray, sizes: np.ndarray, v2: dict[int, int]) -> np.ndarray:
    where = np.searchsorted(starts, pos)
    out = sizes[np.minimum(where, len(sizes) - 1)] if len(sizes) else np.zeros(len(pos), dtype=np.int64)
    for j, p in enumerate(pos.tolist()):
        if p in v2:
            out[j] = v2[p]
    return out


def _v2_record_size(buf, pos: int, limit: int) -> int:
    """Size of a V2-magic record at *pos*, or 0."""
    if limit - pos < _MIN_RECORD:
        return 0
    size, magic = struct.unpack_from(">iI", buf, pos)
    return size if magic == MAGIC_V2 and _MIN_RECORD <= size <= limit - pos else 0


def _classify_stop(buf, base_offset, stop, limit, pos_arr, size_arr, check_crc) -> SegmentScan:
    if limit - stop < 8:
        return SegmentScan(pos_arr, size_arr, stop, False, None)
    size, magic = struct.unpack_from(">iI", buf, stop)
    if magic == BLANK_MAGIC and size == limit - stop:
        return SegmentScan(pos_arr, size_arr, stop, True, None)
    if size == 0 and magic == 0:
        return SegmentScan(pos_arr, size_arr, stop, False, None)
    try:   # say precisely what is wrong with the record where the walk stopped
        check_record(buf, stop, limit, offset=base_offset + stop, check_crc=check_crc)
        err = RecordError(base_offset + stop, "record is valid but the walk stopped here")
    except RecordError as exc:
        err = exc
    return SegmentScan(pos_arr, size_arr, stop, False, err)


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


HEADER_CHUNK_RECORDS = 1 << 18      # headers are checked in 23 MiB pieces, which stay in cache and reuse memory


def _first_invalid(buf, pos: np.ndarray, sizes: np.ndarray, base: int, check_crc: bool,
                   parallel: bool = True) -> int | None:
    """Index of the first record failing a check, or None (vectorised header checks, then CRC).

    Records with IPv6 hosts or the V2 magic have other offsets; they are checked one by one.
    """
    n = len(pos)
    if n == 0:
        return None
    u8 = np.frombuffer(buf, dtype=np.uint8)
    body_len = np.empty(n, dtype=np.int64)
    stored_crc = np.empty(n, dtype=np.int64)
    special = np.empty(n, dtype=bool)
    limit = n
    for c in range(0, n, HEADER_CHUNK_RECORDS):
        sl = slice(c, min(n, c + HEADER_CHUNK_RECORDS))
        bad = _check_headers(buf, u8, pos[sl], sizes[sl], base, body_len[sl], stored_crc[sl], special[sl])
        if bad is not None:
            limit = c + bad
            break
    if check_crc:
        plain = ~special[:limit]
        check = _first_crc_mismatch_parallel if parallel else _first_crc_mismatch
        crc_bad = check(buf, pos[:limit][plain], body_len[:limit][plain], stored_crc[:limit][plain])
        if crc_bad is not None:
            return int(np.flatnonzero(plain)[crc_bad])
    return limit if limit < n else None


def _check_headers(buf, u8, pos, sizes, base, body_len_out, crc_out, special_out) -> int | None:
    """Header checks for one chunk; fills the output columns, returns the first bad index or None."""
    h = read_headers(u8, pos)
    special = (h["magic"] != MAGIC_V1) | ((h["sysflag"] & (BORNHOST_V6 | STOREHOST_V6)) != 0)
    body_len = h["body_len"].astype(np.int64)
    body_len_out[:] = body_len
    crc_out[:] = h["crc"]
    special_out[:] = special
    topic_pos = pos + HEADER_V4_DTYPE.itemsize + body_len
    in_rec = (body_len >= 0) & (topic_pos + 3 <= pos + sizes)
    topic_len = gather_be(u8, np.where(in_rec, topic_pos, pos), 1)
    props_pos = topic_pos + 1 + topic_len
    props_len = gather_be(u8, np.where(in_rec & (props_pos + 2 <= pos + sizes), props_pos, pos), 2)
    ok = ((h["phys"] == base + pos) & in_rec & (props_pos + 2 + props_len == pos + sizes)) | special
    bad = np.flatnonzero(~ok)
    limit = int(bad[0]) if len(bad) else len(pos)
    for i in np.flatnonzero(special[:limit]).tolist():
        try:
            check_record(buf, int(pos[i]), int(pos[i] + sizes[i]), offset=base + int(pos[i]), check_crc=True)
        except RecordError:
            return i
    return limit if limit < len(pos) else None


def unwritten_tails(buf, pos: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """For records already past the header checks: True where the last byte of the topic/properties
    tail (the properties' last byte, or the topic's when there are no properties) is zero."""
    u8 = np.frombuffer(buf, dtype=np.uint8)
    if len(pos) == 0:
        return np.zeros(0, dtype=bool)
    h = read_headers(u8, pos)
    special = (h["magic"] != MAGIC_V1) | ((h["sysflag"] & (BORNHOST_V6 | STOREHOST_V6)) != 0)
    topic_pos = pos + HEADER_V4_DTYPE.itemsize + h["body_len"].astype(np.int64)
    topic_pos = np.where(special, pos, topic_pos)
    topic_len = gather_be(u8, topic_pos, 1)
    props_len = gather_be(u8, np.minimum(topic_pos + 1 + topic_len, len(u8) - 2), 2)
    last = np.where(props_len > 0, pos + sizes - 1, topic_pos + topic_len)
    torn = (u8[last] == 0) | (topic_len == 0)
    for i in np.flatnonzero(special).tolist():      # IPv6 hosts / V2 magic: other offsets
        m = StoredMessage(bytes(buf[int(pos[i]):int(pos[i] + sizes[i])]))
        tail = m.properties_string or m.topic
        torn[i] = not tail or tail[-1] == "\x00"
    return torn


def _v2_ok(buf, pos: int, size: int, base: int) -> bool:
    try:
        check_record(buf, pos, pos + size, offset=base + pos, check_crc=False)
        return True
    except RecordError:
        return False


PARALLEL_CRC_MIN_RECORDS = 200_000


def on_two_cores(local, remote):
    """``(local(), remote())`` with ``remote`` run in a forked child at the same time.

    ``remote`` must return bytes; the child shares the parent's mappings, writes its answer to a
    pipe and leaves with ``os._exit`` without touching anything else.  Where fork is unavailable or
    the child fails, ``remote`` runs here afterwards.  Recovery uses it for its two largest passes.
    """
    if not hasattr(os, "fork"):
        return local(), remote()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                                   # child
        try:
            data = remote()
            os.write(w, struct.pack(">q", len(data)))
            view = memoryview(data)
            while view:
                view = view[os.write(w, view):]
        finally:
            os._exit(0)
    os.close(w)
    try:
        mine = local()
        head = _read_exactly(r, 8)
        theirs = _read_exactly(r, struct.unpack(">q", head)[0]) if len(head) == 8 else None
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    if theirs is None:
        log.warning("the helper process of a parallel scan failed; doing its half here")
        theirs = remote()
    return mine, theirs


def _read_exactly(fd: int, n: int) -> bytes:
    parts, left = [], n
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _first_crc_mismatch_parallel(buf, pos, body_len, stored) -> int | None:
    """:func:`_first_crc_mismatch` with the second half of the records checked by another core."""
    n = len(pos)
    if n < PARALLEL_CRC_MIN_RECORDS:
        return _first_crc_mismatch(buf, pos, body_len, stored)
    mid = n // 2

    def second() -> bytes:
        found = _first_crc_mismatch(buf, pos[mid:], body_len[mid:], stored[mid:])
        return struct.pack(">q", -1 if found is None else found)

    first, data = on_two_cores(lambda: _first_crc_mismatch(buf, pos[:mid], body_len[:mid], stored[:mid]), second)
    if first is not None:
        return first
    found = struct.unpack(">q", data)[0]
    return None if found < 0 else mid + found


def _first_crc_mismatch(buf, pos, body_len, stored) -> int | None:
    """Index of the first record whose body CRC is wrong (C-level maps; no Python loop per record)."""
    if len(pos) == 0:
        return None
    starts = pos + HEADER_V4_DTYPE.itemsize
    mv = memoryview(buf)
    try:
        crc32 = raw_crc32_for(int(body_len.max()))
        views = map(mv.__getitem__, map(slice, starts.tolist(), (starts + body_len).tolist()))
        crcs = np.fromiter(map(crc32, views), dtype=np.int64, count=len(pos))
    finally:
        mv.release()
    bad = np.flatnonzero((crcs & 0x7FFFFFFF) != stored)
    return int(bad[0]) if len(bad) else None


def gather_be(u8: np.ndarray, at: np.ndarray, width: int, *, signed: bool = False) -> np.ndarray:
    """Big-endian integers of *width* bytes at every position in *at*, as int64.

    2- and 4-byte fields come from an overlapping (n, width) byte view, one row gather per field;
    8-byte fields are two 4-byte halves; single bytes are a plain gather.
    """
    if width == 8:
        return (gather_be(u8, at, 4) << 32) | gather_be(u8, at + 4, 4)
    if width in (2, 4):
        rows = as_strided(u8, shape=(max(0, len(u8) - width + 1), width), strides=(1, 1), writeable=False)
        out = rows[at].view(">u4" if width == 4 else ">u2").ravel().astype(np.int64)
    else:
        out = np.zeros(len(at), dtype=np.int64)
        for j in range(width):
            out = (out << 8) | u8[at + j]
    if signed and width == 4:
        out = np.where(out >= 1 << 31, out - (1 << 32), out)
    return out


def parse_rows(buf, base_offset: int, positions: np.ndarray, sizes: np.ndarray) -> DispatchBatch:
    """Rebuild dispatch columns for records already in the log (recovery and rebuild)."""
    topics, qids, flags, tags, keys, uniqs, props, qoffs, ts = [], [], [], [], [], [], [], [], []
    for p in positions.tolist():
        sys_flag = _INT.unpack_from(buf, p + 36)[0]
        st = header_struct(bool(sys_flag & BORNHOST_V6), bool(sys_flag & STOREHOST_V6))
        h = st.unpack_from(buf, p)
        q = p + st.size + h[16]
        magic = h[1]
        tlen = buf[q] if magic == MAGIC_V1 else int.from_bytes(buf[q:q + 2], "big")
        q += 1 if magic == MAGIC_V1 else 2
        topic = bytes(buf[q:q + tlen]).decode(errors="replace")
        q += tlen
        plen = int.from_bytes(buf[q:q + 2], "big")
        text = bytes(buf[q + 2:q + 2 + plen]).decode(errors="replace")
        pr = decode_properties(text)
        topics.append(topic); qids.append(h[3]); flags.append(sys_flag); qoffs.append(h[5]); ts.append(h[11])
        tags.append(pr.get(PROPERTY_TAGS)); keys.append(pr.get(PROPERTY_KEYS)); uniqs.append(pr.get(PROPERTY_UNIQ_KEY))
        props.append(text)
    return DispatchBatch(positions.astype(np.int64) + base_offset, sizes.astype(np.int64), qoffs,
                         np.array(ts, dtype=np.int64), tuple(topics), tuple(qids), tuple(flags), tuple(tags),
                         tuple(keys), tuple(uniqs), tuple(props))
