"""Benchmark results: what one run measured, the min / median / max over runs, and the machine.

Nothing here measures or prints; :mod:`rocketq.bench.store_bench` fills these types and the
command line renders them (a rich table, JSON, markdown).

Every figure keeps the raw reference that was measured in the *same* run beside it (the 4 KiB
store bandwidth beside a plain mmap copy of the same bytes, group commit beside one fdatasync
per message), so the min, median and max rows each show the run they come from, and machine
noise hits figure and reference alike.  The median is ``median_low``: always a real run.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path


class BenchError(RuntimeError):
    """A scenario could not be set up, or did not do the work it claims to measure."""


@dataclass(frozen=True)
class Measurement:
    """One run's figure, the raw reference measured beside it (as text), and the numbers behind both."""

    value: float
    reference: str = ""
    detail: dict = field(default_factory=dict)


@dataclass
class Scenario:
    """One benchmark row: a figure measured once per run, and the target it is held to."""

    key: str
    title: str
    unit: str
    target: float | None = None
    higher_is_better: bool = True
    runs: list[Measurement] = field(default_factory=list)

    def ordered(self) -> list[Measurement]:
        return sorted(self.runs, key=lambda m: m.value)

    def summary(self) -> tuple[Measurement, Measurement, Measurement]:
        """(min, median, max) runs; the median is the lower middle run when the count is even."""
        runs = self.ordered()
        return runs[0], runs[(len(runs) - 1) // 2], runs[-1]

    def target_text(self) -> str:
        if self.target is None:
            return "-"
        value = f"{self.target:,.0f}" if self.target == int(self.target) else format_value(self.target, self.unit)
        return f"{'>=' if self.higher_is_better else '<='} {value} {self.unit}"

    def met(self) -> bool | None:
        """Whether the median run meets the target (None when there is no target)."""
        if self.target is None or not self.runs:
            return None
        median = self.summary()[1].value
        return median >= self.target if self.higher_is_better else median <= self.target

    def to_dict(self) -> dict:
        lo, mid, hi = self.summary()
        return {"key": self.key, "title": self.title, "unit": self.unit, "target": self.target,
                "higher_is_better": self.higher_is_better, "met": self.met(),
                "min": lo.value, "median": mid.value, "max": hi.value,
                "median_of_values": statistics.median(m.value for m in self.runs),
                "runs": [asdict(m) for m in self.runs]}


@dataclass
class BenchReport:
    machine: dict
    settings: dict
    notes: list[str]
    scenarios: list[Scenario]

    def to_dict(self) -> dict:
        return {"machine": self.machine, "settings": self.settings, "notes": self.notes,
                "scenarios": [s.to_dict() for s in self.scenarios]}


def format_value(value: float, unit: str) -> str:
    if unit in ("msgs/s", "MB/s", "B"):
        return f"{value:,.0f}"
    if unit == "s":
        return f"{value:.3f}" if value < 1 else f"{value:.2f}"
    return f"{value:,.1f}"


def machine_description(directory: Path) -> dict:
    """Platform, CPUs, Python, numpy, and the filesystem the benchmark's stores live on."""
    import numpy
    return {"platform": platform.platform(), "machine": platform.machine(),
            "processor": _cpu_model() or platform.processor() or "unknown", "cpu_count": os.cpu_count(),
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "numpy": numpy.__version__, "gc_threshold": list(gc.get_threshold()),
            "memory_bytes": _memory_bytes(), "directory": str(directory),
            "filesystem": filesystem_of(directory)}


def machine_line(machine: dict) -> str:
    mem = f", {machine['memory_bytes'] / (1 << 30):.0f} GiB RAM" if machine.get("memory_bytes") else ""
    return (f"{machine['platform']}; {machine['processor']}, {machine['cpu_count']} CPUs{mem}; "
            f"{machine['python']}, numpy {machine['numpy']}, gc threshold {tuple(machine['gc_threshold'])}; "
            f"stores in {machine['directory']} on {machine['filesystem']}")


def filesystem_of(path: Path) -> str:
    """'ext4 (/dev/vda on /)' for the mount holding *path*, from /proc/self/mounts (Linux)."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return "unknown filesystem"
    target = os.path.realpath(path)
    best = None
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        device, mount, fstype = parts[0], parts[1].replace("\\040", " "), parts[2]
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and (best is None or len(mount) > len(best[1])):
            best = (device, mount, fstype)
    return f"{best[2]} ({best[0]} on {best[1]})" if best else "unknown filesystem"


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def to_markdown(report: BenchReport) -> str:
    """The report as markdown: machine, settings, one table row per scenario, notes."""
    lines = ["# rocketq store benchmark", "", f"Machine: {machine_line(report.machine)}", "",
             "Settings: " + ", ".join(f"{k} = {v}" for k, v in report.settings.items()), "",
             "| scenario | min | median | max | unit | target | met |", "|---|---|---|---|---|---|---|"]
    for s in report.scenarios:
        cells = []
        for m in s.summary():
            ref = f" ({m.reference})" if m.reference else ""
            cells.append(f"{format_value(m.value, s.unit)}{ref}")
        met = {True: "yes", False: "no", None: "-"}[s.met()]
        lines.append(f"| {s.title} | {' | '.join(cells)} | {s.unit} | {s.target_text()} | {met} |")
    lines += ["", "Each figure is one run; the text in brackets is the raw reference measured in that same run.",
              ""] + [f"- {n}" for n in report.notes]
    return "\n".join(lines) + "\n"
