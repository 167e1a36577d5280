"""Runs every scenario for every available system, ``runs`` times, interleaved (A B C A B C ...), and
writes ``report.md``, ``results.json`` and PNG charts into ``bench-results/<timestamp>/``.

Before each latency scenario the machine is warmed: the system is driven for a second first (one
message per round trip on an idle VM is dominated by waking an idle vCPU, so the first second is
thrown away).  CPU seconds and peak RSS of the broker process are taken with psutil around the
batched-produce scenario and scaled to one million messages.
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
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.bench.compare.systems import SYSTEMS

SIZES = (128, 1024)


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
    """Peak RSS of a process, sampled every 100 ms on a thread."""

    def __init__(self, pid: int):
        import psutil
        self.proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.proc.memory_info().rss + sum(
                    c.memory_info().rss for c in self.proc.children(recursive=True)))
            except Exception:
                return
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


def run_compare(*, runs: int = 3, one_n: int = 5000, fast_n: int = 200_000, backlog: int = 1_000_000,
                e2e_rate: int = 5000, e2e_seconds: float = 5.0, sync_n: int = 20_000, out_dir: Path | None = None,
                progress: Callable[[str], None] = lambda s: None) -> dict:
    systems = [s for s in SYSTEMS if s.available() is None]
    skipped = {s.name: s.available() for s in SYSTEMS if s.available() is not None}
    cells: dict[tuple, Cell] = {}
    cdfs: dict[str, list[float]] = {}            # produce-one latencies (ms) of the last run, for the charts

    def cell(*key) -> Cell:
        return cells.setdefault(key, Cell())
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            for size in SIZES:
                body = b"m" * size
                for cls in systems:                                  # interleaved: A B C A B C
                    progress(f"run {run + 1}/{runs}, {size} B: {cls.name}")
                    root = Path(tmp) / f"{cls.__name__}-{run}-{size}"
                    root.mkdir()
                    sys_ = cls(root)
                    sys_.start()
                    try:
                        _run(sys_.produce_one(500, body))             # warm-up, thrown away
                        lat = _run(sys_.produce_one(one_n, body))
                        cdfs[f"{cls.name} {size} B"] = sorted(x * 1000 for x in lat)[::max(1, len(lat) // 500)]
                        cell(cls.name, size, "one", "msgs/s").values.append(len(lat) / sum(lat))
                        for q, label in ((0.5, "p50"), (0.99, "p99"), (0.999, "p999")):
                            cell(cls.name, size, "one", label).values.append(_pct(lat, q))
                        with _Sampler(sys_.pid) as sampler:
                            n, secs = _run(sys_.produce_fast(fast_n, body))
                        cell(cls.name, size, "fast", "msgs/s").values.append(n / secs)
                        cell(cls.name, size, "fast", "MB/s").values.append(n * size / secs / 1e6)
                        cell(cls.name, size, "fast", "cpu s / M msgs").values.append(sampler.cpu_s * 1e6 / n)
                        cell(cls.name, size, "fast", "peak RSS MB").values.append(sampler.peak / 1e6)
                        remaining = max(0, backlog - n)
                        if remaining:
                            _run(sys_.produce_fast(remaining, body))
                        got, secs = _run(sys_.consume(backlog))
                        cell(cls.name, size, "consume", "msgs/s").values.append(got / secs if secs else 0)
                        lat = _run(sys_.end_to_end(e2e_rate, e2e_seconds, size))
                        cell(cls.name, size, "e2e", "p50").values.append(_pct(lat, 0.5))
                        cell(cls.name, size, "e2e", "p99").values.append(_pct(lat, 0.99))
                    finally:
                        sys_.stop()
                        shutil.rmtree(root, ignore_errors=True)      # a 1 M backlog is gigabytes per system
                    if cls.durability.get("sync"):
                        progress(f"run {run + 1}/{runs}, {size} B: {cls.name} (sync durability)")
                        sroot = Path(tmp) / f"{cls.__name__}-{run}-{size}-sync"
                        sroot.mkdir()
                        ssys = cls(sroot, sync=True)
                        ssys.start()
                        try:
                            t0 = time.perf_counter()
                            lat = _run(ssys.produce_sync(sync_n, body))
                            cell(cls.name, size, "sync64", "msgs/s").values.append(len(lat) / (time.perf_counter() - t0))
                            cell(cls.name, size, "sync64", "p99").values.append(_pct(lat, 0.99))
                        finally:
                            ssys.stop()
                            shutil.rmtree(sroot, ignore_errors=True)
    results = {"machine": _machine(), "runs": runs, "skipped": skipped,
               "durability": {s.name: s.durability for s in systems},
               "settings": {"one_n": one_n, "fast_n": fast_n, "backlog": backlog, "e2e_rate": e2e_rate,
                            "e2e_seconds": e2e_seconds, "sync_n": sync_n},
               "cells": [{"system": k[0], "size": k[1], "scenario": k[2], "metric": k[3], "min_median_max": c.mmm()}
                         for k, c in cells.items()], "latency_samples_ms": cdfs}
    out = Path(out_dir) if out_dir else Path("bench-results") / time.strftime("%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    from rocketq.bench.compare.report import write_report
    write_report(results, out)
    return results


def _machine() -> dict:
    import os
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
