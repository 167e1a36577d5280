"""Delay levels and retention, driven by an injected clock (no sleeping on wall time)."""

import json
import logging
import threading
import time

from rocketq.store import GetStatus, Message, MessageStore, StoreConfig


class FakeClock:
    def __init__(self, t: float):
        self.t = t
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.t += seconds


def wait_until(predicate, timeout_s: float = 10.0) -> bool:
    """Poll a condition with a deadline (the store's threads do the work)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        threading.Event().wait(0.01)
    return predicate()


def test_delay_level_parks_then_delivers_to_the_real_topic(tmp_path):
    clock = FakeClock(1_800_000_000.0)
    cfg = StoreConfig(store_path=tmp_path, commitlog_file_size=64 * 1024, consume_queue_entries=100,
                      message_index_enable=False, message_delay_level="1s 2s", schedule_poll_interval_ms=10)
    with MessageStore(cfg, clock=clock) as store:
        r = store.put_message(Message(topic="Orders", body=b"later", queue_id=3, delay_level=2, tags="A"))
        assert r.status == "PUT_OK"
        store.wait_dispatched()
        parked = store.get_messages("SCHEDULE_TOPIC_XXXX", 1, 0, 10)       # level 2 -> queue 1
        assert parked.status == GetStatus.FOUND
        assert parked[0].properties["REAL_TOPIC"] == "Orders" and parked[0].properties["REAL_QID"] == "3"
        assert store.max_offset("Orders", 3) == 0
        clock.advance(1.5)                                                  # not due yet (2 s)
        assert not wait_until(lambda: store.max_offset("Orders", 3) > 0, 0.3)
        clock.advance(1.0)
        assert wait_until(lambda: store.max_offset("Orders", 3) == 1)
        store.wait_dispatched()
        delivered = store.get_messages("Orders", 3, 0, 10)[0]
        assert delivered.body == b"later" and delivered.tags == "A"
        assert "DELAY" not in delivered.properties and delivered.properties["REAL_TOPIC"] == "Orders"
    offsets = json.loads((tmp_path / "config" / "delayOffset.json").read_text())["offsetTable"]
    assert offsets == {"2": 1}


def test_expired_segments_go_and_queues_say_what_they_lost(tmp_path, caplog):
    cfg = StoreConfig(store_path=tmp_path, commitlog_file_size=8192, consume_queue_entries=50,
                      message_index_enable=False, file_reserved_time_hours=0)
    with MessageStore(cfg) as store:
        for i in range(60):
            store.put_message(Message(topic="T", body=b"%02d" % i * 100))
        store.wait_dispatched()
        segments_before = len(store.commitlog.files.files)
        with caplog.at_level(logging.WARNING, logger="rocketq.store.cleaner"):
            deleted = store.delete_expired_files()
        assert deleted >= 1 and len(store.commitlog.files.files) == segments_before - deleted
        assert any("lost logical offsets" in rec.message for rec in caplog.records)
        low = store.min_offset("T", 0)
        assert low > 0
        assert store.get_messages("T", 0, 0, 10).status == GetStatus.OFFSET_TOO_SMALL
        first = store.get_messages("T", 0, low, 1)[0]
        assert first.physical_offset >= store.commitlog.min_offset()
        assert store.put_message(Message(topic="T", body=b"after")).status == "PUT_OK"
    with MessageStore(cfg) as store:                                        # and it reopens
        assert store.min_offset("T", 0) == low
