"""``rocketq bench ...``: the benchmarks kept in the repository (results go to BENCHMARKS.md).

The measuring is in :mod:`rocketq.bench`; this module shows progress, renders the report as a
table (min, median and max run of each scenario, each beside the raw reference measured in that
run), and writes ``--json`` and ``--out`` markdown.
"""

from __future__ import annotations

import json
import logging
from contextlib import contextmanager
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from rocketq.cli.ui import err, out, step_progress

STDOUT = "-"


@click.group()
def bench() -> None:
    """Run rocketq's benchmarks."""


@bench.command("store")
@click.option("--quick", is_flag=True, help="Small sizes (64 MiB recovery), for a smoke run in under a minute.")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Runs of each scenario.")
@click.option("--dir", "directory", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Create the temporary stores under this directory (default: the system temp dir).")
@click.option("--json", "json_out", is_flag=False, flag_value=STDOUT, default=None, metavar="[FILE]",
              help="Write the results as JSON to FILE, or to stdout when FILE is left out "
                   "(the table then goes to stderr).")
@click.option("--out", "markdown_out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the results as markdown to this file.")
@click.option("--only", multiple=True, type=click.Choice(["batch", "single", "big", "sync", "recovery"]),
              help="Run only this step (repeatable): batch = batch append, dispatch lag and read back.")
@click.pass_context
def bench_store(ctx: click.Context, quick: bool, runs: int, directory: Path | None, json_out: str | None,
                markdown_out: Path | None, only: tuple[str, ...]) -> None:
    """The store benchmark: batch append, single put, 4 KiB bodies, SYNC_FLUSH, read back, crash recovery."""
    from rocketq.bench.report import machine_line, to_markdown
    from rocketq.bench.store_bench import run_store_bench
    bar, task = step_progress(None, "starting")

    def progress(label: str, done: int, total: int) -> None:
        bar.update(task, description=label, completed=done, total=total)

    verbose = bool(ctx.find_root().obj and ctx.find_root().obj.get("verbose"))
    with _quiet_store_logs(unless=verbose), bar:
        report = run_store_bench(runs=runs, quick=quick, directory=directory, progress=progress,
                                  only=list(only) or None)
    console = err() if json_out == STDOUT else out()
    console.print(_results_table(report))
    console.print(f"[bold]machine[/bold]: {escape(machine_line(report.machine))}")
    console.print("[bold]settings[/bold]: " + escape(", ".join(f"{k} = {v}" for k, v in report.settings.items())))
    for note in report.notes:
        console.print(f"[dim]- {escape(note)}[/dim]")
    data = json.dumps(report.to_dict(), indent=2)
    if json_out == STDOUT:
        click.echo(data)
    elif json_out:
        Path(json_out).write_text(data + "\n")
    if markdown_out:
        markdown_out.write_text(to_markdown(report))


def _results_table(report) -> Table:
    runs = report.settings["runs"]
    table = Table(title=f"rocketq store benchmark: min / median / max of {runs} run(s)", title_justify="left")
    table.add_column("scenario", ratio=3)
    table.add_column("run")
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("raw reference, same run", ratio=2)
    table.add_column("target")
    for s in _table_rows(report):
        table.add_row(*s[:-1], end_section=s[-1])
    return table


def _table_rows(report) -> list[tuple]:
    """(scenario, run, value, reference, target, last-of-scenario) per line; median first."""
    from rocketq.bench.report import format_value
    lines = []
    for s in report.scenarios:
        lo, mid, hi = s.summary()
        verdict = {True: "\n[green]met[/green]", False: "\n[red]missed[/red]", None: ""}[s.met()]
        runs = [("median", mid), ("min", lo), ("max", hi)] if len(s.runs) > 1 else [("", mid)]
        for i, (which, m) in enumerate(runs):
            lines.append((escape(s.title) if i == 0 else "", which, f"{format_value(m.value, s.unit)} {s.unit}",
                          escape(m.reference), f"{escape(s.target_text())}{verdict}" if i == 0 else "",
                          i == len(runs) - 1))
    return lines


@contextmanager
def _quiet_store_logs(*, unless: bool):
    """The crash-recovery scenario makes the store log the recovery it is meant to; keep the bar clean.

    Each scenario checks its own outcome and fails with an error if it is not what it measures.
    """
    logger = logging.getLogger("rocketq.store")
    previous = logger.level
    if not unless:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(previous)
