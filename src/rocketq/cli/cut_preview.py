"""What ``rocketq store repair --truncate-at OFFSET`` would drop, worked out before anything changes.

The repair asks for confirmation, and the question must say how much it throws away: the bytes
from OFFSET to the end of the log's data, how many records that is, and how many segment files
go.  This module reads the CommitLog segments (read-only mappings) and follows the record chain
by its TOTALSIZE fields, as the record layout in :mod:`rocketq.store.record` describes:
``int32 TOTALSIZE | int32 MAGIC | ...``, a blank record ``int32 remaining | int32 BLANK_MAGIC``
closing a full segment, zeros after the last record.  Body CRCs are not checked: a record whose
body is damaged still has a sound header, so the chain runs through it.

It refuses a cut that would leave half a record behind (OFFSET inside a record or inside a
segment's blank padding), or that lies beyond a point where the chain already stops parsing
(the damage would stay).  When the chain stops on damage at or after OFFSET, the end of the data
is taken as the last non-zero byte of that segment, and only the records before the damage are
counted.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rocketq.store.record import BLANK_MAGIC, MAGIC_V1, MAGIC_V2

_SIZE_MAGIC = struct.Struct(">iI")
MIN_RECORD_BYTES = 91                  # fixed header + 1-byte topic length + 2-byte properties length
NONZERO_SCAN_STEP_BYTES = 1 << 20


class CutError(ValueError):
    """The offset cannot be a cut point (outside the log, inside a record, past damage)."""


@dataclass(frozen=True)
class CutPreview:
    cut_at: int
    log_end: int              # end of the log's data
    records: int              # records at or after cut_at
    segments_deleted: int     # segment files that start after cut_at
    exact: bool               # False: the chain stopped on damage; records is a lower bound and
                              # log_end the end of the non-zero bytes
    damaged_at: int | None    # the first offset at or after cut_at where the chain stops parsing

    @property
    def dropped_bytes(self) -> int:
        return max(0, self.log_end - self.cut_at)


@dataclass(frozen=True)
class _Chain:
    end: int                           # segment-relative end of the records that parse
    stop: str                          # "zeros", "blank", "garbage" or "full"
    records_from: int                  # records starting at or after the walk's from_pos
    straddle: tuple[int, int] | None   # a record starting before from_pos and ending after it


def preview_cut(store_path: Path, cut_at: int) -> CutPreview:
    segments = _segments(Path(store_path) / "commitlog")
    size = segments[0][1].stat().st_size
    first, limit = segments[0][0], segments[-1][0] + size
    if not first <= cut_at <= limit:
        raise CutError(f"offset {cut_at} is outside the commitlog files, which cover [{first}, {limit})")
    records, log_end, exact, damaged_at = 0, cut_at, True, None
    for base, path in segments:
        if base + size <= cut_at:
            continue
        rel = max(0, cut_at - base)
        with _mapped(path) as buf:
            chain = _walk(buf, size, rel)
            if base <= cut_at:
                _check_cut_point(chain, base, cut_at)
            end = chain.end
            if chain.stop == "garbage":
                exact = False
                damaged_at = base + chain.end if damaged_at is None else damaged_at
                end = max(end, _last_nonzero(buf, chain.end, size))
            elif chain.stop == "blank":
                end = size
        records += chain.records_from
        if end > 0:
            log_end = max(log_end, base + end)
    deleted = sum(1 for base, _ in segments if base > cut_at)
    return CutPreview(cut_at, log_end, records, deleted, exact, damaged_at)


def _segments(directory: Path) -> list[tuple[int, Path]]:
    if not directory.is_dir():
        raise CutError(f"{directory} does not exist; is this a store directory?")
    found = sorted((int(p.name), p) for p in directory.iterdir() if len(p.name) == 20 and p.name.isdigit())
    if not found:
        raise CutError(f"{directory} has no commitlog segments")
    return found


class _mapped:
    """A read-only mapping of a whole file, closed with its descriptor."""

    def __init__(self, path: Path):
        self._fd = os.open(path, os.O_RDONLY)
        self._mm = mmap.mmap(self._fd, 0, access=mmap.ACCESS_READ)

    def __enter__(self) -> mmap.mmap:
        return self._mm

    def __exit__(self, *exc) -> None:
        self._mm.close()
        os.close(self._fd)


def _walk(buf, size: int, from_pos: int) -> _Chain:
    """Follow TOTALSIZE from the segment start; count records at or after *from_pos*."""
    pos = records = 0
    straddle = None
    unpack = _SIZE_MAGIC.unpack_from
    while pos + 8 <= size:
        total, magic = unpack(buf, pos)
        if magic == BLANK_MAGIC:
            return _Chain(pos, "blank", records, straddle)
        if magic not in (MAGIC_V1, MAGIC_V2) or not MIN_RECORD_BYTES <= total <= size - pos:
            return _Chain(pos, "zeros" if total == 0 and magic == 0 else "garbage", records, straddle)
        if pos >= from_pos:
            records += 1
        elif pos + total > from_pos:
            straddle = (pos, pos + total)
        pos += total
    return _Chain(pos, "full", records, straddle)


def _check_cut_point(chain: _Chain, base: int, cut_at: int) -> None:
    rel = cut_at - base
    if chain.straddle is not None:
        start, end = chain.straddle
        raise CutError(f"offset {cut_at} is inside the record at {base + start} ({end - start} bytes); "
                       f"cut at a record's start, e.g. {base + start} or {base + end}")
    if rel > chain.end:
        if chain.stop == "garbage":
            raise CutError(f"the log stops parsing at offset {base + chain.end}, before {cut_at}: that cut would "
                           f"keep the damage; cut at {base + chain.end} instead")
        if chain.stop == "blank":
            raise CutError(f"offset {cut_at} is in the blank padding that closes segment {base}; "
                           f"cut at {base + chain.end} or at the next segment's start")
        raise CutError(f"offset {cut_at} is past the end of the data, {base + chain.end}; nothing to cut")


def _last_nonzero(buf, start: int, size: int) -> int:
    """Segment-relative position just after the last non-zero byte in [start, size), else start."""
    data = np.frombuffer(buf, dtype=np.uint8)
    hi = size
    while hi > start:
        lo = max(start, hi - NONZERO_SCAN_STEP_BYTES)
        chunk = data[lo:hi]
        if chunk.any():
            return lo + int(np.flatnonzero(chunk)[-1]) + 1
        hi = lo
    return start
