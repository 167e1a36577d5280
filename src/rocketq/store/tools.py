"""Offline tools over a store directory: verify, dump, rebuild, repair.

All of them take the store's process lock, so they refuse to run against a live broker.

* ``verify_store`` walks every CommitLog record (magic, size, physical offset, CRC), checks that
  every consumable record has the right unit in its consume queue (offset, size, tags code),
  that queues hold nothing the log does not, and that every key and unique key is in the index.
* ``dump_records`` yields every record as a JSON-friendly dict.
* ``rebuild_store`` throws consume queues and index away and dispatches the whole log again;
  they are derived state.
* ``repair_store`` cuts the log at a given record offset (dropping it and everything after),
  then rebuilds.  It is the explicit, audited way past corruption that start-up refuses to skip.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from rocketq.common.javahash import index_hash, tag_hash
from rocketq.store.checkpoint import CheckpointFile
from rocketq.store.config import StoreConfig
from rocketq.store.config_files import read_json
from rocketq.store.consume_queue import CQ_DTYPE, CQ_UNIT_SIZE
from rocketq.store.consume_queue_ext import MAX_ADDR as EXT_MAX_ADDR
from rocketq.store.consume_queue_ext import undecorate
from rocketq.store.mapped_file_queue import MappedFileQueue
from rocketq.store.record import MAGIC_V1, MAGIC_V2, StoredMessage
from rocketq.store.scan import parse_rows, scan_segment
from rocketq.store.store_files import ProcessLock, StorePaths, create_abort_marker

Progress = Callable[[int, int], None] | None
MAX_PROBLEMS = 1000


@dataclass
class VerifyReport:
    ok: bool = True
    problems: list[str] = field(default_factory=list)
    records: int = 0
    bytes: int = 0
    queues: int = 0
    index_keys: int = 0

    def problem(self, text: str) -> None:
        self.ok = False
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)


@dataclass
class RebuildReport:
    records: int
    queues: int
    index_keys: int
    dropped_bytes: int = 0


def load_geometry(paths: StorePaths) -> StoreConfig:
    """The file sizes this store was written with (``config/storeGeometry.json``, else from the files)."""
    data = read_json(paths.geometry) or {}
    size = data.get("commitlogFileSize")
    if size is None:
        files = sorted(p for p in paths.commitlog.iterdir() if p.name.isdigit()) if paths.commitlog.is_dir() else []
        if not files:
            raise FileNotFoundError(f"{paths.root} has no commitlog segments")
        size = files[0].stat().st_size
    defaults = StoreConfig
    return StoreConfig(store_path=paths.root, commitlog_file_size=int(size),
                       consume_queue_entries=int(data.get("consumeQueueEntries", defaults.consume_queue_entries)),
                       index_slots=int(data.get("indexSlots", defaults.index_slots)),
                       index_max_entries=int(data.get("indexMaxEntries", defaults.index_max_entries)),
                       message_index_enable=bool(data.get("messageIndexEnable", True)))


def _segment_size(paths: StorePaths) -> int:
    return load_geometry(paths).commitlog_file_size


class _Locked:
    def __init__(self, path: Path):
        self.paths = StorePaths(path)
        self.paths.check_is_store()
        if not self.paths.commitlog.is_dir():
            raise FileNotFoundError(f"{path} is not a store: it has no commitlog/ directory")
        self._lock = ProcessLock(self.paths.lock)

    def __enter__(self) -> StorePaths:
        self._lock.acquire()
        return self.paths

    def __exit__(self, *exc) -> None:
        self._lock.release()


def _walk_log(paths: StorePaths, report: VerifyReport | None, progress: Progress, *, rows: bool):
    """Yield (segment, scan, parsed rows or None) for each run of valid records, recording problems.

    A damaged record whose size field is still plausible is reported and stepped over, so one
    flipped byte yields one problem, not a cascade; anything else ends that segment's walk.
    """
    size = _segment_size(paths)
    files = MappedFileQueue(paths.commitlog, size)
    files.load()
    total = len(files.files) * size
    try:
        for i, mf in enumerate(files.files):
            start = 0
            while True:
                scan = scan_segment(mf.buffer(), mf.file_from_offset, start, size, check_crc=True)
                parsed = parse_rows(mf.buffer(), mf.file_from_offset, scan.positions, scan.sizes) \
                    if rows and len(scan.positions) else None
                yield mf, scan, parsed
                if scan.error is None:
                    break
                if report is not None:
                    report.problem(f"{mf.path}: {scan.error}")
                skip = _plausible_size(mf.buffer(), scan.end, size)
                if not skip:
                    break
                start = scan.end + skip
            if not scan.blank and scan.error is None and i < len(files.files) - 1 and report is not None:
                report.problem(f"{mf.path}: data ends at offset {mf.file_from_offset + scan.end} "
                               f"but later segments exist")
            if progress:
                progress((i + 1) * size, total)
    finally:
        files.close(flush=False)


def _plausible_size(buf, pos: int, limit: int) -> int:
    """The TOTALSIZE at *pos* if a record of that size with a record magic could be there, else 0."""
    if limit - pos < 8:
        return 0
    total = int.from_bytes(buf[pos:pos + 4], "big", signed=True)
    magic = int.from_bytes(buf[pos + 4:pos + 8], "big")
    return total if magic in (MAGIC_V1, MAGIC_V2) and 91 <= total <= limit - pos else 0


def verify_store(path: Path, *, progress: Progress = None) -> VerifyReport:
    report = VerifyReport()
    with _Locked(Path(path)) as paths:
        if paths.abort.exists():
            report.problems.append("note: the abort marker is present (the last run did not shut down cleanly); "
                                   "start the store once to recover before trusting this report")
        expected: dict[tuple[str, int], list] = {}
        keys: list[str] = []
        key_phys: list[int] = []
        for mf, scan, batch in _walk_log(paths, report, progress, rows=True):
            report.records += len(scan.positions)
            report.bytes += scan.end
            if batch is None:
                continue
            _collect(batch, expected, keys, key_phys)
        _verify_queues(paths, expected, report)
        _verify_index(paths, keys, key_phys, report)
    return report


def _collect(rows, expected, keys, key_phys) -> None:
    for r in rows:
        if not r.sys_flag & 0x4:
            expected.setdefault((r.topic, r.queue_id), []).append((r.queue_offset, r.physical_offset, r.size, r.tags))
        if r.sys_flag & 0xC == 0xC:
            continue
        for k in r.keys + ([r.uniq_key] if r.uniq_key else []):
            keys.append(f"{r.topic}#{k}")
            key_phys.append(r.physical_offset)


def _verify_queues(paths: StorePaths, expected: dict, report: VerifyReport) -> None:
    from rocketq.common.sysflag import SCHEDULE_TOPIC
    entries = load_geometry(paths).consume_queue_entries
    on_disk = set()
    if paths.consumequeue.is_dir():
        on_disk = {(t.name, int(q.name)) for t in paths.consumequeue.iterdir() if t.is_dir()
                   for q in t.iterdir() if q.name.isdigit()}
    for key in sorted(set(expected) | on_disk):
        report.queues += 1
        units = _read_queue(paths, key, entries)
        want = expected.get(key, [])
        where = f"consume queue {key[0]}/{key[1]}"
        real = np.flatnonzero(units["size"] != 0x7FFFFFFF) if len(units) else np.zeros(0, dtype=np.int64)
        if want and len(units) < want[-1][0] + 1:
            report.problem(f"{where}: has {len(units)} units, the log has messages up to offset {want[-1][0]}")
        for qoff, phy, size, tags in want:
            if qoff >= len(units):
                break
            u = units[qoff]
            code = int(u["tag"])
            if code <= EXT_MAX_ADDR:                 # the bit-map prefilter moved the tags code to the ext file
                code = _ext_tags_code(paths, key, code)
            tag_ok = key[0] == SCHEDULE_TOPIC or code == tag_hash(tags)
            if int(u["phy"]) != phy or int(u["size"]) != size or not tag_ok:
                report.problem(f"{where} offset {qoff}: unit ({int(u['phy'])}, {int(u['size'])}, {int(u['tag'])}) "
                               f"but the log has the record at {phy} (size {size}, tags {tags!r})")
        if len(real) and (not want or int(real[-1]) > want[-1][0]):
            report.problem(f"{where}: units past the last message the log holds for it "
                           f"(unit offset {int(real[-1])})")


def _ext_tags_code(paths: StorePaths, key: tuple[str, int], address: int) -> int | None:
    """The tags code of the ext unit at *address* (None when it is not there)."""
    qdir = paths.consumequeue_ext / key[0] / str(key[1])
    files = sorted(p for p in qdir.iterdir() if p.name.isdigit()) if qdir.is_dir() else []
    if not files:
        return None
    real, size = undecorate(address), files[0].stat().st_size
    path = qdir / f"{real - real % size:020d}"
    if not path.is_file():
        return None
    with path.open("rb") as f:
        f.seek(real % size)
        head = f.read(10)
    return int.from_bytes(head[2:10], "big", signed=True) if len(head) == 10 else None


def _read_queue(paths: StorePaths, key: tuple[str, int], entries: int) -> np.ndarray:
    qdir = paths.consumequeue / key[0] / str(key[1])
    if not qdir.is_dir():
        return np.zeros(0, dtype=CQ_DTYPE)
    parts = []
    files = sorted(p for p in qdir.iterdir() if p.name.isdigit())
    if files and int(files[0].name):
        parts.append(np.zeros(int(files[0].name) // CQ_UNIT_SIZE, dtype=CQ_DTYPE))
        parts[-1]["size"] = 0x7FFFFFFF
    for f in files:
        units = np.fromfile(f, dtype=CQ_DTYPE)
        valid = np.flatnonzero(~((units["phy"] >= 0) & (units["size"] > 0)))
        parts.append(units[:int(valid[0])] if len(valid) else units)
    return np.concatenate(parts) if parts else np.zeros(0, dtype=CQ_DTYPE)


def _verify_index(paths: StorePaths, keys: list[str], key_phys: list[int], report: VerifyReport) -> None:
    if not paths.index.is_dir() or not keys or not load_geometry(paths).message_index_enable:
        return
    present = set()
    slots = load_geometry(paths).index_slots
    for f in sorted(paths.index.iterdir()):
        if f.name.isdigit():
            present.update(_index_pairs(f, slots))
    if not present:
        report.problem(f"{paths.index}: no index entries, but the log has {len(keys)} keys")
        return
    hashes = [index_hash(k) for k in keys]
    report.index_keys = len(keys)
    missing = [(k, p) for k, h, p in zip(keys, hashes, key_phys) if (h, p) not in present]
    for k, p in missing[:20]:
        report.problem(f"index: key {k!r} of the record at {p} is not indexed")
    if len(missing) > 20:
        report.problem(f"index: {len(missing) - 20} more keys are not indexed")


def _index_pairs(path: Path, slots: int) -> set[tuple[int, int]]:
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    count = int.from_bytes(raw[36:40].tobytes(), "big")
    entry = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("tdiff", ">i4"), ("prev", ">i4")])
    ents = np.frombuffer(raw, dtype=entry, count=max(0, count - 1), offset=40 + slots * 4 + 20)
    return set(zip(ents["hash"].tolist(), ents["phy"].tolist()))


def dump_records(path: Path, *, from_offset: int = 0) -> Iterator[dict]:
    with _Locked(Path(path)) as paths:
        for mf, scan, _ in _walk_log(paths, None, None, rows=False):
            buf = mf.buffer()
            for pos, size in zip(scan.positions.tolist(), scan.sizes.tolist()):
                if mf.file_from_offset + pos >= from_offset:
                    yield StoredMessage(bytes(buf[pos:pos + size])).to_dict()
            if scan.error is not None:
                yield {"error": str(scan.error), "file": str(mf.path)}


def rebuild_store(path: Path, *, progress: Progress = None) -> RebuildReport:
    """Delete consume queues and index and dispatch the whole log again."""
    from rocketq.store.message_store import MessageStore
    paths = StorePaths(Path(path))
    with _Locked(Path(path)):
        shutil.rmtree(paths.consumequeue, ignore_errors=True)
        shutil.rmtree(paths.consumequeue_ext, ignore_errors=True)
        shutil.rmtree(paths.index, ignore_errors=True)
        cp = CheckpointFile(paths.checkpoint)
        cp.value.logics_flushed_offset = 0
        cp.value.logics_msg_timestamp = 0
        cp.value.index_msg_timestamp = 0
        cp.close()
        create_abort_marker(paths.abort)
        config = load_geometry(paths)
    store = MessageStore(config)
    store.start()
    try:
        report = RebuildReport(store.recovery.redispatched_records, sum(map(len, store.topics().values())), 0)
    finally:
        store.shutdown()
    if progress:
        progress(1, 1)
    return report


def repair_store(path: Path, *, truncate_at: int) -> RebuildReport:
    """Cut the log at *truncate_at* (a record's offset) and rebuild queues and index."""
    paths = StorePaths(Path(path))
    with _Locked(Path(path)):
        size = _segment_size(paths)
        files = MappedFileQueue(paths.commitlog, size)
        files.load()
        end = files.max_offset()
        if not files.min_offset() <= truncate_at <= end:
            files.close(flush=False)
            raise ValueError(f"offset {truncate_at} is outside the log [{files.min_offset()}, {end})")
        files.truncate(truncate_at)
        files.flush()
        files.close(flush=False)
        cp = CheckpointFile(paths.checkpoint)
        cp.value.physic_flushed_offset = min(cp.value.physic_flushed_offset, truncate_at)
        cp.close()
    report = rebuild_store(path)
    report.dropped_bytes = end - truncate_at
    return report
