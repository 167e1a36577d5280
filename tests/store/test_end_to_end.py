"""End-to-end checks of the embedded store through its public API and offline tools."""

from pathlib import Path

import pytest

from rocketq.store import MessageStore, Message, StoreConfig
from rocketq.store.tools import rebuild_store, verify_store


def small_config(path: Path, **kw) -> StoreConfig:
    base = dict(store_path=path, commitlog_file_size=64 * 1024, consume_queue_entries=100,
                index_slots=101, index_max_entries=400)
    base.update(kw)
    return StoreConfig(**base)


@pytest.mark.parametrize("mode", ["ASYNC_FLUSH", "SYNC_FLUSH", "TRANSIENT"])
def test_every_flush_mode_writes_a_store_that_verifies(tmp_path, mode):
    kw = {"flush_disk_type": "SYNC_FLUSH"} if mode == "SYNC_FLUSH" else {}
    if mode == "TRANSIENT":
        kw = {"transient_store_pool_enable": True, "commit_interval_commitlog_ms": 10}
    cfg = small_config(tmp_path, **kw)
    with MessageStore(cfg) as store:
        for i in range(20):
            rs = store.put_messages([Message(topic=f"T{i % 3}", body=b"b" * (50 + j), queue_id=j % 2,
                                             tags=f"tag{j % 4}", keys=[f"k{i}-{j}"]) for j in range(30)])
            assert rs.status == "PUT_OK"
        r = store.put_message(Message(topic="Single", body=b"one"))
        assert r.status == "PUT_OK" and r.queue_offset == 0
        store.wait_dispatched()
        assert store.max_offset("T0", 0) == 7 * 15
        got = store.get_messages("T0", 0, 0, 1000)
        assert [m.queue_offset for m in got] == list(range(len(got)))
    report = verify_store(tmp_path)
    assert report.ok, report.problems
    assert report.records == 20 * 30 + 1


def test_rebuild_recreates_queues_identically(tmp_path):
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        for i in range(10):
            store.put_messages([Message(topic="T", body=bytes([i]) * 40, queue_id=i % 3, tags="A") for _ in range(25)])
    before = sorted(p.read_bytes() for p in (tmp_path / "consumequeue").rglob("0000*"))
    report = rebuild_store(tmp_path)
    assert report.records == 250
    after = sorted(p.read_bytes() for p in (tmp_path / "consumequeue").rglob("0000*"))
    assert before == after
    assert verify_store(tmp_path).ok


def test_flipped_body_byte_is_reported_with_file_and_offset(tmp_path):
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        r = store.put_message(Message(topic="T", body=b"a" * 100))
        store.put_message(Message(topic="T", body=b"b" * 100))
    seg = tmp_path / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    data[r.physical_offset + 88 + 10] ^= 0x01        # inside the first body
    seg.write_bytes(bytes(data))
    report = verify_store(tmp_path)
    assert not report.ok
    assert "00000000000000000000" in report.problems[0] and "offset 0" in report.problems[0]
    assert "body CRC" in report.problems[0]
    assert report.records == 1                 # the damaged record is stepped over, the next one read
    assert all("consume queue" not in p or "offset 0" in p for p in report.problems), report.problems


def test_query_by_key_and_unique_key_across_index_files(tmp_path):
    cfg = small_config(tmp_path, index_max_entries=50)      # forces several index files
    with MessageStore(cfg) as store:
        for i in range(120):
            store.put_message(Message(topic="T", body=b"x", keys=[f"k{i}", "common"],
                                      properties={"UNIQ_KEY": f"U{i:04d}"}))
        store.wait_dispatched()
        assert len(list((tmp_path / "index").iterdir())) >= 4
        assert [m.body for m in store.query_by_key("T", "k77")] == [b"x"]
        assert store.query_by_key("T", "U0077")[0].queue_offset == 77
        newest = store.query_by_key("T", "common", max_num=5)
        assert [m.queue_offset for m in newest] == [119, 118, 117, 116, 115]
        assert store.query_by_key("Other", "k77") == []
    assert verify_store(tmp_path).ok


def test_index_file_golden_bytes(tmp_path):
    from rocketq.store.index_file import IndexFile
    f = IndexFile(tmp_path / "20260101000000000", 7, 10, create=True)
    # Java "T#k1".hashCode() = 2539445 -> slot 2539445 % 7 = 6 (and 2539452 % 7 = 6: a chain)
    f.put([(2539445, 100, 5_000), (2539445 + 7, 200, 7_500)])
    f.close()
    raw = (tmp_path / "20260101000000000").read_bytes()
    assert raw[:40] == (5000).to_bytes(8, "big") + (7500).to_bytes(8, "big") + (100).to_bytes(8, "big") \
        + (200).to_bytes(8, "big") + (1).to_bytes(4, "big") + (3).to_bytes(4, "big")
    assert raw[40 + 6 * 4:40 + 7 * 4] == (2).to_bytes(4, "big")          # slot 6 -> newest entry 2
    entry2 = raw[40 + 7 * 4 + 2 * 20:40 + 7 * 4 + 3 * 20]
    assert entry2 == (2539452).to_bytes(4, "big") + (200).to_bytes(8, "big") + (2).to_bytes(4, "big") \
        + (1).to_bytes(4, "big")                                         # tdiff 2 s, prev = entry 1


def test_recovery_is_not_fooled_by_magic_bytes_inside_bodies(tmp_path):
    import struct
    magic = bytes.fromhex("DAA320A7")
    # bodies that contain the record magic, some preceded by a plausible size field
    bodies = [magic * 3, b"x" + magic + b"y" * 20, struct.pack(">i", 200) + magic + b"z" * 50,
              b"plain"] * 30
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        results = [store.put_message(Message(topic="T", body=b, keys=[f"k{i}"])) for i, b in enumerate(bodies)]
    (tmp_path / "abort").write_bytes(b"0")                  # as after a crash
    with open(tmp_path / "checkpoint", "r+b") as fh:       # and a checkpoint older than every record
        fh.write(struct.pack(">7q", 0, 0, 0, 0, 0, 0, 0))
    with MessageStore(cfg) as store:
        assert store.recovery.abnormal and store.recovery.truncated_bytes == 0
        got = [store.read_message(r.physical_offset).body for r in results]
        assert got == bodies
        assert store.max_offset("T", 0) == len(bodies)
    assert verify_store(tmp_path).ok


def test_full_disk_refuses_new_segment_and_keeps_what_was_acknowledged(tmp_path):
    import errno
    import os

    def reserve(fd, size):              # room for the first commitlog segment only
        if not os.readlink(f"/proc/self/fd/{fd}").endswith("00000000000000000000.tmp"):
            raise OSError(errno.ENOSPC, "No space left on device")
        os.posix_fallocate(fd, 0, size)

    cfg = small_config(tmp_path, message_index_enable=False)
    acked, statuses = [], set()
    with MessageStore(cfg, reserve=reserve) as store:
        for i in range(400):            # ~180 KiB: more than the one 64 KiB segment holds
            r = store.put_message(Message(topic="T", body=b"%03d" % i * 150))
            statuses.add(r.status)
            if r.status == "PUT_OK":
                acked.append((r, b"%03d" % i * 150))
        assert "CREATE_MAPPED_FILE_FAILED" in statuses
        failed = store.put_message(Message(topic="T", body=b"late"))
        assert failed.status == "CREATE_MAPPED_FILE_FAILED" and "segment" in failed.error
    assert 0 < len(acked) < 400
    with MessageStore(cfg) as store:    # disk has room again: everything acknowledged is there
        for r, body in acked:
            assert store.read_message(r.physical_offset).body == body
        assert store.max_offset("T", 0) == len(acked)
        assert store.put_message(Message(topic="T", body=b"after")).status == "PUT_OK"
    assert verify_store(tmp_path).ok
