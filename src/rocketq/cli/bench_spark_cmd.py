"""``rocketq bench spark``: issue 5's numbers (see :mod:`rocketq.bench.spark_bench`)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from rocketq.cli.bench_cmd import bench
from rocketq.cli.extras import require_extra
from rocketq.cli.ui import err, out, step_progress


@bench.command("spark")
@click.option("--messages", type=click.IntRange(min=10_000), default=5_000_000, show_default=True,
              help="Backlog size (128-byte messages) read by the sources.")
@click.option("--sink-messages", type=click.IntRange(min=1000), default=1_000_000, show_default=True)
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")
@click.option("--dir", "directory", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Create the temporary store under this directory.")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False), default=None)
def bench_spark(messages: int, sink_messages: int, runs: int, master: str, directory: Path | None,
                json_out: Path | None) -> None:
    """Rows/s of format("rocketq") and format("rocketq-store") beside spark.range, and the sink's msgs/s."""
    require_extra("spark", "rocketq bench spark")
    from rocketq.bench.spark_bench import run_spark_bench
    bar, task = step_progress(None, "starting")
    with bar:
        report = run_spark_bench(n=messages, runs=runs, sink_n=sink_messages, master=master, directory=directory,
                                 progress=lambda label: bar.update(task, description=label))
    table = Table(title=f"Spark, {report['messages']:,} x {report['body_bytes']} B, {runs} run(s), {master} "
                        f"(min / median / max)")
    table.add_column("read / write")
    table.add_column("rows/s", justify="right")
    table.add_column("load (1 min)", justify="right")
    for name, (lo, med, hi) in report["rows_per_s"].items():
        lo_load, _, hi_load = report["load_1m_after"][name]
        table.add_row(name, f"{lo:,.0f} / {med:,.0f} / {hi:,.0f}", f"{lo_load:.1f}-{hi_load:.1f}")
    out().print(table)
    for name, value in report["ratios"].items():
        out().print(f"{name}: {value:.2f}")
    for name, values in report["pair_ratios"].items():
        out().print(f"{name}, each pair (the ratio above is their median): {', '.join(f'{v:.2f}' for v in values)}")
    for name, value in report["cpu_ratios"].items():
        out().print(f"{name}: {value:.2f}")
    for name, parts in report["cpu_us_per_row"].items():
        out().print(f"{name}: CPU a row, " + ", ".join(f"{part} {us:.2f} us" for part, us in parts.items()))
    for name, value in report["us_per_row_over_the_ceiling"].items():
        out().print(f"{name}: {value:.3f} us a row over the ceiling")
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2))
        err().print(f"results written to {json_out}")
