"""The README's streaming example (examples/order_stats.py), run against the test server."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from spark_helpers import produce

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "order_stats.py"


def test_order_stats_example_publishes_counts_to_a_topic_and_parquet(spark, server, tmp_path):
    spec = importlib.util.spec_from_file_location("order_stats", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    produce(server.namesrv, "Orders", 300, tags=lambda j: "books" if j % 3 else "music")

    example.run(server.namesrv, str(tmp_path), once=True)

    parquet = spark.read.parquet(str(tmp_path / "counts"))
    latest = {r.tags: r.orders for r in parquet.collect()}
    assert latest == {"books": 200, "music": 100}
    published = spark.read.format("rocketq").option("namesrv", server.namesrv).option("topics", "OrderStats").load()
    bodies = [json.loads(r.body) for r in published.collect()]
    assert {b["tags"]: b["orders"] for b in bodies} == {"books": 200, "music": 100}
