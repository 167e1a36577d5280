"""Runs every scenario for every available system, ``runs`` times, interleaved (A B C A B C ...), and
writes ``report.md``, ``results.json`` and PNG charts into ``bench-results/<timestamp>/``.

First, untimed, every system's durability modes are checked by counting the server's sync calls
(:mod:`.fsync_check`); only modes measured to sync before every acknowledgement (or, where strace
is missing, documented to) take part in the sync-durability scenario.

Before each latency scenario the machine is warmed: the system is driven for a second first (one
message per round trip on an idle VM is dominated by waking an idle vCPU, so the first second is
thrown away).  CPU seconds, peak RSS and peak private memory of the broker process are taken with
psutil around the batched-produce scenario; the CPU is scaled to one million messages.
"""

from __future__ import annotations

import asyncio
import json
import platform
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rocketq.bench.compare.fsync_check import check_durability, syncs_before_ack
from rocketq.bench.compare.systems import SYSTEMS

SIZES = (128, 1024)
# client rows --rows can pick: one message per round trip; batched produce with the rows that read its
# messages after it (backlog consume, end-to-end); 64 producers under sync durability
ROWS = ("one", "fast", "sync")
WARMUP_SENDS = 500                  # one-at-a-time sends before the timed ones, thrown away
VERIFY_N = 2000                     # acknowledged sends per durability check (untimed)
PERCENTILES = {"p50": 0.5, "p99": 0.99, "p999": 0.999}


@dataclass
class Cell:
    values: list[float] = field(default_factory=list)       # one per run (msgs/s, or ms)

    def mmm(self) -> list[float] | None:
        return [min(self.values), statistics.median(self.values), max(self.values)] if self.values else None


def _run(coro):
    try:
        import uvloop
        return uvloop.run(coro)
    except ImportError:
        return asyncio.run(coro)


def _pct(lat: list[float], q: float) -> float:
    lat = sorted(lat)
    return lat[min(len(lat) - 1, int(len(lat) * q))] * 1000 if lat else 0.0


class _Sampler:
    """Peak RSS and peak private memory of a process and its children, sampled every 100 ms on a thread.

    RSS counts the pages of mapped files a process has touched - for a broker that maps its log, the
    segments it wrote - so it grows with the messages written.  Private memory is RSS less the pages
    that are file-backed or shared (statm's ``shared``: RssFile + RssShmem): the heap, the stacks and
    the anonymous maps, what the broker itself holds."""

    def __init__(self, pid: int):
        import psutil
        self.proc = psutil.Process(pid)
        self._gone = psutil.Error                # the process (or a child) ended: keep the peaks so far
        self.peak = self.peak_private = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            try:
                infos = [p.memory_info() for p in (self.proc, *self.proc.children(recursive=True))]
            except self._gone:
                return
            self.peak = max(self.peak, sum(m.rss for m in infos))
            self.peak_private = max(self.peak_private, sum(m.rss - m.shared for m in infos))
            self._stop.wait(0.1)

    def cpu(self) -> float:
        t = self.proc.cpu_times()
        kids = sum(c.cpu_times().user + c.cpu_times().system for c in self.proc.children(recursive=True))
        return t.user + t.system + kids

    def __enter__(self):
        self.cpu0 = self.cpu()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.cpu_s = self.cpu() - self.cpu0


@dataclass(frozen=True)
class Plan:
    """Message counts and rates of one comparison (a system's ``caps`` may lower its counts)."""
    one_n: int = 5000
    fast_n: int = 200_000
    backlog: int = 1_000_000
    e2e_rate: int = 5000
    e2e_low_rate: int = 500            # a second end-to-end row every system can carry (the gRPC client)
    e2e_seconds: float = 5.0
    sync_n: int = 20_000
    verify_n: int = VERIFY_N           # acknowledged sends per durability check
    tools: bool = True                 # run the field's load tools (JVMs) against the systems that speak their protocol
    tools_only: bool = False           # only those (a re-run of their rows without the hour of the others)
    tool_seconds: float = 10.0         # timed seconds of each RocketMQ benchmark-tool producer run
    tool_warmup_s: float = 3.0         # seconds of it before the timing starts (JIT, connections)
    rows: tuple[str, ...] = ()         # only these client rows (ROWS), e.g. ("one", "sync"); () = every row

    def runs_row(self, row: str) -> bool:
        return not self.rows or row in self.rows

    def e2e_rates(self) -> list[tuple[str, int]]:
        low = [("e2e_low", self.e2e_low_rate)] if self.e2e_low_rate and self.e2e_low_rate < self.e2e_rate else []
        return [("e2e", self.e2e_rate)] + low


class Cells:
    """Every measured value, by (system, size, scenario, metric), one per run."""

    def __init__(self):
        self.errors: list[str] = []              # runs and load-tool runs that failed (the rest goes on)
        self.cells: dict[tuple, Cell] = {}
        self.cdfs: dict[str, list[float]] = {}   # produce-one latencies (ms) of the last run, for the charts

    def add(self, system: str, size: int, scenario: str, metric: str, value: float) -> None:
        self.cells.setdefault((system, size, scenario, metric), Cell()).values.append(value)

    def add_latencies(self, system: str, size: int, scenario: str, lat: list[float], labels=("p50", "p99")) -> None:
        for label in labels:
            self.add(system, size, scenario, label, _pct(lat, PERCENTILES[label]))

    def to_list(self) -> list[dict]:
        return [{"system": k[0], "size": k[1], "scenario": k[2], "metric": k[3], "min_median_max": c.mmm()}
                for k, c in self.cells.items()]


def run_compare(*, runs: int = 3, out_dir: Path | None = None, progress: Callable[[str], None] = lambda s: None,
                verify_n: int | None = None, security=None, only: tuple[str, ...] = (), **counts) -> dict:
    """Keyword arguments other than these are :class:`Plan` fields; ``verify_n`` defaults to
    ``VERIFY_N`` or ``one_n``, whichever is smaller (so a quick run checks durability quickly).
    *security* (a :class:`~rocketq.bench.security.BenchSecurity`) secures rocketq's rows. *only*: run just
    the systems whose name contains one of these words (case-insensitive); the others are skipped, saying so."""
    from rocketq.bench.security import NONE
    security = security or NONE
    plan = Plan(**counts, verify_n=verify_n or min(VERIFY_N, counts.get("one_n", Plan.one_n)))
    why_not = {s.name: _unselected(s.name, only) or s.available() or s.refuses(security) for s in SYSTEMS}
    systems = [s for s in SYSTEMS if why_not[s.name] is None]
    skipped = {name: why for name, why in why_not.items() if why is not None}
    cells = Cells()
    with tempfile.TemporaryDirectory() as tmp:
        checks = check_durability(systems, Path(tmp), n=plan.verify_n, body=b"v" * 1024, run=_run, progress=progress,
                                  security=security)
        sync_systems = [cls for cls in systems if cls.durability.get("sync") and syncs_before_ack(
            checks[cls.name].get("sync"), documented=True)]
        for run in range(runs):
            for size in SIZES:
                for cls in systems:                                  # interleaved: A B C A B C
                    label = f"run {run + 1}/{runs}, {size} B: {cls.name}"
                    progress(label)
                    if plan.runs_row("one") or plan.runs_row("fast") or plan.tools:
                        _reported(cells, label, lambda: _in_own_dir(
                            Path(tmp) / f"{cls.__name__}-{run}-{size}", cls, False, security,
                            lambda s: _timed_async(s, size, plan, cells)))
                    if cls in sync_systems and plan.runs_row("sync"):
                        progress(f"{label} (sync durability)")
                        _reported(cells, f"{label} (sync)", lambda: _in_own_dir(
                            Path(tmp) / f"{cls.__name__}-{run}-{size}-sync", cls, True, security,
                            lambda s: _timed_sync(s, size, plan, cells)))
    results = {"machine": _machine(), "runs": runs, "skipped": skipped, "systems": [s.name for s in systems],
               "durability": {s.name: s.durability for s in systems}, "durability_check": checks,
               "sync_scenario": [s.name for s in sync_systems],
               "notes": {s.name: s.notes for s in systems if s.notes},
               "versions": {s.name: s.version for s in systems if getattr(s, "version", None)},
               "failures": cells.errors,
               "settings": asdict(plan),
               "caps": {s.name: s.caps for s in systems if s.caps},
               "cells": cells.to_list(), "latency_samples_ms": cells.cdfs,
               "security": security.describe() + (" (rocketq's rows; the peers run as installed)"
                                                  if security.secured else "")}
    out = Path(out_dir) if out_dir else Path("bench-results") / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    from rocketq.bench.compare.report import write_report
    write_report(results, out)
    return results


def _reported(cells: Cells, label: str, work) -> None:
    """Run *work*; a system that fails to start or dies mid-run costs its cells of this pass, not the
    whole comparison (an hour of other systems' runs): the report lists the failure."""
    try:
        work()
    except Exception as e:                          # noqa: BLE001 - whatever a peer's server or client raised
        cells.errors.append(f"{label}: {type(e).__name__}: {str(e)[:600]}")


def _unselected(name: str, only: tuple[str, ...]) -> str | None:
    if not only or any(word.lower() in name.lower() for word in only):
        return None
    return f"not selected (--only {' '.join(only)})"


def _in_own_dir(root: Path, cls, sync: bool, security, work) -> None:
    """Start *cls* in *root*, do *work* with it, stop it and delete its data (a 1 M backlog is
    gigabytes per system)."""
    root.mkdir()
    system = cls(root, sync=sync, security=security)
    system.start()
    try:
        work(system)
    finally:
        system.stop()
        shutil.rmtree(root, ignore_errors=True)


def _timed_async(system, size: int, plan: Plan, cells: Cells) -> None:
    """Every scenario but the sync one, on a system in its async (default) durability mode."""
    if not plan.tools_only:
        _client_scenarios(system, size, plan, cells)
    _tool_rows(system, size, plan, cells, sync=False)


def _client_scenarios(system, size: int, plan: Plan, cells: Cells) -> None:
    name, body = system.name, b"m" * size
    _run(system.produce_one(WARMUP_SENDS, body))                   # warm-up, thrown away
    if plan.runs_row("one"):
        lat = _run(system.produce_one(plan.one_n, body))
        cells.cdfs[f"{name} {size} B"] = sorted(x * 1000 for x in lat)[::max(1, len(lat) // 500)]
        cells.add(name, size, "one", "msgs/s", len(lat) / sum(lat))
        cells.add_latencies(name, size, "one", lat, ("p50", "p99", "p999"))
    if not plan.runs_row("fast"):
        return
    with _Sampler(system.pid) as sampler:
        n, secs = _run(system.produce_fast(system.count("fast", plan.fast_n), body))
    cells.add(name, size, "fast", "msgs/s", n / secs)
    cells.add(name, size, "fast", "MB/s", n * size / secs / 1e6)
    cells.add(name, size, "fast", "cpu s / M msgs", sampler.cpu_s * 1e6 / n)
    cells.add(name, size, "fast", "peak RSS MB", sampler.peak / 1e6)
    cells.add(name, size, "fast", "peak private MB", sampler.peak_private / 1e6)
    if plan.backlog > n:
        _run(system.fill(plan.backlog - n, body))
    got, secs = _run(system.consume(system.count("consume", plan.backlog)))
    cells.add(name, size, "consume", "msgs/s", got / secs if secs else 0)
    for scenario, rate in plan.e2e_rates():
        if system.max_e2e_rate is None or rate <= system.max_e2e_rate:
            cells.add_latencies(name, size, scenario, _run(system.end_to_end(rate, plan.e2e_seconds, size)))


def _tool_rows(system, size: int, plan: Plan, cells: Cells, sync: bool) -> None:
    """The field's load tools against *system*; a failed tool run is reported, not fatal."""
    if not plan.tools:
        return
    try:
        rows = system.tool_rows(size, plan, sync)
    except Exception as e:                          # noqa: BLE001 - any failure of a JVM tool
        cells.errors.append(f"{system.name}, {size} B, {'sync' if sync else 'async'}: {str(e)[:600]}")
        rows = getattr(e, "rows", [])               # rmq_tools.ToolRunFailed: the runs before it still count
    for scenario, metric, value in rows:
        cells.add(system.name, size, scenario, metric, value)


def _timed_sync(system, size: int, plan: Plan, cells: Cells) -> None:
    """64 concurrent producers on a system in its sync durability mode, then the load tools' producers."""
    if not plan.tools_only:
        t0 = time.perf_counter()
        lat = _run(system.produce_sync(system.count("sync64", plan.sync_n), b"m" * size))
        cells.add(system.name, size, "sync64", "msgs/s", len(lat) / (time.perf_counter() - t0))
        cells.add_latencies(system.name, size, "sync64", lat, ("p99",))
    _tool_rows(system, size, plan, cells, sync=True)


def _machine() -> dict:
    import os
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
