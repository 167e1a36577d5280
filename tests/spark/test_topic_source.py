"""format("rocketq") batch reads against a real `rocketq serve`: contents, offsets, tags, bad input."""

from __future__ import annotations

import json

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import functions as F

from spark_helpers import produce


def _read(spark, srv, **options):
    reader = spark.read.format("rocketq").option("namesrv", srv.namesrv)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_returns_every_message_once_with_its_fields(spark, server):
    sent = produce(server.namesrv, "SparkBatch", 1000, tags=lambda j: "even" if j % 2 == 0 else "odd")
    df = _read(spark, server, topics="SparkBatch")
    assert df.rdd.getNumPartitions() == 4                    # one per queue
    rows = df.collect()
    assert len(rows) == 1000
    assert {r.msg_id: r.body for r in rows} == sent
    first = min(rows, key=lambda r: (r.queue_id, r.queue_offset))
    assert (first.topic, first.broker, first.queue_id, first.queue_offset) == ("SparkBatch", "broker-a", 0, 0)
    n = int(first.body.decode().rsplit("-", 1)[1])
    assert first.keys == f"key-{n}" and first.tags == ("even" if n % 2 == 0 else "odd")
    assert first.properties["UNIQ_KEY"] == first.msg_id and first.properties["KEYS"] == first.keys
    assert first.store_timestamp >= first.born_timestamp and first.reconsume_times == 0
    per_queue = df.groupBy("queue_id").agg(F.count("*").alias("n"), F.max("queue_offset").alias("last")).collect()
    assert all(r.n == r.last + 1 for r in per_queue)        # offsets 0..n-1, no gaps


def test_offsets_json_tags_and_timestamps_narrow_the_read(spark, server):
    produce(server.namesrv, "SparkRange", 400, tags=lambda j: "a" if j % 4 == 0 else "b")
    start = json.dumps({"SparkRange": {"broker-a": {"0": 10, "1": -2}}})
    end = json.dumps({"SparkRange": {"broker-a": {"0": 20, "1": 5, "2": 0, "3": 0}}})
    df = _read(spark, server, topics="SparkRange", startingOffsets=start, endingOffsets=end)
    got = sorted((r.queue_id, r.queue_offset) for r in df.select("queue_id", "queue_offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(0, 5)]

    tagged = _read(spark, server, topics="SparkRange", tags="a").select("tags").collect()
    assert len(tagged) == 100 and {r.tags for r in tagged} == {"a"}

    future = _read(spark, server, topics="SparkRange", startingTimestamp=str(2 ** 42)).count()
    assert future == 0
    assert _read(spark, server, topics="SparkRange", startingTimestamp="0").count() == 400


def test_topic_pattern_reads_every_matching_topic(spark, server):
    produce(server.namesrv, "SparkPatternA", 30)
    produce(server.namesrv, "SparkPatternB", 20)
    counts = dict(_read(spark, server, topicPattern="SparkPattern.*").groupBy("topic").count().collect())
    assert counts == {"SparkPatternA": 30, "SparkPatternB": 20}


def _error_text(exc_info) -> str:
    return str(exc_info.value)


def test_bad_input_gets_errors_that_say_what_is_wrong(spark, server):
    with pytest.raises(Exception) as e:
        _read(spark, server, topics="NoSuchTopicForSpark").count()
    assert "NoSuchTopicForSpark" in _error_text(e) and "does not exist" in _error_text(e)

    with pytest.raises(Exception) as e:
        spark.read.format("rocketq").option("namesrv", "127.0.0.1:1").option("topics", "X").load().count()
    assert "cannot reach rocketq at 127.0.0.1:1" in _error_text(e)

    with pytest.raises(Exception) as e:
        spark.read.format("rocketq").option("topics", "X").load().count()
    assert "option 'namesrv' is required" in _error_text(e)

    produce(server.namesrv, "SparkBadOffsets", 8, batch=1)        # round-robin: 2 per queue
    beyond = json.dumps({"SparkBadOffsets": {"broker-a": {"0": 1000}}})
    with pytest.raises(PySparkException) as e:
        _read(spark, server, topics="SparkBadOffsets", startingOffsets=beyond).count()
    assert "offset 1000 of topic SparkBadOffsets broker broker-a queue 0 is outside" in _error_text(e)
    assert "failOnDataLoss" in _error_text(e)
    lenient = _read(spark, server, topics="SparkBadOffsets", startingOffsets=beyond, failOnDataLoss="false")
    assert lenient.count() == 8 - 2                          # queue 0 starts at its end: its 2 are skipped

    with pytest.raises(Exception) as e:
        _read(spark, server, topics="SparkBadOffsets", startingOffsets="{not json").count()
    assert "startingOffsets" in _error_text(e)
