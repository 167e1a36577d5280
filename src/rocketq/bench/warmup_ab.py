"""Segment warm-up modes side by side: a serving broker's sends with each, interleaved.

``python -m rocketq.bench.warmup_ab [--runs 3] [--scale 1.0] [--modes prefault,none,warm]``

Modes (``rocketq serve --set ...``):

* ``prefault`` - ``prefault_mapped_file_enable=true``: a background thread maps pages in read-only
  (``MADV_POPULATE_READ``) 64 MiB ahead of the writer, into the next segment near the current one's end;
* ``none``     - no warm-up: an append's first write to a page faults it in (Apache RocketMQ's default);
* ``warm``     - ``warmMapedFileEnable=true``: RocketMQ's warm-up, every page of a new segment written.

Each run starts one ``rocketq serve`` per mode (default 1 GiB segments, ASYNC_FLUSH, a fresh store, as
``rocketq bench broker`` does) and sends, from this process with rocketq's client: one 1 KiB message per
round trip, 256 single 1 KiB sends in flight, and batches of 64 x 1 KiB with 8 in flight.  It reports
msgs/s and p99 per scenario and the broker process's CPU seconds (user + system, from /proc) for the
whole run, which is where a warm-up that maps pages nobody writes shows.  Modes alternate within a
run so that they share the machine's state.  Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

from rocketq.bench.broker_bench import ServeProcess, _pcts, _run, _sends

MODES = {
    "prefault": ("--set", "prefault_mapped_file_enable=true", "--set", "warmMapedFileEnable=false"),
    "none": ("--set", "prefault_mapped_file_enable=false", "--set", "warmMapedFileEnable=false"),
    "warm": ("--set", "prefault_mapped_file_enable=false", "--set", "warmMapedFileEnable=true"),
}
# (name, messages at scale 1, body bytes, sends in flight, messages per batch; 0 = single sends)
SCENARIOS = [("sync send 1KiB", 20_000, 1024, 1, 0), ("in-flight send 1KiB (256)", 100_000, 1024, 256, 0),
             ("batch send 1KiB (64 x 8)", 300_000, 1024, 8, 64)]


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of process *pid* so far (/proc/<pid>/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(root: Path, mode: str, scale: float) -> dict:
    out: dict = {}
    with ServeProcess(root / mode, *MODES[mode]) as srv:
        cpu0 = _cpu_seconds(srv.proc.pid)
        for i, (name, n, size, inflight, batch) in enumerate(SCENARIOS):
            rate, lat = _run(_sends(srv.namesrv, f"W{i}", max(1000, int(n * scale)), size, inflight, batch))
            out[name] = {"msgs_per_s": rate, "p99_ms": _pcts(lat)[1]}
        out["broker_cpu_s"] = _cpu_seconds(srv.proc.pid) - cpu0
    return out


def _medians(results: list[dict]) -> dict:
    out: dict = {}
    for key, first in results[0].items():
        if isinstance(first, dict):
            out[key] = {k: statistics.median(r[key][k] for r in results) for k in first}
        else:
            out[key] = statistics.median(r[key] for r in results)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="Multiply every scenario's message count.")
    ap.add_argument("--modes", default="prefault,none,warm")
    args = ap.parse_args()
    modes = args.modes.split(",")
    runs: dict[str, list[dict]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for mode in modes if run % 2 == 0 else reversed(modes):
                runs[mode].append(one_run(Path(tmp) / str(run), mode, args.scale))
    summary = {mode: _medians(results) for mode, results in runs.items()}
    print(json.dumps({"runs": runs, "median": summary, "scale": args.scale}, indent=1))


if __name__ == "__main__":
    main()
