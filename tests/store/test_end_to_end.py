"""End-to-end checks of the embedded store through its public API and offline tools."""

from pathlib import Path

import pytest

from rocketq.store import MessageStore, Message, StoreConfig
from rocketq.store.tools import rebuild_store, verify_store


def small_config(path: Path, **kw) -> StoreConfig:
    base = dict(store_path=path, commitlog_file_size=64 * 1024, consume_queue_entries=100,
                index_slots=101, index_max_entries=400, message_index_enable=False)
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
