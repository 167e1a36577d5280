"""The store benchmark behind ``rocketq bench store`` (results in BENCHMARKS.md).

Every scenario runs ``runs`` times, each time in a fresh store in a new directory under one
temporary directory (on the filesystem the caller chose), and is reported as min / median / max.
Figures that are judged against a raw reference - 4 KiB bodies against a plain mmap copy of the
same bytes, group commit against one fdatasync per message - measure that reference in the same
run, right after the store, so machine noise hits both.

Unless a scenario says otherwise, messages have 128-byte bodies, tag ``TagA`` and one key each
(``key-<i>``); stores use ASYNC_FLUSH, 1 GiB CommitLog segments (nothing rolls mid-run) with
``warm_mapped_file_enable`` on, and the index on.  Messages are built before the clock starts:
what is timed is the store.  Each scenario checks what it measured (every put acknowledged,
every message read back) and raises :class:`BenchError` rather than report a figure for work
that was not done.

No command-line code here; progress goes to an optional ``progress(label, done, total)``.
"""

from __future__ import annotations

import gc
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator

from rocketq.bench.crash_recovery import crash_recovery
from rocketq.bench.raw_io import fsync_per_message_rate, mmap_copy_rate, write_copy_rate
from rocketq.bench.report import BenchError, BenchReport, Measurement, Scenario, machine_description
from rocketq.store import Message, MessageStore, PutStatus, StoreConfig

__all__ = ["BenchError", "BenchSizes", "FULL", "QUICK", "run_store_bench"]

MIB = 1 << 20
GIB = 1 << 30
SEGMENT_BYTES = GIB
BATCH_MESSAGES = 64
READ_BATCH_MESSAGES = 32
BODY_BYTES = 128
BIG_BODY_BYTES = 4096
SYNC_WRITERS = 64
SYNC_MESSAGES_EACH = 2048          # messages made per producer before a SYNC_FLUSH row (then reused)
TOPIC = "BenchTopic"
TAGS = "TagA"
DISPATCH_TIMEOUT_S = 300.0

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class BenchSizes:
    batch_messages: int           # batch append, then read back from the same store
    single_messages: int
    big_messages: int             # 4 KiB bodies
    sync_seconds: float           # each SYNC_FLUSH producer style
    fsync_seconds: float          # the one-fdatasync-per-message baseline
    recovery_log_bytes: int
    recovery_segment_bytes: int


FULL = BenchSizes(batch_messages=2_000_000, single_messages=300_000, big_messages=100_000,
                  sync_seconds=5.0, fsync_seconds=3.0, recovery_log_bytes=GIB, recovery_segment_bytes=GIB)
QUICK = BenchSizes(batch_messages=50_000, single_messages=20_000, big_messages=5_000,
                   sync_seconds=1.0, fsync_seconds=1.0, recovery_log_bytes=64 * MIB, recovery_segment_bytes=GIB)


def run_store_bench(*, runs: int = 3, quick: bool = False, directory: Path | None = None,
                    progress: Progress | None = None, only: list[str] | None = None) -> BenchReport:
    """Run every step (or the steps named in *only*, see :data:`STEPS`) *runs* times."""
    if runs < 1:
        raise ValueError("runs must be at least 1")
    unknown = sorted(set(only or ()) - set(STEPS))
    if unknown:
        raise ValueError(f"no such store benchmark step: {', '.join(unknown)} (steps: {', '.join(STEPS)})")
    sizes = QUICK if quick else FULL
    base = Path(directory) if directory is not None else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    chosen = [name for name in STEPS if not only or name in only]
    steps = [step for name, step in zip(STEPS, _steps(sizes)) if name in chosen]
    scenarios = {s.key: s for s in _scenarios(sizes) if STEP_OF[s.key] in chosen}
    total, done = runs * len(steps), 0
    root = Path(tempfile.mkdtemp(prefix="rocketq-bench-", dir=base))
    try:
        for run in range(1, runs + 1):
            for label, step in steps:
                if progress:
                    progress(f"run {run}/{runs}: {label}", done, total)
                for key, measurement in step(root).items():
                    scenarios[key].runs.append(measurement)
                done += 1
        if progress:
            progress("done", done, total)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return BenchReport(machine_description(base), _settings(sizes, runs, quick), _notes(sizes),
                       list(scenarios.values()))


# the steps in the order they run, and which step measures each scenario (``--only`` picks steps)
STEPS = ("batch", "single", "big", "sync", "recovery")
STEP_OF = {"append": "batch", "dispatch_lag": "batch", "read": "batch", "single": "single", "big": "big",
           "sync_threads": "sync", "sync_asyncio": "sync", "recovery": "recovery"}


def _steps(sizes: BenchSizes) -> list[tuple[str, Callable[[Path], dict[str, Measurement]]]]:
    return [
        (f"batch append + read back, {sizes.batch_messages:,} msgs", lambda r: append_and_read(r, sizes.batch_messages)),
        (f"single put_message, {sizes.single_messages:,} msgs", lambda r: single_put(r, sizes.single_messages)),
        (f"4 KiB bodies, {sizes.big_messages:,} msgs", lambda r: big_bodies(r, sizes.big_messages)),
        (f"SYNC_FLUSH x{SYNC_WRITERS}", lambda r: sync_flush(r, sizes.sync_seconds, sizes.fsync_seconds)),
        (f"crash recovery, {sizes.recovery_log_bytes // MIB:,} MiB",
         lambda r: {"recovery": crash_recovery(r, log_bytes=sizes.recovery_log_bytes,
                                               segment_bytes=sizes.recovery_segment_bytes)}),
    ]


def _scenarios(sizes: BenchSizes) -> list[Scenario]:
    mib = sizes.recovery_log_bytes // MIB
    return [
        Scenario("append", f"batch append x{BATCH_MESSAGES}, until dispatched ({sizes.batch_messages:,} msgs)",
                 "msgs/s", 1_500_000),
        Scenario("dispatch_lag", "dispatch lag after the last append", "s"),
        Scenario("single", f"single put_message, until dispatched ({sizes.single_messages:,} msgs)", "msgs/s",
                 300_000),
        Scenario("big", f"4 KiB bodies x{BATCH_MESSAGES}, store vs raw mmap copy ({sizes.big_messages:,} msgs)",
                 "% of raw", 40),
        Scenario("sync_threads", f"SYNC_FLUSH, {SYNC_WRITERS} threads calling put_message, vs fsync per message",
                 "x", 20),
        Scenario("sync_asyncio", f"SYNC_FLUSH, {SYNC_WRITERS} asyncio producers, vs fsync per message", "x", 20),
        Scenario("read", f"read back get_messages x{READ_BATCH_MESSAGES} ({sizes.batch_messages:,} msgs)", "msgs/s",
                 1_000_000),
        # the target is 3 s for 1 GiB; a --quick run scans less and is held to the same rate
        Scenario("recovery", f"crash recovery: start() re-checking {mib:,} MiB of commitlog", "s",
                 3.0 * sizes.recovery_log_bytes / GIB, higher_is_better=False),
    ]


def _settings(sizes: BenchSizes, runs: int, quick: bool) -> dict:
    return {"runs": runs, "quick": quick, "commitlog_file_size": f"{SEGMENT_BYTES // MIB:,} MiB",
            "warm_mapped_file_enable": True, "flush_disk_type": "ASYNC_FLUSH unless named",
            "message_index_enable": "on (off for crash recovery)", "batch": BATCH_MESSAGES,
            "body_bytes": BODY_BYTES, **{k: v for k, v in asdict(sizes).items()}}


def _notes(sizes: BenchSizes) -> list[str]:
    return [
        "batch append: the clock stops when wait_dispatched() returns, so consume queues and index are included; "
        "the dispatch lag is the time from the last append returning to wait_dispatched() returning. Beside it, "
        "the CPU seconds of the writer (the calling thread), the dispatch thread and the store's other threads "
        "over the same interval; n / writer CPU and n / dispatch CPU are in the JSON as *_alone_msgs_per_s.",
        "single put: one put_message call per message, also timed until dispatched; beside it the CPU "
        "microseconds a put of the writer, the dispatch thread and the store's other threads.",
        "read back: get_messages(topic, 0, offset, 32) over the messages written by the batch-append scenario "
        "of the same run, reading .body (summing its length) and .queue_offset of each.",
        "4 KiB bodies: the reference copies the same total bytes, in chunks the size of one 64-message batch, "
        "into a preallocated and pre-faulted mapping of a file of that size (mmap slice assignment), and with "
        "os.write into a new file (no fsync), right after the store in the same run. Beside it the CPU "
        "microseconds a message of the writer, the dispatch thread and the store's other threads (flush: "
        "the store's msync writeback, when one falls inside the row).",
        f"SYNC_FLUSH: each producer sends its next message only after put_message returned (flushed); "
        f"{SYNC_MESSAGES_EACH:,} messages a producer made before the clock starts (then reused); "
        f"{sizes.sync_seconds:g} s per producer style, index on. Baseline in the same run: one os.write of a "
        f"record-sized buffer + os.fdatasync per message, appending to a file, for {sizes.fsync_seconds:g} s. "
        f"Beside the asyncio figure, the event loop thread's CPU per message.",
        f"crash recovery: a child process writes {sizes.recovery_log_bytes // MIB:,} MiB "
        f"({sizes.recovery_segment_bytes // MIB:,} MiB segments, index off, warm_mapped_file_enable off), waits until "
        "the checkpoint on disk shows the log and consume queues flushed, and is SIGKILLed (abort marker left, "
        "checkpoint present). The checkpoint's first three int64 fields (physic/logics/indexMsgTimestamp, "
        "big-endian at offsets 0, 8, 16) are then rewritten to the store time of the first record, which "
        "forces recovery to re-check every record (magic, size, offset, body CRC). The page cache is warm, "
        "as after a process crash (not a power loss).",
    ]


# -- stores and messages ---------------------------------------------------------------------


@contextmanager
def fresh_store(root: Path, **overrides) -> Iterator[MessageStore]:
    """A started store in a new directory under *root*; shut down and deleted afterwards."""
    path = Path(tempfile.mkdtemp(dir=root, prefix="store-"))
    settings = dict(store_path=path, commitlog_file_size=SEGMENT_BYTES, flush_disk_type="ASYNC_FLUSH",
                    warm_mapped_file_enable=True, message_index_enable=True)
    settings.update(overrides)
    store = MessageStore(StoreConfig(**settings)).start()
    try:
        gc.collect()
        yield store
    finally:
        store.shutdown()
        shutil.rmtree(path, ignore_errors=True)


def messages(n: int, body_bytes: int = BODY_BYTES, *, topic: str = TOPIC) -> list[Message]:
    body = b"x" * body_bytes
    return [Message(topic=topic, body=body, tags=TAGS, keys=[f"key-{i}"]) for i in range(n)]


def batches(n: int, body_bytes: int = BODY_BYTES) -> list[list[Message]]:
    msgs = messages(n, body_bytes)
    return [msgs[i:i + BATCH_MESSAGES] for i in range(0, n, BATCH_MESSAGES)]


def _put_batches(store: MessageStore, groups: list[list[Message]]) -> float:
    """Append every batch and wait for dispatch; returns the time the last append returned."""
    for group in groups:
        result = store.put_messages(group)
        if result.status != PutStatus.PUT_OK:
            raise BenchError(f"put_messages: {result.status} {result.error}")
    return time.perf_counter()


def _wait_dispatched(store: MessageStore) -> float:
    if not store.wait_dispatched(DISPATCH_TIMEOUT_S):
        raise BenchError(f"the dispatcher did not catch up within {DISPATCH_TIMEOUT_S:.0f} s")
    return time.perf_counter()


# -- scenarios -------------------------------------------------------------------------------


def append_and_read(root: Path, n: int) -> dict[str, Measurement]:
    """Batch append until dispatched, the dispatch lag, then read everything back (same store)."""
    groups = batches(n)
    with fresh_store(root) as store:
        cpu0 = _thread_cpu_s()
        sched0 = _writer_schedstat()
        t0 = time.perf_counter()
        t_last = _put_batches(store, groups)
        sched = _writer_time_split(sched0, t_last - t0)
        t_done = _wait_dispatched(store)
        cpu = _cpu_split(cpu0, _thread_cpu_s())
        del groups
        read_rate = _read_back(store, n)
    lag = t_done - t_last
    split = ", ".join(f"{name} {s:.2f}" for name, s in cpu.items())
    where = "" if sched is None else "; writer s: " + ", ".join(f"{name} {s:.2f}" for name, s in sched.items())
    append = Measurement(n / (t_done - t0), f"dispatch lag {lag:.3f} s; CPU s: {split}{where}",
                         {"messages": n, "seconds": t_done - t0, "dispatch_lag_s": lag, "append_s": t_last - t0,
                          "cpu_s": cpu, "writer_time_s": sched, **{f"{name}_alone_msgs_per_s": n / s for name, s in cpu.items()
                                           if name in ("writer", "dispatch") and s > 0}})
    return {"append": append, "dispatch_lag": Measurement(lag, detail={"append_s": t_last - t0}),
            "read": Measurement(read_rate, detail={"messages": n})}


def _thread_cpu_s() -> dict[str, float]:
    """CPU seconds (user + system) each live thread of this process has used, by thread name;
    empty where per-thread CPU clocks are not available."""
    out: dict[str, float] = {}
    for t in threading.enumerate():
        try:
            clock = time.pthread_getcpuclockid(t.ident)
            out[t.name] = out.get(t.name, 0.0) + time.clock_gettime(clock)
        except (AttributeError, OSError, TypeError):      # not Linux/BSD, or the thread just ended
            continue
    return out


def _writer_schedstat() -> tuple[int, int] | None:
    """(ns on a CPU, ns runnable but waiting for one) of the calling thread (Linux schedstat), or None."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
            on_cpu, waiting = f.read().split()[:2]
        return int(on_cpu), int(waiting)
    except (OSError, ValueError):
        return None


def _writer_time_split(before: tuple[int, int] | None, wall_s: float) -> dict[str, float] | None:
    """Where the writer's append time went: on a CPU, runnable but waiting for a CPU (other work on
    the machine), and blocked (the GIL, the put lock, page faults waiting on I/O: what remains)."""
    after = _writer_schedstat()
    if before is None or after is None:
        return None
    on_cpu, waiting = (after[0] - before[0]) / 1e9, (after[1] - before[1]) / 1e9
    return {"on_cpu": on_cpu, "runnable": waiting, "blocked": max(0.0, wall_s - on_cpu - waiting)}


def _cpu_split(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU used between two :func:`_thread_cpu_s` readings: the writer (this thread), the dispatch
    thread, and the store's other threads together (allocation, flush, commit, ...)."""
    used = {name: s - before.get(name, 0.0) for name, s in after.items()}
    writer = used.pop(threading.current_thread().name, 0.0)
    dispatch = used.pop("rocketq-dispatch", 0.0)
    return {"writer": writer, "dispatch": dispatch, "other": sum(used.values())}


def _read_back(store: MessageStore, n: int) -> float:
    offset = body_bytes = last = 0
    t0 = time.perf_counter()
    while offset < n:
        res = store.get_messages(TOPIC, 0, offset, READ_BATCH_MESSAGES)
        msgs = res.messages
        if not msgs:
            raise BenchError(f"get_messages({TOPIC!r}, 0, {offset}): {res.status}, nothing read")
        for m in msgs:
            body_bytes += len(m.body)
            last = m.queue_offset
        offset = res.next_begin_offset
    elapsed = time.perf_counter() - t0
    if body_bytes != n * BODY_BYTES or last != n - 1:
        raise BenchError(f"read back {body_bytes} body bytes up to queue offset {last}, "
                         f"expected {n * BODY_BYTES} up to {n - 1}")
    return n / elapsed


def single_put(root: Path, n: int) -> dict[str, Measurement]:
    """One put_message per message until dispatched; beside it the writer's and the dispatcher's CPU
    per put (the steadier measure on a shared machine) and where the writer's time went."""
    msgs = messages(n)
    with fresh_store(root) as store:
        cpu0 = _thread_cpu_s()
        sched0 = _writer_schedstat()
        t0 = time.perf_counter()
        for m in msgs:
            result = store.put_message(m)
            if result.status != PutStatus.PUT_OK:
                raise BenchError(f"put_message: {result.status} {result.error}")
        sched = _writer_time_split(sched0, time.perf_counter() - t0)
        elapsed = _wait_dispatched(store) - t0
        cpu = _cpu_split(cpu0, _thread_cpu_s())
    per_put_us = {name: s / n * 1e6 for name, s in cpu.items()}
    reference = "CPU us a put: " + ", ".join(f"{name} {us:.2f}" for name, us in per_put_us.items())
    detail = {"messages": n, "seconds": elapsed, "cpu_us_per_put": per_put_us, "writer_time_s": sched}
    return {"single": Measurement(n / elapsed, reference, detail)}


def big_bodies(root: Path, n: int) -> dict[str, Measurement]:
    """4 KiB bodies in batches: store bytes/s against raw copies of the same bytes, same run; beside
    it the CPU microseconds a message of the writer, the dispatch thread and the store's other
    threads (the steadier measure on a shared machine)."""
    groups = batches(n, BIG_BODY_BYTES)
    with fresh_store(root) as store:
        cpu0 = _thread_cpu_s()
        t0 = time.perf_counter()
        _put_batches(store, groups)
        elapsed = _wait_dispatched(store) - t0
        cpu = _cpu_split(cpu0, _thread_cpu_s())
        total = store.commitlog.max_offset()
    del groups
    chunk = max(1, total * BATCH_MESSAGES // n)
    store_rate = total / elapsed
    mmap_rate = mmap_copy_rate(root, total, chunk)
    write_rate = write_copy_rate(root, total, chunk)
    per_msg_us = {name: s / n * 1e6 for name, s in cpu.items()}
    reference = (f"store {store_rate / 1e6:,.0f} vs mmap copy {mmap_rate / 1e6:,.0f} MB/s; "
                 f"os.write {write_rate / 1e6:,.0f} MB/s; CPU us a message: "
                 + ", ".join(f"{name} {us:.2f}" for name, us in per_msg_us.items()))
    return {"big": Measurement(store_rate / mmap_rate * 100, reference,
                               {"bytes": total, "store_bytes_per_s": store_rate, "mmap_copy_bytes_per_s": mmap_rate,
                                "os_write_bytes_per_s": write_rate, "chunk_bytes": chunk,
                                "cpu_us_per_msg": per_msg_us})}


def sync_flush(root: Path, seconds: float, fsync_seconds: float) -> dict[str, Measurement]:
    """Group commit with 64 concurrent producers (threads, then asyncio) against fdatasync per message."""
    made = _sync_messages()
    with fresh_store(root, flush_disk_type="SYNC_FLUSH") as store:
        threads_rate, record_bytes = _sync_threads(store, seconds, made)
    with fresh_store(root, flush_disk_type="SYNC_FLUSH") as store:
        cpu0 = _thread_cpu_s()
        asyncio_rate, asyncio_count = _sync_asyncio(store, seconds, made)
        loop_us = _cpu_split(cpu0, _thread_cpu_s())["writer"] / max(1, asyncio_count) * 1e6
    fsync_rate, fsyncs = fsync_per_message_rate(root, record_bytes, fsync_seconds)
    common = {"record_bytes": record_bytes, "fsyncs": fsyncs}
    # beside the asyncio figure the event loop's CPU a message: its bound while every fsync covers all producers
    return {"sync_threads": _vs_fsync(threads_rate, fsync_rate, common),
            "sync_asyncio": _vs_fsync(asyncio_rate, fsync_rate, {**common, "loop_cpu_us_per_msg": loop_us},
                                      note=f"; event loop {loop_us:.1f} us CPU a message")}


def _vs_fsync(rate: float, fsync_rate: float, detail: dict, *, note: str = "") -> Measurement:
    return Measurement(rate / fsync_rate, f"{rate:,.0f} msgs/s vs {fsync_rate:,.0f} fsyncs/s{note}",
                       {"msgs_per_s": rate, "fsync_per_message_per_s": fsync_rate, **detail})


def _sync_messages() -> list[list[Message]]:
    """Each producer's messages, made before the clock starts as the other rows' are (made inside the
    loop they cost the loop thread 3-6 us a message of a producer's work); a producer that sends them
    all starts over (the store does not change a Message, and a key may repeat in the index)."""
    body = b"y" * BODY_BYTES
    return [[Message(topic="BenchSync", body=body, queue_id=w % 8, tags=TAGS, keys=[f"key-{w}-{i}"])
             for i in range(SYNC_MESSAGES_EACH)] for w in range(SYNC_WRITERS)]


def _sync_threads(store: MessageStore, seconds: float, made: list[list[Message]]) -> tuple[float, int]:
    """(msgs/s, record bytes) with SYNC_WRITERS threads, each calling put_message one at a time."""
    counts = [0] * SYNC_WRITERS
    sizes: list[int] = []
    failures: list[str] = []
    ready = threading.Barrier(SYNC_WRITERS + 1)
    deadline = [0.0]

    def writer(w: int) -> None:
        ready.wait()
        while time.perf_counter() < deadline[0]:
            result = store.put_message(made[w][counts[w] % SYNC_MESSAGES_EACH])
            if result.status != PutStatus.PUT_OK:
                failures.append(f"{result.status} {result.error}")
                return
            counts[w] += 1
            if not sizes:
                sizes.append(result.wrote_bytes)

    threads = [threading.Thread(target=writer, args=(w,), name=f"bench-writer-{w}") for w in range(SYNC_WRITERS)]
    for t in threads:
        t.start()
    t0 = time.perf_counter()
    deadline[0] = t0 + seconds
    ready.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if failures:
        raise BenchError(f"SYNC_FLUSH put_message failed: {failures[0]}")
    return sum(counts) / elapsed, sizes[0]


def _sync_asyncio(store: MessageStore, seconds: float, made: list[list[Message]]) -> tuple[float, int]:
    """(msgs/s, messages) with SYNC_WRITERS asyncio tasks on one loop (uvloop when installed), as the
    broker runs."""
    import asyncio
    try:
        import uvloop
        run = uvloop.run
    except ImportError:
        run = asyncio.run

    async def produce() -> int:
        deadline = time.perf_counter() + seconds
        counts = [0] * SYNC_WRITERS

        async def writer(w: int) -> None:
            while time.perf_counter() < deadline:
                result = await store.put_message_async(made[w][counts[w] % SYNC_MESSAGES_EACH])
                if result.status != PutStatus.PUT_OK:
                    raise BenchError(f"SYNC_FLUSH put_message_async: {result.status} {result.error}")
                counts[w] += 1

        await asyncio.gather(*(writer(w) for w in range(SYNC_WRITERS)))
        return sum(counts)

    t0 = time.perf_counter()
    count = run(produce())
    return count / (time.perf_counter() - t0), count
