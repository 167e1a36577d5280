"""``rocketq bench failover``: failover time and lost messages of a SYNC_MASTER broker set under the
etcd-backed controller (:mod:`rocketq.bench.failover_bench`).  Needs Debian's etcd-server."""

from __future__ import annotations

import json
from pathlib import Path

import click

from rocketq.cli.bench_cmd import bench


@bench.command("failover")
@click.option("--runs", type=click.IntRange(min=1), default=20, show_default=True, help="Master kills.")
@click.option("--kill-controller", is_flag=True, help="Also SIGKILL the active controller with each master.")
@click.option("--senders", type=click.IntRange(min=1), default=4, show_default=True,
              help="Concurrent sends kept in flight all along.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the results to this file.")
def failover(runs: int, kill_controller: bool, senders: int, json_out: Path | None) -> None:
    """SIGKILL the master of a 3-broker SYNC_MASTER set under load RUNS times: the time from each kill to
    the first acknowledged send after it (p50 / p99) and acknowledged messages never consumed (lost)."""
    from rocketq.bench.failover_bench import run_failover_bench
    from rocketq.controller.etcd_cluster import etcd_missing
    why = etcd_missing()
    if why:
        raise click.ClickException(why)

    def progress(i, n, s):
        click.echo(f"run {i}/{n}: first acknowledged send {s:.2f} s after the kill", err=True)
    summary = run_failover_bench(runs, kill_controller=kill_controller, senders=senders,
                                 progress=progress).summary()
    text = json.dumps(summary, indent=2)
    click.echo(text)
    if json_out is not None:
        json_out.write_text(text + "\n")
    if summary["lost"]:
        raise SystemExit(1)
