"""``rocketq bench cluster``: one topic over 1, 2 and 3 broker groups (:mod:`rocketq.bench.cluster_bench`)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from rocketq.cli.bench_cmd import bench
from rocketq.cli.ui import out, step_progress


@bench.command("cluster")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--count", type=click.IntRange(min=1000), default=20_000, show_default=True,
              help="Messages per run and group count.")
@click.option("--groups", default="1,2,3", show_default=True, help="Broker group counts, comma-separated.")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False), default=None)
def bench_cluster(runs: int, count: int, groups: str, json_out: Path | None) -> None:
    """Throughput and CPU per message of one topic over several broker groups (real processes)."""
    from rocketq.bench.cluster_bench import run_cluster_bench
    try:
        counts = tuple(int(g) for g in groups.split(","))
    except ValueError:
        raise click.BadParameter(f"{groups!r} is not a comma-separated list of numbers", param_hint="--groups")
    if not counts or not all(1 <= g <= 26 for g in counts):
        raise click.BadParameter("group counts are 1..26", param_hint="--groups")
    bar, task = step_progress(None, "starting")
    with bar:
        report = run_cluster_bench(runs=runs, count=count, group_counts=counts,
                                   progress=lambda label: bar.update(task, description=label))
    table = Table(title=f"one topic over N groups, {runs} run(s), {report['body_bytes']} B, {report['senders']} "
                        f"senders, {report['queues_per_group']} queues per group (min / median / max)")
    for col in ("groups", "msgs/s", "broker CPU µs/msg", "client CPU µs/msg"):
        table.add_column(col)

    def fmt(values, spec):
        return " / ".join(format(v, spec) for v in values)
    for g, r in report["groups"].items():
        table.add_row(str(g), fmt(r["msgs_per_s"], ",.0f"), fmt(r["broker_cpu_us_per_msg"], ".0f"),
                      fmt(r["client_cpu_us_per_msg"], ".0f"))
    out().print(table)
    out().print(f"{report['cpus']} CPUs; load average before {report['load_before']}, after {report['load_after']}")
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2))
