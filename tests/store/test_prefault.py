"""Segments are faulted in read-only ahead of the writer (MADV_POPULATE_READ), dirtying nothing."""

import resource
import threading
import time

import numpy as np
import pytest

from rocketq.store import Message, MessageStore, StoreConfig
from rocketq.store import allocator
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


def test_under_sync_flush_the_warmed_zeros_are_on_disk_before_the_first_put(tmp_path):
    """Else the first group commit writes the whole segment's zeros while producers wait for it."""
    cfg = dict(commitlog_file_size=SIZE, consume_queue_entries=1000, index_slots=101, index_max_entries=400,
               warm_mapped_file_enable=True)
    with MessageStore(StoreConfig(store_path=tmp_path / "sync", flush_disk_type="SYNC_FLUSH", **cfg)) as store:
        segment = store.commitlog.files.last.path
        assert _smaps_kb(segment, "Rss") >= SIZE // 1024 - 4 and _dirty_kb(segment) == 0
        assert store.put_message(Message(topic="P", body=b"x")).ok
    with MessageStore(StoreConfig(store_path=tmp_path / "async", flush_disk_type="ASYNC_FLUSH", **cfg)) as store:
        assert _dirty_kb(store.commitlog.files.last.path) >= SIZE // 1024 - 4     # written back by the flushes


def _until(what, predicate, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.005)


def record_prefaults(monkeypatch) -> list[tuple[str, int | None]]:
    """(segment file name, end) of every ``MappedFile.prefault`` call from now on (each still runs),
    with the allocator's window made small: 1 MiB ahead, in steps of at least 256 KiB."""
    calls = []
    real = MappedFile.prefault

    def recorded(self, end=None):
        calls.append((self.path.name, end))
        return real(self, end)
    monkeypatch.setattr(MappedFile, "prefault", recorded)
    monkeypatch.setattr(allocator, "PREFAULT_AHEAD_BYTES", 1 << 20)
    monkeypatch.setattr(allocator, "PREFAULT_MIN_STEP_BYTES", 256 << 10)
    return calls


def test_the_allocator_maps_a_window_ahead_of_the_writer_only(tmp_path, monkeypatch):
    calls = record_prefaults(monkeypatch)
    ends = lambda: [end for _, end in calls]
    service = AllocateService(lambda p: MappedFile(p, SIZE), prefault=True)
    try:
        mf = service.get(tmp_path / f"{0:020d}", None)
        _until("the first window", lambda: ends() == [1 << 20])
        assert _read_faults(mf) > 8                               # the rest of the segment is left alone
        mf.wrote = (1 << 20) + 100_000                            # the writer moves on
        _until("the next window", lambda: ends()[-1:] == [(2 << 20) + 100_000])
        mf.wrote = SIZE - 10
        _until("up to the end", lambda: ends()[-1:] == [SIZE])
    finally:
        service.shutdown()


def test_the_window_spills_into_the_segment_made_ahead_which_is_never_mapped_whole(tmp_path, monkeypatch):
    calls = record_prefaults(monkeypatch)
    first, second, third = (tmp_path / f"{i * SIZE:020d}" for i in range(3))
    service = AllocateService(lambda p: MappedFile(p, SIZE), prefault=True)
    try:
        mf = service.get(first, second)                           # the second is made ahead ...
        _until("the first window", lambda: calls == [(first.name, 1 << 20)])
        _until("the second made", lambda: second in service._ready)
        time.sleep(0.1)                                           # ... and left alone (nothing to wait on)
        assert [c for c in calls if c[0] == second.name] == []
        mf.wrote = SIZE - (512 << 10)                              # the window now ends 512 KiB into the second
        _until("the spill", lambda: (second.name, 512 << 10) in calls)
        assert (first.name, SIZE) in calls
        nxt = service.get(second, third)                          # handed over: followed from where it was mapped
        assert service._followed is nxt
        _until("the rest of its first window", lambda: calls[-1:] == [(second.name, 1 << 20)])
        nxt.wrote = 300 << 10
        _until("the next window", lambda: calls[-1:] == [(second.name, (1 << 20) + (300 << 10))])
        assert all(end is not None and end < SIZE for name, end in calls if name == second.name)
    finally:
        service.shutdown()


def test_the_store_follows_its_first_and_restart_segments(tmp_path, monkeypatch):
    followed = []
    real = AllocateService.follow
    monkeypatch.setattr(AllocateService, "follow", lambda self, mf: (followed.append(mf.path.name), real(self, mf)))
    cfg = dict(commitlog_file_size=1 << 20, consume_queue_entries=1000, index_slots=101, index_max_entries=400)
    with MessageStore(StoreConfig(store_path=tmp_path / "s", prefault_mapped_file_enable=True, **cfg)) as store:
        for _ in range(150):
            assert store.put_messages([Message(topic="P", body=b"x" * 1000, queue_id=0)] * 10).ok
    assert followed == ["00000000000000000000", "00000000000001048576"]     # made in the foreground, made ahead
    followed.clear()
    with MessageStore(StoreConfig(store_path=tmp_path / "s", prefault_mapped_file_enable=True, **cfg)) as store:
        assert followed == ["00000000000001048576"]                          # a restart: the last one


def test_nothing_is_prefaulted_when_warming_or_switched_off(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(MappedFile, "prefault", lambda self, end=None: calls.append(end))
    cfg = dict(commitlog_file_size=1 << 20, consume_queue_entries=1000, index_slots=101, index_max_entries=400)
    for name, extra in (("w", {"warm_mapped_file_enable": True}), ("o", {"prefault_mapped_file_enable": False})):
        with MessageStore(StoreConfig(store_path=tmp_path / name, **extra, **cfg)) as store:
            assert store.put_messages([Message(topic="P", body=b"x" * 1000, queue_id=0)] * 10).ok
            time.sleep(0.1)           # give a wrongly started follower time to show itself (no condition to wait on)
    assert calls == []


def test_a_segment_the_writer_stopped_waiting_for_is_not_deleted_by_the_late_allocator(tmp_path, monkeypatch):
    """The writer waits ALLOCATE_WAIT_TIMEOUT_S for a segment made ahead, then opens it itself;
    when the background allocation finishes after that, the file (now in use) must stay."""
    entered, release, made = threading.Event(), threading.Event(), []
    first, second = tmp_path / f"{0:020d}", tmp_path / f"{SIZE:020d}"

    def factory(path):
        if threading.current_thread().name != "rocketq-allocate":
            return MappedFile(path, SIZE)                 # the writer's own, in the foreground
        entered.set()
        release.wait(10)
        made.append(MappedFile(path, SIZE))
        return made[-1]

    monkeypatch.setattr(allocator, "ALLOCATE_WAIT_TIMEOUT_S", 0.05)
    service = AllocateService(factory)
    try:
        service.get(first, second)                      # queues the second: made slowly in the background
        assert entered.wait(10)
        mine = service.get(second, None)                # gives up waiting, opens it in the foreground
        mine.append(b"acknowledged")
        release.set()
        _until("the late allocation is let go", lambda: made and made[0].closed)
        assert second.exists() and second.read_bytes()[:12] == b"acknowledged"
    finally:
        service.shutdown()
