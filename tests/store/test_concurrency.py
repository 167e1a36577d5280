"""Many producers (and readers) at once: queue offsets dense and unique per queue, nothing lost,
records never overlapping, readers never seeing half a record."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import defaultdict
from itertools import pairwise

import pytest
from store_helpers import new_seed, read_queue, small_config

from rocketq.store import GetStatus, Message, MessageStore, PutStatus

TOPICS = ("T0", "T1")
QUEUES = 4


def body_for(thread: int, i: int, j: int, size: int) -> bytes:
    head = b"%d-%d-%d|" % (thread, i, j)
    return (head * (size // len(head) + 1))[:max(size, len(head))]


def producer(store, thread: int, count: int, seed: int, out: list, errors: list) -> None:
    rng = random.Random(seed * 1000 + thread)
    try:
        i = 0
        while i < count:
            if rng.random() < 0.2:
                n = rng.randrange(2, 8)
                msgs = [Message(topic=rng.choice(TOPICS), queue_id=rng.randrange(QUEUES),
                                body=body_for(thread, i, j, rng.randrange(10, 400))) for j in range(n)]
                rs = store.put_messages(msgs)
                out.extend((r, m) for r, m in zip(rs, msgs))
                i += n
            else:
                m = Message(topic=rng.choice(TOPICS), queue_id=rng.randrange(QUEUES),
                            body=body_for(thread, i, 0, rng.randrange(10, 400)))
                out.append((store.put_message(m), m))
                i += 1
    except BaseException as exc:  # noqa: BLE001 - re-raised by the test thread
        errors.append(exc)


def run_producers(store, threads: int, per_thread: int, seed: int) -> list:
    outs = [[] for _ in range(threads)]
    errors: list = []
    workers = [threading.Thread(target=producer, args=(store, t, per_thread, seed, outs[t], errors))
               for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not any(w.is_alive() for w in workers), f"seed {seed}: a producer hung"
    assert not errors, f"seed {seed}: {errors[0]!r}"
    return [x for o in outs for x in o]


def check_results(store, results, seed) -> None:
    assert {r.status for r, _ in results} == {PutStatus.PUT_OK}, f"seed {seed}"
    spans = sorted((r.physical_offset, r.physical_offset + r.wrote_bytes) for r, _ in results)
    assert all(a[1] <= b[0] for a, b in pairwise(spans)), f"seed {seed}: records overlap"
    by_queue = defaultdict(list)
    for r, m in results:
        by_queue[(m.topic, m.queue_id)].append((r.queue_offset, r, m))
    store.wait_dispatched()
    for key, items in by_queue.items():
        items.sort(key=lambda x: x[0])
        assert [q for q, _, _ in items] == list(range(len(items))), f"seed {seed}: {key} offsets not dense/unique"
        # a later queue offset is always later in the log
        assert [r.physical_offset for _, r, _ in items] == sorted(r.physical_offset for _, r, _ in items)
        got = read_queue(store, *key, page=500)
        assert len(got) == len(items) == store.max_offset(*key), f"seed {seed}: {key}"
        for (q, r, m), s in zip(items, got):
            assert (s.queue_offset, s.physical_offset, s.body) == (q, r.physical_offset, m.body), f"seed {seed}"


def test_many_threads_many_queues_offsets_dense_nothing_lost(tmp_path):
    seed = new_seed()
    with MessageStore(small_config(tmp_path)) as store:
        results = run_producers(store, threads=8, per_thread=400, seed=seed)
        check_results(store, results, seed)
        assert len(results) >= 8 * 400


def test_sync_flush_with_16_threads_every_put_ok(tmp_path):
    seed = new_seed()
    cfg = small_config(tmp_path, flush_disk_type="SYNC_FLUSH")
    with MessageStore(cfg) as store:
        results = run_producers(store, threads=16, per_thread=60, seed=seed)
        check_results(store, results, seed)
        flushed = store.commitlog.flushed_offset()
        assert all(r.physical_offset + r.wrote_bytes <= flushed for r, _ in results), f"seed {seed}"
    with MessageStore(cfg) as store:                     # and all of it is there after a restart
        for key in {(m.topic, m.queue_id) for _, m in results}:
            want = sorted((r.queue_offset, m.body) for r, m in results if (m.topic, m.queue_id) == key)
            assert [m.body for m in read_queue(store, *key, page=500)] == [b for _, b in want], f"seed {seed}"


def test_put_message_async_under_sync_flush(tmp_path):
    cfg = small_config(tmp_path, flush_disk_type="SYNC_FLUSH")

    async def main(store):
        async def one(i):
            return await store.put_message_async(Message(topic="A", body=b"a%d" % i, queue_id=i % 2))
        return await asyncio.gather(*(one(i) for i in range(300)))

    with MessageStore(cfg) as store:
        results = asyncio.run(main(store))
        assert {r.status for r in results} == {PutStatus.PUT_OK}
        for q in (0, 1):
            offs = sorted(r.queue_offset for r in results if r.queue_id == q)
            assert offs == list(range(150))
        assert store.commitlog.flushed_offset() >= max(r.physical_offset + r.wrote_bytes for r in results)


@pytest.mark.parametrize("pool", [False, True], ids=["mapped", "transient-pool"])
def test_readers_following_queues_while_producers_write(tmp_path, pool):
    seed = new_seed()
    extra = {"transient_store_pool_enable": True, "commit_interval_commitlog_ms": 1} if pool else {}
    cfg = small_config(tmp_path, commitlog_file_size=16 * 1024, consume_queue_entries=64, **extra)
    with MessageStore(cfg) as store:
        done = threading.Event()
        problems: list[str] = []
        seen: dict[tuple, list] = {}

        keys = [(t, q) for t in TOPICS for q in range(QUEUES)]
        arrived = {k: threading.Event() for k in keys}     # long-polling style wake-ups from the dispatcher
        store.arrival_listeners.append(lambda topic, qid, _next: arrived[(topic, qid)].set())

        def reader(key):
            offset, mine = 0, []
            while True:
                finished = done.is_set()
                arrived[key].clear()
                got = store.get_messages(*key, offset, 50)
                if got.status == GetStatus.FOUND:
                    for m in got.messages:
                        if not m.crc_ok() or (m.topic, m.queue_id) != key or b"|" not in m.body:
                            problems.append(f"{key}: bad record at {m.physical_offset}")
                    mine.extend(got.messages)
                    if [m.queue_offset for m in got.messages] != list(range(offset, got.next_begin_offset)):
                        problems.append(f"{key}: offsets {offset}..{got.next_begin_offset} not in order")
                    offset = got.next_begin_offset
                elif got.status not in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE,
                                        GetStatus.OFFSET_OVERFLOW_ONE):
                    problems.append(f"{key}: {got.status} at {offset}")
                    return
                elif finished:
                    seen[key] = mine
                    return
                else:
                    arrived[key].wait(0.05)

        readers = [threading.Thread(target=reader, args=(k,)) for k in keys]
        for r in readers:
            r.start()
        try:
            results = run_producers(store, threads=4, per_thread=300, seed=seed)
            store.wait_dispatched()
        finally:
            done.set()
            for r in readers:
                r.join(timeout=60)
        assert not problems, f"seed {seed}: {problems[:5]}"
        for key in keys:
            want = sorted((r.queue_offset, m.body) for r, m in results if (m.topic, m.queue_id) == key)
            assert [m.body for m in seen[key]] == [b for _, b in want], f"seed {seed}: {key}"


@pytest.mark.parametrize("max_pending", [1 << 17, 64], ids=["roomy", "back-pressure"])
def test_dispatch_driven_from_an_event_loop(tmp_path, max_pending):
    """drive_from(loop): puts on the loop thread and on worker threads, a tiny
    hand-off bound forcing submitters to drain themselves; small batches on the loop, larger ones
    on the thread; queues dense and complete, arrivals reported on the loop's thread."""
    seed = new_seed()
    cfg = small_config(tmp_path, dispatch_queue_max_messages=max_pending)
    arrivals_on: set = set()

    async def main(store):
        loop = asyncio.get_running_loop()
        store.dispatcher.drive_from(loop)
        store.arrival_listeners.append(lambda *a: arrivals_on.add(threading.get_ident()))
        on_loop = [(await store.put_message_async(m), m) for m in
                   (Message(topic=TOPICS[i % 2], queue_id=i % QUEUES, body=b"loop-%d" % i) for i in range(300))]
        in_threads = await asyncio.to_thread(run_producers, store, 4, 200, seed)
        big = [Message(topic="T0", queue_id=q % QUEUES, body=b"big-%d" % q) for q in range(40)]   # thread's share
        in_threads += list(zip(store.put_messages(big), big))
        # the loop dispatches by itself (nobody waits): watch the queues fill up from here
        want = len(on_loop) + len(in_threads)
        for _ in range(2000):
            if sum(store.max_offset(t, q) for t in TOPICS for q in range(QUEUES)) == want:
                break
            await asyncio.sleep(0.005)
        return on_loop + in_threads

    with MessageStore(cfg) as store:
        results = asyncio.run(main(store))
        check_results(store, results, seed)
    assert threading.get_ident() in arrivals_on, f"seed {seed}: no arrival was reported on the loop thread"


def test_the_loop_never_waits_for_the_threads_drain(tmp_path):
    """While someone else holds the drain (the thread on a large batch), a loop-driven drain does not
    block the loop; it looks again and dispatches once the lock is free."""
    async def main(store):
        store.dispatcher.drive_from(asyncio.get_running_loop())
        lock = store.dispatcher._drain_lock
        lock.acquire()                                     # the thread is "draining"
        try:
            await store.put_message_async(Message(topic="T0", body=b"one"))
            t0 = time.monotonic()
            await asyncio.sleep(0.02)                      # the loop still runs (a blocked loop never returns here)
            assert time.monotonic() - t0 < 1.0
            assert store.max_offset("T0", 0) == 0          # not dispatched while the lock is held
        finally:
            lock.release()
        for _ in range(1000):
            if store.max_offset("T0", 0) == 1:
                return True
            await asyncio.sleep(0.002)
        return False

    with MessageStore(small_config(tmp_path)) as store:
        assert asyncio.run(main(store)), "not dispatched after the lock was released"
