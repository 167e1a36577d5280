"""The timer reads bucket files into its heap a chunk at a time: every message once, never early,
also when a restart finds several buckets already due (a fake clock; waits are on conditions)."""

import asyncio
import random
import time

from broker_helpers import store_config

from rocketq.broker import timer as timer_mod
from rocketq.broker.timer import Timer
from rocketq.broker.timer_messages import PROPERTY_TIMER_DELIVER_MS
from rocketq.common.message import Message
from rocketq.store import MessageStore

T0 = 1_800_000_000.0


async def _until(cond, what, timer=None, limit_s=30.0):
    deadline = time.monotonic() + limit_s
    while not cond():
        assert time.monotonic() < deadline, what
        if timer is not None:
            timer._wake.set()
        await asyncio.sleep(0.01)


def _delivered(store, n_queues=2):
    return [m for q in range(n_queues) for m in store.get_messages("Dest", q, 0, 10_000).messages]


def test_chunked_bucket_load_after_restart_delivers_each_once(tmp_path, monkeypatch):
    monkeypatch.setattr(timer_mod, "LOAD_CHUNK_ENTRIES", 7)
    now = [T0]
    due = {f"m{i}": int(T0 * 1000) + 1_000 + i * 20 for i in range(150)}     # buckets 1 s .. 4 s ahead

    async def scenario():
        store = MessageStore(store_config(tmp_path)).start()
        try:
            first = Timer(store, tmp_path / "timer", bucket_ms=200, clock=lambda: now[0])
            first.start()
            store.arrival_listeners.append(first.on_arrival)
            items = list(due.items())
            random.Random(3).shuffle(items)
            for body, at in items:
                m = Message("Dest", body.encode(), queue_id=len(body) % 2,
                            properties={PROPERTY_TIMER_DELIVER_MS: str(at)})
                assert store.put_message(first.wrap(m)).ok
            await _until(lambda: first.ingest_offset == len(due), "ingest", first)
            assert first.pending_in_memory == 0                  # all still in bucket files
            store.arrival_listeners.remove(first.on_arrival)
            await first.close()

            now[0] = T0 + 10.0                                   # back up after everything fell due
            second = Timer(store, tmp_path / "timer", bucket_ms=200, clock=lambda: now[0])
            second.start()
            await _until(lambda: len(_delivered(store)) >= len(due), "deliveries", second)
            await _until(lambda: second.watermark_ms > int(now[0] * 1000), "watermark", second)
            got = _delivered(store)
            assert sorted(m.body.decode() for m in got) == sorted(due)          # each once
            assert not any(p.name.isdigit() for p in (tmp_path / "timer").iterdir())   # buckets removed
            await second.close()
        finally:
            store.shutdown()
    asyncio.run(scenario())


def test_chunked_load_of_a_big_bucket_keeps_new_entries_for_it(tmp_path, monkeypatch):
    monkeypatch.setattr(timer_mod, "LOAD_CHUNK_ENTRIES", 5)
    now = [T0]

    async def scenario():
        store = MessageStore(store_config(tmp_path)).start()
        timer = Timer(store, tmp_path / "timer", bucket_ms=1000, clock=lambda: now[0])
        store.arrival_listeners.append(timer.on_arrival)
        timer.start()
        try:
            base = int(T0 * 1000)
            due = {}
            for i in range(60):                                  # all in bucket T0+3 s (not loaded yet)
                due[f"a{i}"] = base + 3_000 + (i * 13) % 1000
            def put(body):
                m = Message("Dest", body.encode(), queue_id=0, properties={PROPERTY_TIMER_DELIVER_MS: str(due[body])})
                assert store.put_message(timer.wrap(m)).ok
            for body in list(due):
                put(body)
            await _until(lambda: timer.ingest_offset == 60, "ingest", timer)
            now[0] = T0 + 2.0                                    # the bucket comes into range: read in chunks
            timer._wake.set()
            await asyncio.sleep(0)
            for i in range(10):                                  # more for the same bucket meanwhile
                due[f"b{i}"] = base + 3_000 + i
                put(f"b{i}")
            await _until(lambda: timer.ingest_offset == 70 and timer.pending_in_memory == 70, "loaded", timer)
            assert _delivered(store) == []                       # nothing early
            now[0] = T0 + 5.0
            await _until(lambda: len(_delivered(store)) >= 70, "deliveries", timer)
            got = _delivered(store)
            assert sorted(m.body.decode() for m in got) == sorted(due)
        finally:
            await timer.close()
            store.shutdown()
    asyncio.run(scenario())
