"""``rocketq bench broker``: issue 3's numbers (see :mod:`rocketq.bench.broker_bench`); ``bench
compare``, ``replication``, ``grpc``, ``timer`` and ``filter``.

``bench broker`` and ``bench compare`` measure rocketq secured too: ``--acl FILE`` and
``--server-config FILE`` start their servers with ACL and TLS on, and the client options
(:mod:`rocketq.cli.client_options`, without ``--namesrv``: the benchmarks start their own servers)
say how their clients connect (:mod:`rocketq.bench.security`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from rocketq.cli.bench_cmd import bench
from rocketq.cli.client_options import client_options
from rocketq.cli.extras import require_extra
from rocketq.cli.ui import err, out, step_progress


def security_options(f):
    """``--acl``, ``--server-config`` and the client options, handed to the command as ``security``."""
    @functools.wraps(f)
    def wrapper(*args, acl_file=None, server_config=None, access=None, **kwargs):
        from rocketq.bench.security import BenchSecurity
        kwargs["security"] = BenchSecurity(acl_file=acl_file, server_config=server_config, access=access)
        return f(*args, **kwargs)
    wrapper = client_options(namesrv=False)(wrapper)
    wrapper = click.option("--server-config", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                           help="Start the servers with this broker.conf / TOML too (rocketq serve -c), e.g. "
                                "tlsMode=enforcing and the certificate paths.")(wrapper)
    return click.option("--acl", "acl_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                        help="Start the servers with ACL on and this plain_acl.yml (rocketq serve --acl); the "
                             "clients sign with --access-key/--secret-key or a profile.")(wrapper)


def _say_security(security) -> None:
    if security.secured:
        err().print(f"[dim]{escape(security.describe())}[/dim]")


def _explained(security, work):
    """*work()*; a refusal of the secured server becomes one line that says what to set."""
    from rocketq.client.access import explain
    from rocketq.client.model import MQClientError
    try:
        return work()
    except MQClientError as exc:
        raise click.ClickException(explain(exc, security.access)) from None


@bench.command("broker")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Runs of each scenario.")
@click.option("--quick", is_flag=True, help="A tenth of the message counts, for a smoke run.")
@click.option("--backlog", type=click.IntRange(min=1000), default=1_000_000, show_default=True,
              help="Messages in the backlog the drain scenario reads.")
@click.option("--dir", "directory", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Create the temporary stores under this directory.")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the results as JSON to this file.")
@security_options
def bench_broker(runs: int, quick: bool, backlog: int, directory: Path | None, json_out: Path | None,
                 security) -> None:
    """Start `rocketq serve` and measure sends, batches, a backlog drain, end-to-end latency, SYNC_FLUSH."""
    from rocketq.bench.broker_bench import run_broker_bench
    _say_security(security)
    bar, task = step_progress(None, "starting")
    with bar:
        report = _explained(security, lambda: run_broker_bench(
            runs=runs, quick=quick, backlog=backlog, directory=directory,
            progress=lambda label: bar.update(task, description=label), security=security))
    table = Table(title=f"rocketq broker, {runs} run(s) (min / median / max)"
                        + (f"; {escape(security.describe())}" if security.secured else ""))
    for col in ("scenario", "target", "msgs/s", "p50 ms", "p99 ms"):
        table.add_column(col)

    def fmt(values, spec):
        return " / ".join(format(v, spec) for v in values) if values else "-"
    for s in report["scenarios"]:
        table.add_row(s["name"], s["target"], fmt(s["msgs_per_s"], ",.0f"), fmt(s["p50_ms"], ".3f"),
                      fmt(s["p99_ms"], ".3f"))
    out().print(table)
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2))
        err().print(f"results written to {json_out}")


@bench.command("replication")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--count", type=click.IntRange(min=1000), default=20_000, show_default=True,
              help="Messages per produce scenario.")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False), default=None)
def bench_replication(runs: int, count: int, json_out: Path | None) -> None:
    """Master alone vs ASYNC_MASTER vs SYNC_MASTER produce, replication lag, failover time (real processes)."""
    from rocketq.bench.replication_bench import run_replication_bench
    bar, task = step_progress(None, "starting")
    with bar:
        report = run_replication_bench(runs=runs, count=count,
                                       progress=lambda label: bar.update(task, description=label))
    table = Table(title=f"replication, {runs} run(s), 1 KiB, 64 senders (min / median / max)")
    for col in ("mode", "msgs/s", "p50 ms", "p99 ms"):
        table.add_column(col)

    def fmt(values, spec):
        return " / ".join(format(v, spec) for v in values) if values else "-"
    for mode, r in report["produce_1KiB_64_senders"].items():
        table.add_row(mode, fmt(r["msgs_per_s"], ",.0f"), fmt(r["p50_ms"], ".2f"), fmt(r["p99_ms"], ".2f"))
    out().print(table)
    out().print(f"max replication lag under load (bytes): {fmt(report['max_replication_lag_bytes'], ',')}")
    out().print(f"failover, master SIGKILL -> reading from the slave (s): "
                f"{fmt(report['failover_read_from_slave_s'], '.3f')}")
    out().print(f"failover, master SIGKILL -> sending to the other master (s): "
                f"{fmt(report['failover_send_to_other_master_s'], '.3f')}")
    out().print(f"controller mode, master SIGKILL -> reading the topic (s): "
                f"{fmt(report['controller_failover_read_s'], '.3f')}")
    out().print(f"controller mode, master SIGKILL -> sending to the elected master (s): "
                f"{fmt(report['controller_failover_send_to_elected_master_s'], '.3f')}")
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2))


@bench.command("compare")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--backlog", type=click.IntRange(min=1000), default=1_000_000, show_default=True,
              help="Messages in the backlog each system's consumer reads.")
@click.option("--quick", is_flag=True, help="Small counts everywhere, for a smoke run.")
@click.option("--only", multiple=True, metavar="WORD",
              help="Run only the systems whose name contains WORD (repeatable), e.g. --only rocketq --only kafka.")
@click.option("--rows", multiple=True, type=click.Choice(["one", "fast", "sync"]),
              help="Only these client rows (repeatable): one message per round trip; batched produce with the "
                   "backlog and end-to-end rows after it; sync durability x64 [default: all].")
@click.option("--no-tools", "no_tools", is_flag=True,
              help="Leave out the field's load tools (RocketMQ's benchmark workload, Kafka's perf tools: JVMs).")
@click.option("--tools-only", "tools_only", is_flag=True,
              help="Run only the field's load tools (and the durability check), e.g. to re-measure their rows.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Where report.md, results.json and the charts go [default: bench-results/<timestamp>].")
@security_options
def bench_compare(runs: int, backlog: int, quick: bool, only: tuple[str, ...], rows: tuple[str, ...], no_tools: bool,
                  tools_only: bool, out_dir: Path | None, security) -> None:
    """rocketq (remoting and gRPC) beside Apache RocketMQ (remoting, and gRPC through its proxy), Apache Kafka,
    Redis Streams, NATS JetStream and RabbitMQ streams (whatever is installed; the Java peers need java and
    mvn), interleaved, with each system's durability modes checked by counting sync calls, plus RocketMQ's
    benchmark workload and Kafka's perf tools against the systems that speak their protocols."""
    require_extra("bench", "rocketq bench compare")
    if no_tools and tools_only:
        raise click.UsageError("--no-tools and --tools-only leave nothing to run; choose one")
    from rocketq.bench.compare.runner import run_compare
    from rocketq.bench.compare.systems import SYSTEMS
    _say_security(security)
    for cls in SYSTEMS:
        why = cls.available() or cls.refuses(security)
        if why:
            err().print(f"[yellow]skipping {cls.name}: {why}[/yellow]")
    sizes = dict(one_n=300, fast_n=5000, backlog=min(backlog, 10_000), e2e_rate=500, e2e_seconds=1.0,
                 sync_n=640, tool_seconds=4.0, tool_warmup_s=1.0) if quick else dict(backlog=backlog)
    bar, task = step_progress(None, "starting")
    with bar:
        results = _explained(security, lambda: run_compare(
            runs=runs, out_dir=out_dir, progress=lambda s: bar.update(task, description=s), security=security,
            only=only, tools=not no_tools, tools_only=tools_only, rows=rows, **sizes))
    where = out_dir or "bench-results/"
    out().print(f"report, results.json and charts written to {where}; systems skipped: "
                f"{', '.join(results['skipped']) or 'none'}")


@bench.command("grpc")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True)
@click.option("--count", type=click.IntRange(min=10), default=3000, show_default=True, help="Messages per send scenario.")
@click.option("--java", "java", is_flag=True,
              help="Apache RocketMQ's Java clients instead: rocketmq-client-java 5.0.8 over gRPC beside "
                   "rocketmq-client 5.3.3 over remoting (needs java and mvn, and a source checkout).")
@click.option("--transport", "transports", type=click.Choice(["grpcio", "native", "both"]), default="grpcio",
              show_default=True, help="With --java: the gRPC endpoint's transport (grpcTransport); both: each run "
                                      "serves each in turn, a table for each.")
@click.option("--server", type=click.Choice(["rocketq", "apache"]), default="rocketq", show_default=True,
              help="With --java: the server the Java clients run against; apache: Apache RocketMQ 5.3.3 itself "
                   "(its proxy in local mode for gRPC, the broker in it for remoting), for its own ratio.")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False), default=None)
def bench_grpc(runs: int, count: int, java: bool, transports: str, server: str, json_out: Path | None) -> None:
    """The official 5.x client over gRPC beside rocketq's client over remoting, same server, same run
    (with --java: Apache RocketMQ's Java clients of both protocols)."""
    if server != "rocketq" and not java:
        raise click.UsageError("--server applies to --java (the Python clients run against rocketq only)")
    if server == "apache" and transports != "grpcio":
        raise click.UsageError("--transport chooses rocketq's gRPC endpoint; Apache RocketMQ serves gRPC from its proxy")
    if java:
        _bench_grpc_java(runs, count, ("grpcio", "native") if transports == "both" else (transports,), server,
                         json_out)
        return
    from rocketq.bench.grpc_bench import run_grpc_bench
    bar, task = step_progress(None, "starting")
    with bar:
        report = run_grpc_bench(runs=runs, n=count, progress=lambda label: bar.update(task, description=label))
    ratios = report.pop("ratio gRPC / remoting (medians)")
    table = Table(title=f"1 KiB, {runs} run(s), msgs/s min / median / max")
    table.add_column("scenario")
    for path in report:
        table.add_column(path)
    table.add_column("gRPC / remoting")
    for scenario in ratios:
        table.add_row(scenario, *(" / ".join(f"{v:,.0f}" for v in report[p][scenario]) for p in report),
                      f"{ratios[scenario]:.2f}")
    out().print(table)
    if json_out is not None:
        json_out.write_text(json.dumps(dict(report, ratios=ratios), indent=2))


def _bench_grpc_java(runs: int, count: int, transports: tuple[str, ...], server: str, json_out: Path | None) -> None:
    from rocketq.bench.java_bench import run_java_bench
    from rocketq.bench.java_clients import ScenarioFailed, missing_java
    if missing_java():
        raise click.ClickException(f"no Java clients to run: {missing_java()}")
    bar, task = step_progress(None, "starting")
    with bar:
        try:
            report = run_java_bench(runs=runs, n=count, transports=transports, server=server,
                                    progress=lambda label: bar.update(task, description=escape(label)))
        except (RuntimeError, ScenarioFailed) as exc:  # Java missing, a peer that did not start, a failed scenario
            raise click.ClickException(str(exc)) from None
    for transport, one in report.get("by_transport", {transports[0]: report}).items():
        where = f"gRPC transport {transport}" if server == "rocketq" else report["server"]
        _java_table(one, f"{where}: 1 KiB, {count:,} per send scenario, {runs} run(s): msgs/s "
                         "min / median / max; p50 / p99 ms; server / client CPU µs per message (medians)")
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2))


def _java_table(report: dict, title: str) -> None:
    grpc, remoting = report["clients"]
    table = Table(title=title)
    for col in ("scenario", grpc, "", remoting, "", "gRPC / remoting"):
        table.add_column(col)

    def cells(cell: dict) -> tuple[str, str]:
        lat = f"{cell['p50_ms']:.2f} / {cell['p99_ms']:.2f} ms, " if "p50_ms" in cell else ""
        return (" / ".join(f"{v:,.0f}" for v in cell["msgs_per_s"]),
                f"{lat}{cell['server_cpu_us_per_msg']:,.0f} / {cell['client_cpu_us_per_msg']:,.0f} µs")
    for scenario, by_client in report["rows"].items():
        table.add_row(scenario, *cells(by_client[grpc]), *cells(by_client[remoting]),
                      f"{report['ratios'][scenario]:.2f}")
    out().print(table)


@bench.command("timer")
@click.option("--count", type=click.IntRange(min=1), default=1_000_000, show_default=True,
              help="Messages to schedule.")
@click.option("--window", type=click.FloatRange(min=0.1), default=600.0, show_default=True,
              help="Seconds over which the due times are spread (uniformly, in random order).")
@click.option("--lead", type=click.FloatRange(min=0.0), default=None,
              help="Seconds from the start to the first due time [default: 5 + count / 25,000 (gRPC: / 2,000)].")
@click.option("--via", type=click.Choice(["remoting", "grpc"]), default="remoting", show_default=True,
              help="remoting: rocketq's client puts the timer records straight into rmq_sys_wheel_timer; "
                   "grpc: the official client's SendMessage with delivery_timestamp.")
@click.option("--body-size", type=click.IntRange(min=12), default=100, show_default=True)
@click.option("--dir", "directory", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Create the temporary store under this directory.")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the results as JSON to this file.")
def bench_timer(count: int, window: float, lead: float | None, via: str, body_size: int, directory: Path | None,
                json_out: Path | None) -> None:
    """Schedule DELAY messages due over a window on a real server; lateness, losses, duplicates, memory."""
    from rocketq.bench.timer_bench import run_timer_bench
    bar, task = step_progress(count, "starting")
    with bar:
        report = run_timer_bench(n=count, window_s=window, lead_s=lead, via=via, body_size=body_size,
                                 directory=directory,
                                 progress=lambda label, done, total: bar.update(task, description=label,
                                                                                 completed=done, total=total))
    lat, mem = report["lateness_ms_by_store_time"], report["memory_mib"]
    table = Table(title=f"timer: {count:,} messages due over {window:g} s (after a {report['lead_s']:g} s lead)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    rows = [("scheduling path", via), ("scheduled", f"{report['scheduled']:,}"),
            ("scheduling took (s)", f"{report['schedule_s']:,.1f} ({report['schedule_rate_per_s'] or 0:,}/s)"),
            ("due before scheduling ended", f"{report['due_before_scheduling_ended']:,}"),
            ("delivered", f"{report['delivered']:,}"), ("missing", f"{report['missing']:,}"),
            ("duplicates", f"{report['duplicates']:,}"),
            ("lateness p50 / p99 / p99.9 / max (ms, store time - due)",
             f"{lat['p50']:.0f} / {lat['p99']:.0f} / {lat['p999']:.0f} / {lat['max']:.0f}"),
            ("lateness p50 / p99 / max (ms, at the consumer)",
             " / ".join(f"{report['lateness_ms_at_consumer'][k]:.0f}" for k in ("p50", "p99", "max"))),
            ("server peak RSS / RssAnon (MiB)", f"{mem['peak_rss']:.0f} / {mem['peak_anon']:.0f}")]
    for k in ("10%", "100%"):
        if f"{k}_scheduled_rss" in mem:
            rows.append((f"server RSS / RssAnon at {k} scheduled (MiB)",
                         f"{mem[f'{k}_scheduled_rss']:.0f} / {mem[f'{k}_scheduled_anon']:.0f}"))
    rows += [("server CPU (s)", f"{report['server_cpu_s']:,.1f}"),
             ("target", report["target"]), ("passed", "yes" if report["passed"] else "NO")]
    for row in rows:
        table.add_row(*row)
    out().print(table)
    out().print(f"path: {report['path']}")
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2))
        err().print(f"results written to {json_out}")


@bench.command("filter")
@click.option("--count", type=click.IntRange(min=1_000), default=200_000, show_default=True,
              help="Messages in the backlog (1 % of them match).")
@click.option("--dir", "directory", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Create the temporary store under this directory.")
@click.option("--json", "json_out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also write the results as JSON to this file.")
@click.option("--prefilter/--no-prefilter", default=True, show_default=True,
              help="Run the broker with RocketMQ's bit-map prefilter (enableCalcFilterBitMap) and compare.")
def bench_filter(count: int, directory: Path | None, json_out: Path | None, prefilter: bool) -> None:
    """Read a backlog through a 1 %-selective SQL92 filter (with and without the bit-map prefilter), a
    tag filter and none; pulls and scan rate."""
    from rocketq.bench.filter_bench import run_filter_bench
    report = run_filter_bench(count, directory, progress=lambda line: err().print(escape(line)), prefilter=prefilter)
    table = Table(title=f"filtered reads of a {count:,}-message backlog (best of 2 reads each)")
    for col in ("read", "pulls", "delivered", "seconds", "backlog scanned / s"):
        table.add_column(col, justify="left" if col == "read" else "right")
    for name, r in report.items():
        table.add_row(name, f"{r['pulls']:,}", f"{r['delivered']:,}", f"{r['seconds']:.2f}",
                      f"{r['scanned_per_s']:,.0f}")
    out().print(table)
    if json_out is not None:
        json_out.write_text(json.dumps(report, indent=2))
