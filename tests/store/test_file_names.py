"""When a new segment's name becomes durable: at its first flush, not on the thread that made it.

A directory fsync queues behind the log's writeback (0.05-0.66 s measured on the dispatch thread
during ``bench store``'s batch row), so the threads that create files while appending - the
dispatcher rolling consume-queue files - must not pay it; the flush that first claims bytes of a
new file durable syncs its directory first.  A power loss cannot be staged here, so the order is
observed by recording the calls that sync (``fsync_dir``, a segment's range sync and
``os.fdatasync``) as the real store makes them.
"""

from __future__ import annotations

import os
import threading

from store_helpers import small_config, wait_until

import rocketq.store.mapped_file as mapped_file
from rocketq.store import Message, MessageStore, PutStatus


def _record_syncs(monkeypatch) -> list[tuple[str, str, str]]:
    """(call, thread name, what) for every directory sync and every data sync from now on."""
    calls: list[tuple[str, str, str]] = []
    real_dir, real_data, real_range = mapped_file.fsync_dir, os.fdatasync, mapped_file.MappedFile._sync_range

    def fsync_dir(directory):
        calls.append(("dir", threading.current_thread().name, str(directory)))
        real_dir(directory)

    def fdatasync(fd):
        calls.append(("data", threading.current_thread().name, os.readlink(f"/proc/self/fd/{fd}")))
        real_data(fd)

    def sync_range(mf, start, end):
        calls.append(("data", threading.current_thread().name, str(mf.path)))
        return real_range(mf, start, end)

    monkeypatch.setattr(mapped_file, "fsync_dir", fsync_dir)
    monkeypatch.setattr(os, "fdatasync", fdatasync)
    monkeypatch.setattr(mapped_file.MappedFile, "_sync_range", sync_range)
    return calls


def test_the_dispatcher_rolls_consume_queue_files_without_syncing_a_directory(tmp_path, monkeypatch):
    calls = _record_syncs(monkeypatch)
    store = MessageStore(small_config(tmp_path / "store", consume_queue_entries=10)).start()
    try:
        for i in range(35):                        # four consume-queue files of 10 units
            assert store.put_message(Message(topic="T", body=b"m%d" % i, queue_id=0)).status == PutStatus.PUT_OK
        assert store.wait_dispatched(10.0)
        cq_dir = tmp_path / "store" / "consumequeue" / "T" / "0"
        assert wait_until(lambda: len([p for p in cq_dir.iterdir() if p.name.isdigit()]) == 4)
        on_dispatch = [c for c in calls if c[1] == "rocketq-dispatch"]
        assert on_dispatch == [], on_dispatch
    finally:
        store.shutdown()
    # after the shutdown's flush: each consume-queue file's directory was synced before its data
    cq_data = [i for i, c in enumerate(calls) if c[0] == "data" and c[2].startswith(str(cq_dir))]
    cq_dir_syncs = [i for i, c in enumerate(calls) if c[0] == "dir" and c[2] == str(cq_dir)]
    assert cq_data and cq_dir_syncs, calls
    assert min(cq_dir_syncs) < min(cq_data), calls


def test_a_new_file_has_its_name_synced_once_before_its_first_data_sync(tmp_path, monkeypatch):
    calls = _record_syncs(monkeypatch)
    mf = mapped_file.MappedFile(tmp_path / mapped_file.file_name(0), 4096)
    try:
        assert calls == []                         # made without any sync
        mf.append(b"a" * 100)
        mf.flush()
        mf.append(b"b" * 100)
        mf.flush()
        assert [c[0] for c in calls] == ["dir", "data", "data"], calls
        assert calls[0][2] == str(tmp_path)
    finally:
        mf.close()
    reopened = mapped_file.MappedFile(tmp_path / mapped_file.file_name(0), 4096)
    try:
        reopened.set_positions(200)
        reopened.append(b"c")
        reopened.flush()                           # an existing file's name needs no sync
        assert [c[0] for c in calls] == ["dir", "data", "data", "data"], calls
    finally:
        reopened.close()
