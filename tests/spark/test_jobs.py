"""`rocketq spark export | stats | rebuild-index` on the shared Spark session (in-process CLI)."""

from __future__ import annotations

import shutil

import pyarrow.parquet as pq
from click.testing import CliRunner

from rocketq.cli.main import cli
from rocketq.common.message import Message
from rocketq.store import StoreConfig
from rocketq.store.message_store import MessageStore
from rocketq.store.tools import verify_store
from spark_helpers import produce


def _store_with_messages(path, count: int) -> None:
    store = MessageStore(StoreConfig(store_path=path, commitlog_file_size=1 << 20, consume_queue_entries=1000,
                                     index_slots=1009, index_max_entries=20_000)).start()
    try:
        for i in range(0, count, 50):
            batch = [Message(f"Jobs{j % 2}", f"body-{j}".encode(), queue_id=j % 3, tags=f"t{j % 4}",
                             keys=f"order-{j} user-{j % 10}") for j in range(i, min(count, i + 50))]
            store.put_messages(batch)
    finally:
        store.shutdown()


def _files(directory):
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_rebuild_index_recreates_queues_byte_for_byte_and_verify_passes(spark, tmp_path):
    _store_with_messages(tmp_path, 5000)
    original_queues = _files(tmp_path / "consumequeue")
    shutil.rmtree(tmp_path / "consumequeue")
    shutil.rmtree(tmp_path / "index")
    (tmp_path / "consumequeue").mkdir()                       # an empty table: what a lost disk leaves

    result = CliRunner().invoke(cli, ["spark", "rebuild-index", str(tmp_path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "from 5,000 records" in result.output
    assert _files(tmp_path / "consumequeue") == original_queues
    report = verify_store(tmp_path)
    assert report.ok, report.problems
    assert report.index_keys == 2 * 5000 + 0                  # two KEYS words per message, no UNIQ_KEY here


def test_rebuild_index_refuses_a_store_the_broker_holds(spark, server):
    result = CliRunner().invoke(cli, ["spark", "rebuild-index", str(server.store)])
    assert result.exit_code != 0
    assert "is in use by another process" in result.output


def test_export_writes_parquet_partitioned_by_topic_and_date(spark, tmp_path):
    _store_with_messages(tmp_path / "store", 600)
    out = tmp_path / "export"
    result = CliRunner().invoke(cli, ["spark", "export", "--store", str(tmp_path / "store"), "--out", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "holds 600 messages" in result.output
    topics = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert topics == ["topic=Jobs0", "topic=Jobs1"]
    assert all(d.name.startswith("date=") for d in (out / "topic=Jobs0").iterdir() if d.is_dir())
    table = pq.read_table(out / "topic=Jobs1")
    assert table.num_rows == 300 and "body" in table.column_names


def test_stats_per_topic_and_queue_from_a_live_topic(spark, server):
    produce(server.namesrv, "SparkStats", 400, batch=1)       # keys key-<n>: 400 distinct, 100 per queue
    result = CliRunner().invoke(cli, ["spark", "stats", "--namesrv", server.namesrv, "--topics", "SparkStats",
                                      "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    import json
    rows = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    assert [r["queue_id"] for r in rows] == [0, 1, 2, 3]
    assert all(r["messages"] == 100 and r["first_offset"] == 0 and r["last_offset"] == 99 for r in rows)
    assert all(95 <= r["distinct_keys"] <= 105 for r in rows)  # HyperLogLog++: within its 5% default error
    assert sum(r["body_bytes"] for r in rows) == sum(len(f"SparkStats-{i}") for i in range(400))


def test_spark_commands_explain_a_missing_source(spark):
    result = CliRunner().invoke(cli, ["spark", "stats"])
    assert result.exit_code != 0 and "give exactly one of --store and --namesrv" in result.output
