"""The set of index files (RocketMQ ``IndexService``): key lookups by topic, key and time range.

Files are named by creation time (``yyyyMMddHHmmssSSS``) and filled one after the other; a new one
starts when the newest is full.  The index is derived state: after a crash, files written after
the checkpoint's index timestamp are deleted and the store dispatches the log again from the
newest remaining file's end, so nothing is missing and nothing half-written is trusted.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rocketq.common.javahash import index_hash, index_hash_many
from rocketq.store.index_file import IndexFile

log = logging.getLogger(__name__)


@dataclass
class QueryResult:
    phy_offsets: list[int]
    last_update_timestamp: int
    last_update_phy_offset: int


def _file_name(ms: int) -> str:
    t = time.localtime(ms / 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ms % 1000:03d}"


class IndexService:
    def __init__(self, directory: Path, *, slot_count: int = 5_000_000, max_entries: int = 20_000_000,
                 clock_ms=lambda: int(time.time() * 1000)):
        self.directory = Path(directory)
        self.slot_count = slot_count
        self.max_entries = max_entries
        self._clock_ms = clock_ms
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()

    def load(self, *, clean_shutdown: bool, checkpoint_ms: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for path in sorted(p for p in self.directory.iterdir() if p.name.isdigit()):
            f = IndexFile(path, self.slot_count, self.max_entries, create=False)
            if not clean_shutdown and f.end_timestamp > checkpoint_ms:
                log.info("recovery: deleting index file %s written after the checkpoint", path.name)
                f.destroy()
                continue
            self.files.append(f)

    @property
    def max_phy_offset(self) -> int:
        for f in reversed(self.files):
            if f.index_count > 1:
                return f.end_phy_offset
        return -1

    def _new_file(self) -> IndexFile:
        ms = self._clock_ms()
        while (self.directory / _file_name(ms)).exists():
            ms += 1
        f = IndexFile(self.directory / _file_name(ms), self.slot_count, self.max_entries, create=True)
        if self.files:
            self.files[-1].flush()
        self.files.append(f)
        return f

    def put_batch(self, keys: list[str], phy_offsets: np.ndarray, store_ts: np.ndarray, *, prefix: str = "") -> None:
        """Index ``prefix + key`` for each key (the prefix is folded into the hash, not concatenated)."""
        if not keys:
            return
        floor = self.max_phy_offset
        hashes = index_hash_many(keys, prefix)
        phy_offsets = np.asarray(phy_offsets, dtype=np.int64)
        store_ts = np.asarray(store_ts, dtype=np.int64)
        if floor >= 0:
            keep = phy_offsets > floor
            if not keep.all():
                hashes, phy_offsets, store_ts = hashes[keep], phy_offsets[keep], store_ts[keep]
        with self._lock:
            done = 0
            while done < len(hashes):
                f = self.files[-1] if self.files and not self.files[-1].is_full() else self._new_file()
                done += f.put(hashes[done:], phy_offsets[done:], store_ts[done:])

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> QueryResult:
        h = index_hash(f"{topic}#{key}")
        out: list[int] = []
        with self._lock:
            files = list(self.files)
        for f in reversed(files):
            if len(out) >= max_num:
                break
            if f.index_count <= 1 or f.end_timestamp < begin_ms or f.begin_timestamp > end_ms:
                continue
            out.extend(f.select(h, max_num - len(out), begin_ms, end_ms))
        last = files[-1] if files else None
        return QueryResult(out, last.end_timestamp if last else 0, last.end_phy_offset if last else 0)

    def flush(self) -> int:
        with self._lock:
            files = list(self.files)
        for f in files:
            f.flush()
        return files[-1].end_timestamp if files else 0

    def delete_expired(self, min_commitlog_offset: int) -> list[Path]:
        gone = []
        with self._lock:
            while len(self.files) > 1 and self.files[0].end_phy_offset < min_commitlog_offset:
                f = self.files.pop(0)
                f.destroy()
                gone.append(f.path)
        return gone

    def close(self) -> None:
        with self._lock:
            for f in self.files:
                f.close()
            self.files = []
