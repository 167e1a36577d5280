"""Walking the CommitLog fast: record boundaries, validation, and dispatch rows parsed back.

Recovery must check every record from the checkpoint on (1 GiB in well under 3 s), so the walk
is split in two: a tight loop that only follows TOTALSIZE fields to collect record positions,
then numpy checks over all positions at once (magic, PHYSICALOFFSET, length arithmetic), then
one CRC pass.  The first record that fails any check ends the valid data; the caller decides
whether that is a torn tail (truncate) or corruption (stop).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from rocketq.common.crc import raw_crc32_for
from rocketq.common.properties import decode_properties
from rocketq.common.sysflag import BORNHOST_V6, PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, STOREHOST_V6
from rocketq.store.dispatcher import DispatchBatch
from rocketq.store.record import BLANK_MAGIC, MAGIC_V1, MAGIC_V2, RecordError, check_record, header_struct

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


def walk(buf, start: int, limit: int) -> tuple[list[int], list[int], int]:
    """Follow TOTALSIZE fields from *start*; returns (positions, sizes, stop position).

    Stops at a size that cannot be a record (zero, negative, too small, past *limit*) without
    judging it; the checks come after.
    """
    unpack = _INT.unpack_from
    positions: list[int] = []
    sizes: list[int] = []
    pos = start
    end = limit - _MIN_RECORD
    append_p, append_s = positions.append, sizes.append
    while pos <= end:
        size = unpack(buf, pos)[0]
        if size < _MIN_RECORD or pos + size > limit:
            break
        append_p(pos)
        append_s(size)
        pos += size
    return positions, sizes, pos


def scan_segment(buf, base_offset: int, start: int, limit: int, *, check_crc: bool) -> SegmentScan:
    positions, sizes, stop = walk(buf, start, limit)
    pos_arr = np.array(positions, dtype=np.int64)
    size_arr = np.array(sizes, dtype=np.int64)
    first_bad = _first_invalid(buf, pos_arr, size_arr, base_offset, check_crc)
    if first_bad is not None:
        stop = int(pos_arr[first_bad])
        pos_arr, size_arr = pos_arr[:first_bad], size_arr[:first_bad]
    return _classify_stop(buf, base_offset, stop, limit, pos_arr, size_arr, check_crc)


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


def _first_invalid(buf, pos: np.ndarray, sizes: np.ndarray, base: int, check_crc: bool) -> int | None:
    """Index of the first record failing a check, or None (vectorised header checks, then CRC)."""
    n = len(pos)
    if n == 0:
        return None
    u8 = np.frombuffer(buf, dtype=np.uint8)
    magic = _gather_be(u8, pos + 4, 4)
    phys = _gather_be(u8, pos + 28, 8)
    sysflag = _gather_be(u8, pos + 36, 4)
    v6 = (sysflag & (BORNHOST_V6 | STOREHOST_V6)) != 0
    hdr = np.where(v6, 88 + 12 * ((sysflag & BORNHOST_V6) != 0) + 12 * ((sysflag & STOREHOST_V6) != 0), 88)
    body_len = _gather_be(u8, np.minimum(pos + hdr - 4, pos + sizes - 4), 4, signed=True)
    topic_pos = pos + hdr + body_len
    in_rec = (body_len >= 0) & (topic_pos + 3 <= pos + sizes)
    topic_len = _gather_be(u8, np.where(in_rec, topic_pos, pos), 1)
    props_pos = topic_pos + 1 + topic_len
    props_len = _gather_be(u8, np.where(in_rec & (props_pos + 2 <= pos + sizes), props_pos, pos), 2)
    ok = ((magic == MAGIC_V1) | (magic == MAGIC_V2)) & (phys == base + pos) & in_rec \
        & (props_pos + 2 + props_len == pos + sizes) & (magic == MAGIC_V1)
    # V2 records (2-byte topic length, only for topics > 127 bytes) are checked one by one below
    bad = np.flatnonzero(~ok)
    limit = int(bad[0]) if len(bad) else n
    if len(bad):
        for i in bad:
            if int(magic[i]) == MAGIC_V2 and _v2_ok(buf, int(pos[i]), int(sizes[i]), base):
                continue
            limit = int(i)
            break
        else:
            limit = n
    if check_crc:
        crc_bad = _first_crc_mismatch(buf, pos[:limit], hdr[:limit], body_len[:limit], u8)
        if crc_bad is not None:
            return crc_bad
    return limit if limit < n else None


def _v2_ok(buf, pos: int, size: int, base: int) -> bool:
    try:
        check_record(buf, pos, pos + size, offset=base + pos, check_crc=False)
        return True
    except RecordError:
        return False


def _first_crc_mismatch(buf, pos, hdr, body_len, u8) -> int | None:
    """Index of the first record whose body CRC is wrong (C-level maps; no Python loop per record)."""
    if len(pos) == 0:
        return None
    stored = _gather_be(u8, pos + 8, 4)
    starts = pos + hdr
    mv = memoryview(buf)
    try:
        views = map(mv.__getitem__, map(slice, starts.tolist(), (starts + body_len).tolist()))
        crc32 = raw_crc32_for(int(body_len.max()))
        crcs = np.fromiter(map(crc32, views), dtype=np.int64, count=len(pos))
    finally:
        mv.release()
    bad = np.flatnonzero((crcs & 0x7FFFFFFF) != stored)
    return int(bad[0]) if len(bad) else None


_WIDTH_DTYPE = {1: np.dtype(">u1"), 2: np.dtype(">u2"), 4: np.dtype(">u4"), 8: np.dtype(">i8")}


def _gather_be(u8: np.ndarray, at: np.ndarray, width: int, *, signed: bool = False) -> np.ndarray:
    """Big-endian integers of *width* bytes at every position in *at*, as int64 (one gather per field)."""
    rows = np.take(u8, at[:, None] + np.arange(width))
    out = rows.view(_WIDTH_DTYPE[width]).ravel().astype(np.int64)
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
