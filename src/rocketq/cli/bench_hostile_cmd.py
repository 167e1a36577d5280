"""``rocketq bench hostile``: issue 22's numbers - memory and connections under hostile clients
(see :mod:`rocketq.bench.hostile_bench`; Linux only, it reads the server's /proc entries)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from rocketq.cli.bench_cmd import bench
from rocketq.cli.ui import err, out, step_progress


@bench.command("hostile")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Runs of each scenario.")
@click.option("--clients", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Non-reading clients at once.")
@click.option("--requests", type=click.IntRange(min=1), default=16, show_default=True,
              help="Big-answer requests each non-reading client sends.")
@click.option("--message-bytes", type=click.IntRange(min=1), default=1 << 20, show_default=True,
              help="Body of the message they ask for.")
@click.option("--stall-s", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
              help="serverWriteStallTimeoutSeconds of the server.")
@click.option("--flood", type=click.IntRange(min=10), default=2000, show_default=True,
              help="Connections in a flood.")
@click.option("--limit", type=click.IntRange(min=1), default=1000, show_default=True,
              help="serverMaxConnections for the flood past the limit.")
@click.option("--idle-s", type=click.FloatRange(min=0.1), default=5.0, show_default=True,
              help="serverChannelMaxIdleTimeSeconds for the flood past the limit.")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the results as JSON to this file.")
def bench_hostile(runs: int, clients: int, requests: int, message_bytes: int, stall_s: float, flood: int, limit: int,
                  idle_s: float, json_out: Path | None) -> None:
    """Non-reading clients and connection floods against `rocketq serve`: memory, limits, latency."""
    from rocketq.bench.hostile_bench import run_hostile_bench
    bar, task = step_progress(None, "starting")
    with bar:
        report = run_hostile_bench(runs=runs, clients=clients, requests=requests, message_bytes=message_bytes, stall_s=stall_s,
                                   flood=flood, limit=limit, idle_s=idle_s,
                                   progress=lambda label: bar.update(task, description=label))
    for name, measures in report.items():
        table = Table(title=f"{name} ({runs} run(s): min / median / max)")
        table.add_column("measure")
        table.add_column("value", justify="right")
        for key, values in measures.items():
            table.add_row(key.replace("_", " "), _min_median_max(values))
        out().print(table)
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2))
        err().print(f"results written to {json_out}")


def _min_median_max(values: list) -> str:
    numbers = sorted(v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool))
    if len(numbers) != len(values):
        return " / ".join(dict.fromkeys(str(v) for v in values))
    if len(set(numbers)) == 1:
        return str(numbers[0])
    return f"{numbers[0]} / {numbers[len(numbers) // 2]} / {numbers[-1]}"
