"""The timer benchmark: N DELAY messages due at times spread uniformly over a window, delivered on time?

One real ``rocketq serve`` process (gRPC on).  The benchmark

1. creates the destination topic (4 queues) and the timer topic ``rmq_sys_wheel_timer`` (1 queue);
2. schedules ``n`` messages, in random order of due time, each due at
   ``start + lead + uniform(0, window)`` (whole milliseconds), through one of two paths:

   * ``remoting`` (default): rocketq's own client sends batches of 256 straight into
     ``rmq_sys_wheel_timer`` queue 0 with the properties the gRPC endpoint gives a DELAY message
     (``REAL_TOPIC``, ``REAL_QID``, ``TIMER_DELIVER_MS``) - the very records the timer ingests,
     without the per-message cost of the official client (which schedules a few thousand a second);
   * ``grpc``: the official RocketMQ 5 Python client, ``Message.delivery_timestamp`` and
     ``send_async`` with 256 in flight - the path applications use (client 5.1.2 copies
     ``delivery_timestamp`` into ``Timestamp.seconds``, so these due times are whole seconds);

3. reads the destination topic with a LitePullConsumer over remoting for the whole run, and per
   delivered message takes its lateness = the delivered record's store timestamp minus its due time
   (``TIMER_DELIVER_MS``, kept on the delivered message), and also arrival at the consumer minus due;
4. samples the server process's RSS and anonymous RSS (``RssAnon``: heap, without the mapped
   commit-log pages that ``RSS`` also counts) every 0.2 s.

It reports scheduled / delivered / duplicates / missing, p50 / p99 / max lateness, how long
scheduling took, how many messages were stored only after their due time (scheduled late: lead too
short), and the memory: the peaks, and the samples when 10 % and 100 % of the messages were
scheduled, so memory can be compared between sizes (``--count 100000`` vs ``1000000``).
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import threading
import time
from array import array
from collections.abc import Callable
from pathlib import Path

from rocketq.bench.broker_bench import ServeProcess, _run
from rocketq.broker.timer_messages import PROPERTY_TIMER_DELIVER_MS, TIMER_TOPIC

DEST_QUEUES = 4
BATCH = 256
INFLIGHT = 8
GRPC_WINDOW = 256
DELIVERY_GRACE_S = 60.0          # after the last due time, how long to wait for stragglers
QUIET_S = 2.0                    # after the last one: a poll this long finds no duplicate
TARGET_P99_MS = 100.0


def _pct(sorted_values, q: float) -> float:
    if not sorted_values:
        return float("nan")
    return float(sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))])


class MemorySampler(threading.Thread):
    """RSS and RssAnon (bytes) of one process every *interval* s; peaks and a 1-per-second timeline."""

    def __init__(self, pid: int, interval: float = 0.2):
        super().__init__(daemon=True)
        import psutil
        self._proc = psutil.Process(pid)
        self._pid, self._interval = pid, interval
        self._halt = threading.Event()
        self.peak_rss = self.peak_anon = 0
        self.timeline: list[tuple[float, int, int]] = []
        self._t0 = time.monotonic()
        self.cpu_s = 0.0

    def sample(self) -> tuple[int, int]:
        rss = anon = 0
        try:
            with open(f"/proc/{self._pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1]) * 1024
                    elif line.startswith("RssAnon:"):
                        anon = int(line.split()[1]) * 1024
        except OSError:
            try:
                rss = self._proc.memory_info().rss
            except Exception:
                pass
        self.peak_rss, self.peak_anon = max(self.peak_rss, rss), max(self.peak_anon, anon)
        try:
            t = self._proc.cpu_times()
            self.cpu_s = t.user + t.system
        except Exception:
            pass
        return rss, anon

    def run(self) -> None:
        last = -1.0
        while not self._halt.wait(self._interval):
            rss, anon = self.sample()
            now = time.monotonic() - self._t0
            if now - last >= 1.0:
                self.timeline.append((round(now, 1), rss, anon))
                last = now

    def stop(self) -> None:
        self._halt.set()
        self.join(5)


class Collector:
    """What the consumer saw: per message id, how often; lateness by store time and by arrival."""

    def __init__(self, n: int):
        self.n = n
        self.seen = bytearray(n)
        self.delivered = 0
        self.duplicates = 0
        self.foreign = 0
        self.store_late = array("q")        # ms
        self.arrival_late = array("d")      # ms
        self.due = array("q")               # ms, same order as store_late

    def add(self, msgs, now_ms: float) -> None:
        for m in msgs:
            try:
                i = int(m.body[:12])
                due = int(m.properties[PROPERTY_TIMER_DELIVER_MS])
            except (ValueError, KeyError):
                self.foreign += 1
                continue
            if not 0 <= i < self.n:
                self.foreign += 1
                continue
            if self.seen[i]:
                self.duplicates += 1
                continue
            self.seen[i] = 1
            self.delivered += 1
            self.store_late.append(m.store_timestamp - due)
            self.due.append(due)
            self.arrival_late.append(now_ms - due)


async def _schedule_remoting(namesrv: str, topic: str, dues: list[int], body_size: int,
                             on_progress: Callable[[int], None]) -> None:
    from rocketq.client import Message, Producer
    async with Producer("TIMER_BENCH_PG", namesrv, timeout_s=30.0) as p:
        queue = next(q for q in await p.queues(TIMER_TOPIC) if q.queue_id == 0)
        sem = asyncio.Semaphore(INFLIGHT)
        done = 0

        async def batch(start: int) -> None:
            nonlocal done
            msgs = [Message(TIMER_TOPIC, b"%012d" % i + b"t" * max(0, body_size - 12),
                            properties={"REAL_TOPIC": topic, "REAL_QID": str(i % DEST_QUEUES),
                                        PROPERTY_TIMER_DELIVER_MS: str(dues[i])})
                    for i in range(start, min(start + BATCH, len(dues)))]
            try:
                await p.send_batch(msgs, queue=queue)
            finally:
                sem.release()
            done += len(msgs)
            on_progress(done)

        tasks = []
        for start in range(0, len(dues), BATCH):
            await sem.acquire()
            tasks.append(asyncio.ensure_future(batch(start)))
            if len(tasks) >= 4 * INFLIGHT:
                await asyncio.gather(*tasks)
                tasks.clear()
        await asyncio.gather(*tasks)


def _schedule_grpc(endpoint: str, topic: str, dues: list[int], body_size: int,
                   on_progress: Callable[[int], None]) -> None:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer
    p = Producer(ClientConfiguration(endpoint, Credentials(), request_timeout=30), (topic,))
    p.startup()
    try:
        for start in range(0, len(dues), GRPC_WINDOW):       # with thousands in flight grpc cancels calls
            futures = []
            for i in range(start, min(start + GRPC_WINDOW, len(dues))):
                m = Message()
                m.topic, m.body = topic, b"%012d" % i + b"t" * max(0, body_size - 12)
                m.delivery_timestamp = dues[i] // 1000     # 5.1.2 copies it into Timestamp.seconds
                futures.append(p.send_async(m))
            for f in futures:
                f.result(timeout=60)
            on_progress(min(start + GRPC_WINDOW, len(dues)))
    finally:
        p.shutdown()


async def _bench(srv: ServeProcess, *, n: int, window_s: float, lead_s: float, via: str, body_size: int,
                 seed: int, mem: MemorySampler, progress: Callable[[str, int, int], None]) -> dict:
    from rocketq.client import Admin, ConsumeFrom, LitePullConsumer
    topic = f"TimerBench{time.monotonic_ns() % 1_000_000}"
    async with Admin(srv.namesrv) as admin:
        await admin.create_topic(topic, queues=DEST_QUEUES)
        if via == "remoting":
            await admin.create_topic(TIMER_TOPIC, queues=1)
    col = Collector(n)
    consumer = LitePullConsumer(f"TIMER_BENCH_{time.monotonic_ns()}", srv.namesrv, consume_from=ConsumeFrom.FIRST,
                                pull_batch_size=256, buffer_batches=256)
    consumer.subscribe(topic)
    await consumer.start()
    stop = asyncio.Event()

    async def consume() -> None:
        while not stop.is_set():
            msgs = await consumer.poll(0.2, max_messages=8192)
            if msgs:
                col.add(msgs, time.time() * 1000)
    reader = asyncio.create_task(consume())

    rng = random.Random(seed)
    start_ms = int(time.time() * 1000)
    first_due = start_ms + int(lead_s * 1000)
    window_ms = int(window_s * 1000)
    dues = [first_due + rng.randrange(window_ms + 1) for _ in range(n)]
    if via == "grpc":                  # the official client sends whole seconds (see _schedule_grpc)
        dues = [d - d % 1000 + 1000 for d in dues]
    mem_at: dict[str, dict] = {}
    tenth = max(1, n // 10)

    def on_progress(done: int) -> None:
        if done >= tenth and "10%" not in mem_at:
            rss, anon = mem.sample()
            mem_at["10%"] = {"scheduled": done, "rss": rss, "anon": anon}
        progress("scheduling", done, n)

    t0 = time.time()
    if via == "remoting":
        await _schedule_remoting(srv.namesrv, topic, dues, body_size, on_progress)
    else:
        await asyncio.to_thread(_schedule_grpc, srv.grpc_endpoint, topic, dues, body_size, on_progress)
    scheduled_at_ms = time.time() * 1000
    schedule_s = time.time() - t0
    rss, anon = mem.sample()
    mem_at["100%"] = {"scheduled": n, "rss": rss, "anon": anon}
    due_before_scheduled = sum(1 for d in dues if d < scheduled_at_ms)   # upper bound: due before the last send

    deadline = time.monotonic() + max(0.0, (first_due + window_ms - time.time() * 1000) / 1000) + DELIVERY_GRACE_S
    while col.delivered < n and time.monotonic() < deadline and not reader.done():
        progress("waiting for deliveries", col.delivered, n)
        await asyncio.sleep(0.25)            # the bench's own progress display, not a test wait
    progress("waiting for deliveries", col.delivered, n)
    await asyncio.sleep(QUIET_S)             # a late duplicate would show up here
    stop.set()
    await reader
    await consumer.shutdown()

    by_second: dict[int, list[int]] = {}       # second of the window -> [count, late > target, max]
    for due, late in zip(col.due, col.store_late):
        row = by_second.setdefault((due - first_due) // 1000, [0, 0, 0])
        row[0] += 1
        row[1] += late > TARGET_P99_MS
        row[2] = max(row[2], late)
    worst = sorted(range(len(col.store_late)), key=col.store_late.__getitem__)[-20:]
    store_late = sorted(col.store_late)
    arrival_late = sorted(col.arrival_late)
    mib = 1024 * 1024
    return {
        "path": ("remoting: rocketq client SEND_BATCH into rmq_sys_wheel_timer queue 0 with REAL_TOPIC/REAL_QID/"
                 "TIMER_DELIVER_MS (the records gRPC SendMessage stores for a DELAY message)") if via == "remoting"
        else "gRPC: official rocketmq-python-client Producer.send_async, Message.delivery_timestamp",
        "via": via,
        "scheduled": n, "window_s": window_s, "lead_s": lead_s, "body_bytes": max(body_size, 12),
        "schedule_s": round(schedule_s, 2), "schedule_rate_per_s": round(n / schedule_s) if schedule_s else None,
        "due_before_scheduling_ended": due_before_scheduled,
        "delivered": col.delivered, "duplicates": col.duplicates, "missing": n - col.delivered,
        "foreign_messages": col.foreign,
        "lateness_ms_by_store_time": {"p50": _pct(store_late, 0.5), "p99": _pct(store_late, 0.99),
                                      "p999": _pct(store_late, 0.999), "max": _pct(store_late, 1.0),
                                      "min": _pct(store_late, 0.0)},
        "lateness_ms_at_consumer": {"p50": round(_pct(arrival_late, 0.5), 1),
                                    "p99": round(_pct(arrival_late, 0.99), 1),
                                    "max": round(_pct(arrival_late, 1.0), 1)},
        "target": f"p99 lateness <= {TARGET_P99_MS:.0f} ms, all delivered, no duplicates",
        "memory_mib": {
            "peak_rss": round(mem.peak_rss / mib, 1), "peak_anon": round(mem.peak_anon / mib, 1),
            **{f"{k}_scheduled_{f}": round(v[f] / mib, 1) for k, v in mem_at.items() for f in ("rss", "anon")},
        },
        "server_cpu_s": round(mem.cpu_s, 1),
        "late_over_target": sum(1 for v in col.store_late if v > TARGET_P99_MS),
        "worst_20_due_offset_ms_and_lateness_ms": [(col.due[i] - first_due, col.store_late[i]) for i in worst],
        "per_second_of_window_count_late_max": {k: v for k, v in sorted(by_second.items())},
    }


def run_timer_bench(*, n: int = 1_000_000, window_s: float = 600.0, lead_s: float | None = None, via: str = "remoting",
                    body_size: int = 100, seed: int = 1, directory: Path | None = None,
                    progress: Callable[[str, int, int], None] = lambda label, done, total: None) -> dict:
    if lead_s is None:                # time to schedule and for the timer to file everything first
        lead_s = 5.0 + n / (2_000 if via == "grpc" else 25_000)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        # the remoting path sends straight into the system timer topic, which it must create first
        with ServeProcess(Path(tmp) / "store", "--set", "validateSystemTopicWhenUpdateTopic=false", grpc=True) as srv:
            mem = MemorySampler(srv.proc.pid)
            mem.start()
            try:
                report = _run(_bench(srv, n=n, window_s=window_s, lead_s=lead_s, via=via, body_size=body_size,
                                     seed=seed, mem=mem, progress=progress))
            finally:
                mem.stop()
            report["memory_timeline_s_rss_anon"] = mem.timeline
    report["passed"] = (report["delivered"] == n and report["duplicates"] == 0
                        and report["lateness_ms_by_store_time"]["p99"] <= TARGET_P99_MS)
    return report
