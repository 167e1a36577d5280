"""``rocketq store ...``: offline tools over a store directory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TransferSpeedColumn

path_arg = click.argument("path", type=click.Path(path_type=Path))


@click.group()
def store() -> None:
    """Verify, dump, rebuild or repair a store directory (the broker must not be running)."""


def _progress(label: str):
    bar = Progress(TextColumn(label), BarColumn(), TransferSpeedColumn(), console=Console(stderr=True),
                   transient=True)
    task = bar.add_task(label, total=None)
    return bar, lambda done, total: bar.update(task, completed=done, total=total)


@store.command()
@path_arg
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def verify(path: Path, as_json: bool) -> None:
    """Check every record, consume-queue unit and index entry against the log."""
    from rocketq.store.tools import verify_store
    bar, update = _progress("verifying")
    with bar:
        report = verify_store(path, progress=update)
    if as_json:
        click.echo(json.dumps(report.__dict__, indent=2))
    else:
        console = Console()
        console.print(f"{report.records} records, {report.bytes} bytes, {report.queues} consume queues, "
                      f"{report.index_keys} index keys checked")
        for p in report.problems:
            console.print(f"  [red]problem[/red]: {p}" if not p.startswith("note:") else f"  {p}", markup=True,
                          highlight=False)
        console.print("[green]OK[/green]" if report.ok else f"[red]{len(report.problems)} problem(s)[/red]")
    sys.exit(0 if report.ok else 1)


@store.command()
@path_arg
@click.option("--from-offset", default=0, show_default=True, help="First commitlog offset to print.")
def dump(path: Path, from_offset: int) -> None:
    """Print every record as a JSON line."""
    from rocketq.store.tools import dump_records
    for rec in dump_records(path, from_offset=from_offset):
        click.echo(json.dumps(rec, ensure_ascii=False))


@store.command()
@path_arg
def rebuild(path: Path) -> None:
    """Rebuild consume queues and index from the commitlog."""
    from rocketq.store.tools import rebuild_store
    report = rebuild_store(path)
    click.echo(f"rebuilt {report.queues} consume queues from {report.records} records")


@store.command()
@path_arg
@click.option("--truncate-at", type=int, required=True, help="Commitlog offset of the first damaged record.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def repair(path: Path, truncate_at: int, yes: bool) -> None:
    """Cut the log at a damaged record (dropping it and all after) and rebuild."""
    from rocketq.store.tools import repair_store
    if not yes:
        click.confirm(f"This drops every record at or after commitlog offset {truncate_at} in {path}. Continue?",
                      abort=True)
    report = repair_store(path, truncate_at=truncate_at)
    click.echo(f"dropped {report.dropped_bytes} bytes; rebuilt {report.queues} consume queues "
               f"from {report.records} records")
