"""Segments are faulted in read-only ahead of the writer (MADV_POPULATE_READ), dirtying nothing."""

import resource
import time

import numpy as np
import pytest

from rocketq.store import Message, MessageStore, StoreConfig
from rocketq.store.allocator import AllocateService
from rocketq.store.mapped_file import MappedFile

SIZE = 4 << 20


def _read_faults(mf: MappedFile) -> int:
    """Minor faults taken reading one byte of every page of *mf*."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    view = np.frombuffer(mf._mm, dtype=np.uint8)
    int(view[::4096].sum())
    del view
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def _smaps_kb(path, field: str) -> int:
    """*field* (e.g. ``Rss``, ``Shared_Dirty``) of this process's mapping of *path*, in kB."""
    lines = open("/proc/self/smaps").read().splitlines()
    for i, line in enumerate(lines):
        if line.endswith(" " + str(path)):
            for entry in lines[i + 1:]:
                if entry.startswith(field + ":"):
                    return int(entry.split()[1])
    raise AssertionError(f"no mapping of {path}")


def _dirty_kb(path) -> int:
    return _smaps_kb(path, "Shared_Dirty") + _smaps_kb(path, "Private_Dirty")


def test_a_prefaulted_segment_reads_without_faults_and_nothing_is_dirtied(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cold, warm = MappedFile(tmp_path / "a" / f"{0:020d}", SIZE), MappedFile(tmp_path / "b" / f"{0:020d}", SIZE)
    try:
        try:
            warm._mm.madvise(22, 0, 4096)          # MADV_POPULATE_READ
        except OSError:
            pytest.skip("this kernel has no MADV_POPULATE_READ (Linux 5.14+): prefault() does nothing here")
        warm.prefault()
        assert _read_faults(cold) >= SIZE // 4096 // 32          # ~1 fault per 16 pages (fault-around)
        assert _read_faults(warm) <= 4
        assert _smaps_kb(warm.path, "Rss") >= SIZE // 1024 - 4 and _dirty_kb(warm.path) == 0
        warm.warm()                                            # the write warm-up, for contrast
        assert _dirty_kb(warm.path) >= SIZE // 1024 - 4
    finally:
        cold.close()
        warm.close()


def test_segments_made_in_the_foreground_are_prefaulted_behind_the_writer(tmp_path, monkeypatch):
    done = []
    monkeypatch.setattr(MappedFile, "prefault", lambda self: done.append(self.path.name))
    allocator = AllocateService(lambda p: MappedFile(p, SIZE), prefault=True)
    try:
        allocator.get(tmp_path / "00000000000000000000", None)
        deadline = time.monotonic() + 10
        while done != ["00000000000000000000"]:
            assert time.monotonic() < deadline, done
            time.sleep(0.01)
    finally:
        allocator.shutdown()


def test_the_store_prefaults_its_first_and_next_segments_but_not_when_warming(tmp_path, monkeypatch):
    done = []
    monkeypatch.setattr(MappedFile, "prefault", lambda self: done.append(self.path.name))
    cfg = dict(commitlog_file_size=1 << 20, consume_queue_entries=1000, index_slots=101, index_max_entries=400)
    with MessageStore(StoreConfig(store_path=tmp_path / "s", **cfg)) as store:
        for _ in range(12):
            assert store.put_messages([Message(topic="P", body=b"x" * 1000, queue_id=0)] * 10).ok
        deadline = time.monotonic() + 10
        while not {"00000000000000000000", "00000000000001048576"} <= set(done):
            assert time.monotonic() < deadline, done
            time.sleep(0.01)
    done.clear()
    with MessageStore(StoreConfig(store_path=tmp_path / "w", warm_mapped_file_enable=True, **cfg)) as store:
        assert store.put_messages([Message(topic="P", body=b"x" * 1000, queue_id=0)] * 10).ok
    assert done == []
