"""``rocketq spark ...``: bulk jobs on Spark (needs the spark extra: pip install -e '.[spark]').

Each command starts a SparkSession (``--master``, default ``local[*]``), runs one job from
:mod:`rocketq.spark.jobs` and shows the running stage's task progress on stderr.
"""

from __future__ import annotations

import threading

import click
from rich.table import Table

from rocketq.cli.client_options import client_options
from rocketq.cli.extras import require_extra
from rocketq.cli.ui import err, out, step_progress

master_option = click.option("--master", default="local[*]", show_default=True, help="Spark master URL.")


def _source_options(fn):
    fn = client_options(namesrv=False, only_with="namesrv")(fn)       # credentials and TLS of --namesrv reads
    fn = click.option("--store", "store", type=click.Path(file_okay=False), help="Read this store directory.")(fn)
    fn = click.option("--namesrv", help="Read topics through this NameServer (host:port).")(fn)
    fn = click.option("--topics", help="Comma-separated topics (with --namesrv; filters --store).")(fn)
    fn = click.option("--topic-pattern", help="Regular expression over topic names (with --namesrv).")(fn)
    return fn


def _session(master: str):
    try:
        from rocketq.spark.session import get_session
    except ImportError as exc:
        raise click.ClickException(f"Spark support is not installed ({exc}); pip install -e '.[spark]'") from None
    return get_session(master, app="rocketq spark")


def _with_stage_progress(spark, label: str, work):
    """Run *work()* while a bar shows the tasks of the Spark stages it runs."""
    tracker = spark.sparkContext.statusTracker()
    result: dict = {}

    def run():
        try:
            result["value"] = work()
        except BaseException as exc:          # re-raised on the calling thread
            result["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    bar, task = step_progress(None, label)
    with bar:
        thread.start()
        while thread.is_alive():
            stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            stages = [s for s in stages if s is not None]
            if stages:
                bar.update(task, completed=sum(s.numCompletedTasks for s in stages),
                           total=sum(s.numTasks for s in stages))
            thread.join(0.25)
    if "error" in result:
        raise result["error"]
    return result.get("value")


def _check_source(store, namesrv, topics, topic_pattern) -> None:
    if (store is None) == (namesrv is None):
        raise click.UsageError("give exactly one of --store and --namesrv")
    if namesrv and not (topics or topic_pattern):
        raise click.UsageError("--namesrv needs --topics or --topic-pattern")


@click.group()
def spark() -> None:
    """Bulk jobs on Apache Spark: export, stats, rebuild-index."""


@spark.command()
@_source_options
@click.option("--out", "out_path", required=True, help="Output directory (any path Spark can write).")
@click.option("--mode", type=click.Choice(["errorifexists", "overwrite", "append"]), default="errorifexists",
              show_default=True)
@master_option
def export(store, namesrv, topics, topic_pattern, access, out_path, mode, master) -> None:
    """Write messages to Parquet, partitioned by topic and store date."""
    _check_source(store, namesrv, topics, topic_pattern)
    require_extra("spark", "rocketq spark export")
    from rocketq.spark.jobs import export as run_export, source_frame
    from rocketq.spark.options import access_options
    session = _session(master)
    df = source_frame(session, store=store, namesrv=namesrv, topics=topics, topic_pattern=topic_pattern,
                      access_options=access_options(access))
    _with_stage_progress(session, "exporting", lambda: run_export(df, out_path, mode=mode))
    written = session.read.parquet(out_path).count()
    out().print(f"exported; {out_path} holds {written:,} messages")


@spark.command()
@_source_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines instead of a table.")
@master_option
def stats(store, namesrv, topics, topic_pattern, access, as_json, master) -> None:
    """Per topic and queue: messages, bytes, distinct keys, offsets and time range."""
    _check_source(store, namesrv, topics, topic_pattern)
    require_extra("spark", "rocketq spark stats")
    from rocketq.spark.jobs import source_frame, stats as run_stats
    from rocketq.spark.options import access_options
    session = _session(master)
    df = source_frame(session, store=store, namesrv=namesrv, topics=topics, topic_pattern=topic_pattern,
                      access_options=access_options(access))
    rows = _with_stage_progress(session, "counting", lambda: run_stats(df))
    if as_json:
        import json
        for r in rows:
            click.echo(json.dumps(r, default=str))
        return
    table = Table(title="rocketq stats", title_justify="left")
    for col in ("topic", "queue", "messages", "body bytes", "distinct keys", "offsets", "first store time",
                "last store time"):
        table.add_column(col, justify="left" if col == "topic" else "right")
    for r in rows:
        table.add_row(r["topic"], str(r["queue_id"]), f"{r['messages']:,}", f"{r['body_bytes'] or 0:,}",
                      f"{r['distinct_keys']:,}", f"{r['first_offset']}..{r['last_offset']}",
                      str(r["first_store_time"]), str(r["last_store_time"]))
    out().print(table)


@spark.command("rebuild-index")
@click.argument("path", type=click.Path(exists=True, file_okay=False))
@master_option
def rebuild_index(path, master) -> None:
    """Rebuild consume queues and index files of a store from its CommitLog (broker stopped)."""
    require_extra("spark", "rocketq spark rebuild-index")
    from rocketq.spark.jobs import rebuild_index as run_rebuild
    session = _session(master)
    bar, task = step_progress(None, "segments")
    with bar:
        result = run_rebuild(session, path, progress=lambda done, total: bar.update(task, completed=done,
                                                                                      total=total))
    out().print(f"rebuilt {result.queues:,} consume queues and the index from {result.records:,} records "
                f"(log end {result.end_offset:,}); check with: rocketq store verify {path}")
    err().print("[dim]the store can be started again[/dim]")
