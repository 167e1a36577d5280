"""``rocketq store ...``: offline tools over a store directory (the broker must not be running).

The work is done by :mod:`rocketq.store.tools` (imported when a command runs); this module asks,
shows progress and reports.  ``verify`` exits 0 when the store is sound and 1 with the list of
problems otherwise; ``dump`` prints JSON lines; ``repair`` says what it will drop and asks
first (``--yes`` skips the question).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from rocketq.cli.ui import byte_progress, err, out

EXIT_PROBLEMS = 1
path_arg = click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False))
_OFFSET_IN_PROBLEM = re.compile(r"commitlog offset (\d+)")


@click.group()
def store() -> None:
    """Verify, dump, rebuild or repair a store directory (the broker must not be running)."""


@store.command()
@path_arg
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
def verify(ctx: click.Context, path: Path, as_json: bool) -> None:
    """Check every record, consume-queue unit and index entry against the log.

    Exit code 0 when everything agrees, 1 when anything does (the problems are listed).
    """
    from rocketq.store.tools import verify_store
    bar, update = byte_progress("verifying")
    with bar:
        report = verify_store(path, progress=update)
    if as_json:
        click.echo(json.dumps({"path": str(path), **asdict(report)}, indent=2))
    else:
        _print_verify(path, report)
    ctx.exit(0 if report.ok else EXIT_PROBLEMS)


def _print_verify(path: Path, report) -> None:
    console = out()
    table = Table(title=f"store {escape(str(path))}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    table.add_row("records", f"{report.records:,}")
    table.add_row("commitlog bytes", f"{report.bytes:,}")
    table.add_row("consume queues", f"{report.queues:,}")
    table.add_row("index keys", f"{report.index_keys:,}")
    console.print(table)
    for problem in report.problems:
        style = "yellow" if problem.startswith("note:") else "red"
        label = "" if problem.startswith("note:") else "problem: "
        console.print(f"[{style}]{label}[/{style}]{escape(problem)}")
    if report.ok:
        console.print("[green]OK[/green]: every record, consume-queue unit and index key checked")
        return
    console.print(f"[red]{len(report.problems)} problem(s)[/red] in {escape(str(path))}")
    offsets = [int(m.group(1)) for p in report.problems for m in [_OFFSET_IN_PROBLEM.search(p)] if m]
    if offsets:
        console.print(f"To cut the log at the first damaged record and rebuild queues and index: "
                      f"rocketq store repair {escape(str(path))} --truncate-at {min(offsets)}")
    else:
        console.print(f"Consume queues and index are derived state: rocketq store rebuild {escape(str(path))}")


@store.command()
@path_arg
@click.option("--from-offset", type=click.IntRange(min=0), default=0, show_default=True,
              help="Print records at or after this commitlog offset.")
@click.pass_context
def dump(ctx: click.Context, path: Path, from_offset: int) -> None:
    """Print every record as one JSON object per line.

    A stretch of the log that does not parse is printed as {"error": ..., "file": ...}, and the
    exit code is then 1.
    """
    from rocketq.store.tools import dump_records
    damaged = False
    for record in dump_records(path, from_offset=from_offset):
        damaged = damaged or "error" in record
        click.echo(json.dumps(record, ensure_ascii=False))
    if damaged:
        click.echo("rocketq: the log has damage; see the error lines, or run `rocketq store verify`", err=True)
        ctx.exit(EXIT_PROBLEMS)


@store.command()
@path_arg
def rebuild(path: Path) -> None:
    """Throw consume queues and index away and rebuild them from the commitlog."""
    from rocketq.store.tools import rebuild_store
    bar, update = byte_progress("rebuilding")
    with bar:
        report = rebuild_store(path, progress=update)
    click.echo(f"rebuilt {report.queues:,} consume queues and the index from {report.records:,} records")


@store.command()
@path_arg
@click.option("--truncate-at", type=click.IntRange(min=0), required=True,
              help="Commitlog offset of the first record to drop (the damaged one).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def repair(path: Path, truncate_at: int, yes: bool) -> None:
    """Cut the log at a record (dropping it and everything after it), then rebuild queues and index."""
    from rocketq.cli.cut_preview import CutError, preview_cut
    from rocketq.store.tools import repair_store
    with err().status("working out what the cut drops"):
        try:
            plan = preview_cut(path, truncate_at)
        except CutError as exc:
            raise click.ClickException(str(exc)) from None
    _refuse_if_in_use(path)
    if plan.dropped_bytes == 0:
        click.echo(f"nothing at or after offset {truncate_at} in {path}; to rebuild consume queues and index "
                   f"run `rocketq store rebuild {path}`")
        return
    what = _describe_cut(plan)
    click.echo(f"{path}: {what}", err=True)
    if not yes:
        click.confirm("Drop them? This cannot be undone", abort=True, err=True)
    report = repair_store(path, truncate_at=truncate_at)
    click.echo(f"dropped {what}; rebuilt {report.queues:,} consume queues from the {report.records:,} records kept")


def _describe_cut(plan) -> str:
    if plan.exact:
        text = (f"{plan.dropped_bytes:,} bytes ({plan.records:,} records) of commitlog from offset {plan.cut_at} "
                f"to {plan.log_end}")
    else:
        counted = f", at least {plan.records:,} records" if plan.records else ""
        text = (f"{plan.dropped_bytes:,} bytes of commitlog from offset {plan.cut_at} to {plan.log_end}, the end of "
                f"the non-zero data (the log stops parsing at offset {plan.damaged_at}{counted})")
    if plan.segments_deleted:
        text += f", deleting {plan.segments_deleted} later segment file(s)"
    return text


def _refuse_if_in_use(path: Path) -> None:
    """Fail before asking anything when another process holds the store (repair would refuse later)."""
    from rocketq.store.store_files import ProcessLock, StorePaths
    paths = StorePaths(path)
    if not paths.lock.exists():         # never opened by a store: nothing holds it, create nothing
        return
    lock = ProcessLock(paths.lock)
    lock.acquire()
    lock.release()
