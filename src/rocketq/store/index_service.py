"""The set of index files (RocketMQ ``IndexService``): key lookups by topic, key and time range.

Theory of operation
-------------------
Index files are filled one after the other; when the newest is full, the next batch starts a new
one.  A file is named by its creation time, ``yyyyMMddHHmmssSSS`` in local time as Java formats
it, so name order is creation order and the newest file is the last name::

    index/20260101120000000   entries 1 .. max_entries-1   (full)
    index/20260101121502318   entries 1 .. k                (being filled)

A query walks the files newest to oldest, skipping those whose [beginTimestamp, endTimestamp]
misses the asked range, and stops at the first file that began before the range.

The index is derived state, rebuilt from the CommitLog when in doubt:

* After a crash, every file whose endTimestamp is after the checkpoint's index timestamp may be
  half written, so it is deleted (RocketMQ ``IndexService.load``), and so is every file after it,
  keeping the index a prefix of the log.
* ``max_phy_offset`` (the newest entry's CommitLog offset) tells the store where to dispatch the
  log again from; ``put_batch`` drops keys at or below it, so a re-dispatched record is not
  indexed twice.

Invariants: the newest file is never deleted by expiry; ``flush`` returns a timestamp only after
every entry stored up to it is on disk.  One lock serialises puts, queries and changes to the file
list; syncing happens outside it, so a flush never stalls the dispatcher.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rocketq.common.javahash import index_hash
from rocketq.store.index_file import FIRST_ENTRY, IndexFile

log = logging.getLogger(__name__)

NAME_DIGITS = 17                    # yyyyMMddHHmmssSSS
DEFAULT_SLOT_COUNT = 5_000_000      # slots per file (RocketMQ maxHashSlotNum)
DEFAULT_MAX_ENTRIES = 20_000_000    # entry numbers per file, entry 0 unused (RocketMQ maxIndexNum)


@dataclass
class QueryResult:
    phy_offsets: list[int]          # candidate CommitLog offsets, newest first; hashes can collide
    last_update_timestamp: int      # endTimestamp of the newest file with entries, 0 if none
    last_update_phy_offset: int     # endPhyOffset of that file, 0 if none


def file_name(ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` of epoch milliseconds *ms*, in local time."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(ms // 1000)) + f"{ms % 1000:03d}"


def _name_ms(name: str) -> int:
    """Epoch milliseconds of a file name (the inverse of :func:`file_name`), 0 if it is no date."""
    try:
        return int(time.mktime(time.strptime(name[:14], "%Y%m%d%H%M%S"))) * 1000 + int(name[14:])
    except (ValueError, OverflowError):
        return 0


def _is_index_name(name: str) -> bool:
    return len(name) == NAME_DIGITS and name.isdigit()


class IndexService:
    def __init__(self, directory: Path, *, slot_count: int = DEFAULT_SLOT_COUNT,
                 max_entries: int = DEFAULT_MAX_ENTRIES, clock_ms=lambda: int(time.time() * 1000)):
        if slot_count < 1 or max_entries < 2:
            raise ValueError(f"index geometry {slot_count} slots / {max_entries} entries is impossible")
        self.directory = Path(directory)
        self.slot_count = slot_count
        self.max_entries = max_entries
        self._clock_ms = clock_ms
        self._files: list[IndexFile] = []
        self._lock = threading.Lock()

    @property
    def files(self) -> list[IndexFile]:
        with self._lock:
            return list(self._files)

    def load(self, *, clean_shutdown: bool, checkpoint_ms: int) -> None:
        """Open the files in the directory, oldest first.  After a crash (*clean_shutdown* False),
        delete those written after *checkpoint_ms*: the store dispatches the log again instead."""
        self.directory.mkdir(parents=True, exist_ok=True)
        for stray in self.directory.glob("*.tmp"):          # an interrupted file creation
            log.warning("removing %s, left by an interrupted index file creation", stray)
            stray.unlink(missing_ok=True)
        paths = sorted(p for p in self.directory.iterdir() if _is_index_name(p.name) and p.is_file())
        opened: list[IndexFile] = []
        try:
            for path in paths:
                opened.append(IndexFile(path, self.slot_count, self.max_entries, create=False))
        except BaseException:
            for f in opened:
                f.close()
            raise
        if not clean_shutdown:
            opened = _drop_after_checkpoint(opened, checkpoint_ms)
        with self._lock:
            for f in self._files:
                f.close()
            self._files = opened

    @property
    def max_phy_offset(self) -> int:
        """CommitLog offset of the newest indexed record, -1 when nothing is indexed."""
        with self._lock:
            newest = self._newest_with_entries()
            return newest.end_phy_offset if newest else -1

    def _newest_with_entries(self) -> IndexFile | None:
        for f in reversed(self._files):
            if f.index_count > FIRST_ENTRY:
                return f
        return None

    def put_run(self, run) -> None:
        """Index a dispatch run's entries (``topic#key`` hashes at their CommitLog offsets and store
        times, built natively); entries at or below :attr:`max_phy_offset` are skipped, so a
        re-dispatched record is not indexed twice."""
        total = run.index_entries
        with self._lock:
            newest = self._newest_with_entries()
            done = 0
            if newest is not None:                      # a re-dispatch or a retry: skip what is held
                end = newest.end_phy_offset
                after = run.index_first_after(end)
                if after:                               # else all are newer: the live case, nothing to skip
                    done = self._already_indexed(run.index_first_at(end), after, end)
            while done < total:
                done += self._writable_file().put_run(run, done)

    def put_batch(self, keys: list[str], phy_offsets, store_ts, *, prefix: str = "") -> None:
        """Index ``prefix + key`` of each key at its CommitLog offset and store time (ms); offsets must
        not decrease, and those at or below :attr:`max_phy_offset` are skipped (tools and tests; the
        dispatcher uses :meth:`put_run`)."""
        if len(phy_offsets) != len(keys) or len(store_ts) != len(keys):
            raise ValueError(f"{len(keys)} keys but {len(phy_offsets)} offsets and {len(store_ts)} store times")
        entries = [(index_hash(prefix + k), int(p), int(t)) for k, p, t in zip(keys, phy_offsets, store_ts)]
        with self._lock:
            newest = self._newest_with_entries()
            if newest is not None:
                end = newest.end_phy_offset
                phys = [e[1] for e in entries]
                entries = entries[self._already_indexed(bisect.bisect_left(phys, end), bisect.bisect_right(phys, end),
                                                        end):]
            done = 0
            while done < len(entries):
                done += self._writable_file().put(entries[done:])

    def _already_indexed(self, below: int, upto: int, end: int) -> int:
        """How many leading entries of a put (offsets not decreasing) the index holds already: the
        *below* ones under *end*, the newest entry's offset, and as many of the ``upto - below`` at *end*
        as the index ends with.  The last count matters when a put stopped between two keys of one
        record (a full disk when the next file was to be created): the retry writes exactly the keys
        that are missing."""
        if upto == below:
            return below
        held = 0
        for f in reversed(self._files):
            count = f.tail_count(end)
            held += count
            if count < f.index_count - FIRST_ENTRY:
                break
        return below + min(held, upto - below)

    def _writable_file(self) -> IndexFile:
        if self._files and not self._files[-1].is_full():
            return self._files[-1]
        ms = self._clock_ms()
        if self._files:     # names must sort in creation order even if the clock went back
            ms = max(ms, _name_ms(self._files[-1].path.name) + 1)
        while (self.directory / file_name(ms)).exists():
            ms += 1
        f = IndexFile(self.directory / file_name(ms), self.slot_count, self.max_entries, create=True)
        log.info("index: new file %s", f.path.name)
        self._files.append(f)
        return f

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> QueryResult:
        """Candidate offsets of *topic*'s messages with *key* stored in [begin_ms, end_ms], newest
        first, at most *max_num* (RocketMQ ``IndexService.queryOffset``)."""
        key_hash = index_hash(f"{topic}#{key}")
        out: list[int] = []
        with self._lock:
            newest = self._newest_with_entries()
            for f in reversed(self._files):
                if len(out) >= max_num:
                    break
                h = f.header()
                if h.index_count <= FIRST_ENTRY:
                    continue
                if h.begin_timestamp <= end_ms and h.end_timestamp >= begin_ms:
                    out.extend(f.select(key_hash, max_num - len(out), begin_ms, end_ms))
                if h.begin_timestamp < begin_ms:
                    break       # older files end before this one began, so before the range
            if newest is None:
                return QueryResult(out, 0, 0)
            return QueryResult(out, newest.end_timestamp, newest.end_phy_offset)

    def flush(self) -> int:
        """Sync every file with unsynced entries; return the store time up to which the index is
        on disk (the checkpoint's index timestamp), 0 when there are no entries."""
        with self._lock:
            files = list(self._files)
            newest = self._newest_with_entries()
            covered = newest.end_timestamp if newest else 0    # read before syncing, never after
        for f in files:
            f.flush()
        return covered

    def delete_expired(self, min_commitlog_offset: int) -> list[Path]:
        """Delete the oldest files whose entries all point below *min_commitlog_offset* (the log
        was cleaned there); the newest file is always kept."""
        expired: list[IndexFile] = []
        with self._lock:
            while len(self._files) > 1 and self._files[0].end_phy_offset < min_commitlog_offset:
                expired.append(self._files.pop(0))
        for f in expired:       # unreachable now; destroying outside the lock never stalls a put
            f.destroy()
            log.info("index: deleted expired file %s", f.path.name)
        return [f.path for f in expired]

    def close(self) -> None:
        with self._lock:
            files, self._files = self._files, []
        for f in files:
            f.close()


def _drop_after_checkpoint(files: list[IndexFile], checkpoint_ms: int) -> list[IndexFile]:
    """Delete the first file that ends after *checkpoint_ms* and every later one; keep the rest."""
    cut = next((i for i, f in enumerate(files) if f.end_timestamp > checkpoint_ms), len(files))
    for f in files[cut:]:
        log.warning("index recovery: deleting %s (ends at %d, after the checkpoint's %d)",
                    f.path, f.end_timestamp, checkpoint_ms)
        f.destroy()
    return files[:cut]
