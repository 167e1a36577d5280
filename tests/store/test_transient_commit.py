"""The transient store pool's commit writes the buffer to the file with pwrite, never through the mapping.

What the tests watch: the segment's mapping in this process (``/proc/self/smaps``: pages mapped,
pages dirtied through it).  A commit with ``pwrite`` puts the bytes in the page cache without
mapping a page; a copy into the mapping (or a warm-up / prefault of it) maps every page it
touches, and the kernel zeroes each fresh one first.  The bytes must still be what a reader sees
through the mapping and what the file holds.
"""

from __future__ import annotations

import os
import random
import textwrap
import threading
import time
from pathlib import Path

import pytest
from store_helpers import new_seed, wait_until
from test_crash import SINGLE_PUTS_HEAD, body_for, puts_then_kill
from test_prefault import _dirty_kb, _smaps_kb, record_prefaults

from rocketq.store import Message, MessageStore, StoreConfig
from rocketq.store.allocator import AllocateService
from rocketq.store.mapped_file import OS_PAGE_SIZE, MappedFile
from rocketq.store.transient_pool import TransientStorePool

SIZE = 4 << 20
MAPPED_SLACK_KB = 16          # a few pages: what madvise / fault-around may map besides what a test touched


def _pooled(tmp_path, pool: TransientStorePool | None = None) -> MappedFile:
    mf = MappedFile(tmp_path / f"{0:020d}", SIZE, transient_pool=pool or TransientStorePool(1, SIZE))
    assert mf.write_buffer is not None
    return mf


def test_a_commit_writes_the_file_without_mapping_a_page(tmp_path):
    data = os.urandom((1 << 20) + 100)
    mf = _pooled(tmp_path)
    try:
        mf.append(data)
        assert mf.commit() == len(data) and mf.committed == len(data)
        assert _smaps_kb(mf.path, "Rss") <= MAPPED_SLACK_KB, "the commit went through the mapping"
        assert mf.path.read_bytes()[:len(data)] == data
        assert mf.read(0, len(data)) == data                      # readers: the mapping, the same page cache
    finally:
        mf.close()


def test_a_pooled_segment_is_neither_warmed_nor_prefaulted(tmp_path):
    mf = _pooled(tmp_path)
    try:
        mf.append(b"x" * 5000)
        mf.prefault()
        mf.warm()
        assert _smaps_kb(mf.path, "Rss") <= MAPPED_SLACK_KB and _dirty_kb(mf.path) == 0
    finally:
        mf.close()


def test_commits_of_any_size_leave_the_file_equal_to_what_was_appended(tmp_path):
    """Appends and commits of random sizes, commits ending mid-page (the next one rewrites that page
    from its start): the file, the mapping and read() agree with the bytes appended."""
    seed = new_seed()
    rng = random.Random(seed)
    mf = _pooled(tmp_path)
    expected = bytearray()
    try:
        while mf.remaining > 0:
            chunk = rng.randbytes(min(mf.remaining, rng.choice((1, 7, 100, 4095, 4096, 4097, 70_000, 300_000))))
            mf.append(chunk)
            expected += chunk
            if rng.random() < 0.4:
                mf.commit()
                assert mf.committed == mf.wrote, f"seed {seed}"
            pos = rng.randrange(len(expected))
            size = rng.randrange(min(len(expected) - pos, 10_000)) + 1
            assert mf.read(pos, size) == expected[pos:pos + size], f"seed {seed}: read({pos}, {size})"
        mf.commit()
        assert mf.write_buffer is None, f"seed {seed}: a full, committed segment gives its buffer back"
        with open(mf.path, "rb") as f:
            assert f.read() == expected, f"seed {seed}"
        assert mf.buffer()[:] == expected, f"seed {seed}"
    finally:
        mf.close()


def test_opening_a_pooled_store_with_warm_up_on_leaves_its_segment_alone(tmp_path):
    """warmMapedFileEnable warms the first segment while the store opens: not a pooled one."""
    cfg = StoreConfig(store_path=tmp_path / "s", commitlog_file_size=SIZE, consume_queue_entries=1000, index_slots=101,
                      index_max_entries=400, transient_store_pool_enable=True, warm_mapped_file_enable=True)
    with MessageStore(cfg) as store:
        segment = store.commitlog.files.last
        assert segment.write_buffer is not None
        assert _smaps_kb(segment.path, "Rss") <= MAPPED_SLACK_KB and _dirty_kb(segment.path) == 0
        assert store.put_message(Message(topic="P", body=b"x")).ok


def test_the_allocator_follows_only_segments_written_through_their_mapping(tmp_path, monkeypatch):
    """A pool of one: the first segment is pooled (not followed), the second finds the pool empty and
    is written through its mapping (followed, prefaulted from its start)."""
    calls = record_prefaults(monkeypatch)
    pool = TransientStorePool(1, SIZE)
    first, second = (tmp_path / f"{i * SIZE:020d}" for i in range(2))
    service = AllocateService(lambda p: MappedFile(p, SIZE, transient_pool=pool), prefault=True)
    try:
        mf = service.get(first, None)          # (none made ahead: it could take the buffer first)
        assert mf.write_buffer is not None
        assert wait_until(lambda: service._followed is None or calls)      # followed it would be prefaulted now
        mf.wrote = SIZE - (512 << 10)
        nxt = service.get(second, None)
        assert nxt.write_buffer is None
        assert wait_until(lambda: (second.name, 1 << 20) in calls), calls
        assert [c for c in calls if c[0] == first.name] == [], calls
    finally:
        service.shutdown()
        mf.close(flush=False)


def test_readers_see_committed_bytes_while_the_commit_thread_writes(tmp_path):
    """The commit runs on its own thread (as the store's CommitService does) while the writer appends
    and a reader reads committed ranges through the mapping."""
    seed = new_seed()
    rng = random.Random(seed)
    mf = _pooled(tmp_path)
    payload = rng.randbytes(SIZE)
    stop = threading.Event()

    def committer():
        while not stop.is_set():
            mf.commit()

    thread = threading.Thread(target=committer, name="test-commit")
    thread.start()
    try:
        while mf.remaining:
            n = min(mf.remaining, rng.randrange(1, 3 * OS_PAGE_SIZE))
            mf.append(payload[mf.wrote:mf.wrote + n])
            done = mf.committed
            if done:
                pos = rng.randrange(done)
                assert mf.buffer()[pos:done] == payload[pos:done], f"seed {seed}: committed [{pos}, {done})"
    finally:
        stop.set()
        thread.join(10)
    mf.commit()
    with open(mf.path, "rb") as f:
        assert f.read() == payload, f"seed {seed}"
    mf.close()


def _thread_cpu_s(name: str) -> float:
    thread = next(t for t in threading.enumerate() if t.name == name)
    fields = Path(f"/proc/self/task/{thread.native_id}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_dispatcher_waits_for_the_commit_instead_of_spinning(tmp_path):
    """Appended but uncommitted bytes cannot be dispatched; the dispatch thread must sleep until the
    commit moves (and then dispatch at once), not walk nothing in a loop - that loop cost the broker
    more CPU than the rest of the pool path together."""
    cfg = StoreConfig(store_path=tmp_path / "s", commitlog_file_size=SIZE, consume_queue_entries=1000, index_slots=101,
                      index_max_entries=400, transient_store_pool_enable=True, commit_interval_commitlog_ms=60_000,
                      commit_commitlog_least_pages=0, commit_commitlog_thorough_interval_ms=60_000)
    with MessageStore(cfg) as store:
        assert store.put_messages([Message(topic="P", body=b"x" * 100, queue_id=0)] * 50).ok
        assert store.commitlog.files.last.committed == 0
        cpu0, wall0 = _thread_cpu_s("rocketq-dispatch"), time.monotonic()
        threading.Event().wait(0.5)                    # a window to measure the thread's CPU in, not a wait for a state
        spent = _thread_cpu_s("rocketq-dispatch") - cpu0
        assert spent < 0.1 * (time.monotonic() - wall0), f"the dispatcher spun: {spent:.2f} CPU-s while nothing was readable"
        assert store.max_offset("P", 0) == 0
        store._committer.wakeup()                      # the commit thread commits (least pages 0) and wakes the dispatcher
        assert wait_until(lambda: store.max_offset("P", 0) == 50, timeout_s=5)


COMMITTED_WRITER = SINGLE_PUTS_HEAD + textwrap.dedent("""
    files, deadline, tick = store.commitlog.files.files, time.monotonic() + 10, threading.Event()
    while any(mf.committed < mf.wrote for mf in files) and time.monotonic() < deadline:
        tick.wait(0.005)                  # the store's own commit service does the work
    committed = all(mf.committed == mf.wrote for mf in files)
    sys.stdout.write("committed %s flushed %d\\n" % (committed, store.commitlog.flushed_offset()))
    sys.stdout.flush()
    sys.stdin.read()                      # idle until killed
""")


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_committed_but_unflushed_pool_data_survives_a_kill(tmp_path):
    """The commit writes to the file (the page cache), which outlives the process: with flushing held
    off, everything committed before a SIGKILL is there after the restart, bodies intact."""
    seed = new_seed()
    rng = random.Random(seed)
    settings = {"store_path": str(tmp_path / "store"), "flush_disk_type": "ASYNC_FLUSH", "commitlog_file_size": 64 << 10,
                "consume_queue_entries": 200, "message_index_enable": False, "transient_store_pool_enable": True,
                "transient_store_pool_size": 2, "commit_interval_commitlog_ms": 5, "commit_commitlog_least_pages": 0,
                "flush_interval_commitlog_ms": 60_000, "flush_commitlog_least_pages": 100_000,
                "flush_commitlog_thorough_interval_ms": 600_000}
    count = rng.randrange(300, 700)                     # two to four 64 KiB segments; the first ones pooled
    acks, state = puts_then_kill(tmp_path, COMMITTED_WRITER, settings, count)
    assert state[:2] == ["committed", "True"], (seed, state, (tmp_path / "writer.stderr").read_text()[-2000:])
    assert int(state[3]) < int(acks[-1][0]), f"seed {seed}: flushed ({state}): the test needs unflushed data"
    with MessageStore(StoreConfig(**settings)) as store:
        assert store.recovery.abnormal, f"seed {seed}"
        lost = [tag for phy, _qid, _qoff, tag in acks if (m := store.read_message(int(phy))) is None
                or m.body != body_for(tag)]
        assert not lost, (f"seed {seed}: {len(lost)} of {count} committed messages gone after the kill "
                          f"(flushed before it: {state[3]}); first: {lost[:3]}")
