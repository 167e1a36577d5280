"""``rocketq bench ...``: benchmarks kept in the repository (results go to BENCHMARKS.md)."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table


@click.group()
def bench() -> None:
    """Run rocketq's benchmarks."""


@bench.command("store")
@click.option("--quick", is_flag=True, help="Small sizes, for a smoke run.")
@click.option("--runs", default=3, show_default=True)
@click.option("--dir", "directory", type=click.Path(path_type=Path), default=None,
              help="Where to create the temporary stores (default: the system temp dir).")
@click.option("--json", "as_json", type=click.Path(path_type=Path), default=None, help="Write results as JSON.")
@click.option("--out", type=click.Path(path_type=Path), default=None, help="Write a markdown table.")
def bench_store(quick: bool, runs: int, directory: Path | None, as_json: Path | None, out: Path | None) -> None:
    """The store benchmark: append, single put, 4 KiB, SYNC_FLUSH group commit, read, recovery."""
    from rocketq.bench.store_bench import machine_description, run_all, to_markdown
    console = Console()
    results = run_all(quick=quick, runs=runs, directory=directory, say=lambda s: console.print(f"[dim]{s}[/dim]"))
    table = Table(title="rocketq store benchmark (min / median / max of runs)")
    for col in ("scenario", "min", "median", "max", "unit", "reference (same run)", "target"):
        table.add_column(col)
    for r in results:
        table.add_row(r["name"], *(f"{v:,.2f}" if isinstance(v, float) else str(v) for v in r["values"]),
                      r["unit"], r.get("reference", ""), r["target"])
    console.print(table)
    console.print(machine_description())
    if as_json:
        as_json.write_text(json.dumps({"machine": machine_description(), "results": results}, indent=2))
    if out:
        out.write_text(to_markdown(results))
