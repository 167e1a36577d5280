"""format("rocketq") as a sink: rows become messages (batch and streaming), send results checked."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from spark_helpers import produce


def _read(spark, srv, topic):
    return spark.read.format("rocketq").option("namesrv", srv.namesrv).option("topics", topic).load()


def test_batch_write_sends_every_row_with_tags_keys_properties_and_queue(spark, server):
    rows = spark.range(2000).select(
        F.lit("SparkSinkOut").alias("topic"),
        F.concat(F.lit("body-"), F.col("id").cast("string")).cast("binary").alias("body"),
        F.when(F.col("id") % 2 == 0, "even").otherwise("odd").alias("tags"),
        F.concat(F.lit("k"), F.col("id").cast("string")).alias("keys"),
        F.create_map(F.lit("origin"), F.lit("spark")).alias("properties"),
        (F.col("id") % 3).cast("int").alias("queue_id"))
    rows.write.format("rocketq").option("namesrv", server.namesrv).mode("append").save()

    back = _read(spark, server, "SparkSinkOut").collect()
    assert len(back) == 2000
    assert sorted(r.body for r in back) == sorted(f"body-{i}".encode() for i in range(2000))
    assert {r.queue_id for r in back} == {0, 1, 2}                 # queue_id column honoured
    for r in back:
        i = int(r.body.decode().split("-")[1])
        assert r.queue_id == i % 3 and r.keys == f"k{i}" and r.tags == ("even" if i % 2 == 0 else "odd")
        assert r.properties["origin"] == "spark"


def test_sharding_key_keeps_each_key_on_one_queue(spark, server):
    rows = spark.range(600).select(F.col("id").cast("string").cast("binary").alias("body"),
                                   (F.col("id") % 5).cast("string").alias("sharding_key"))
    rows.write.format("rocketq").option("namesrv", server.namesrv).option("topic", "SparkSinkSharded") \
        .mode("append").save()
    back = _read(spark, server, "SparkSinkSharded").collect()
    by_key: dict[int, set[int]] = {}
    for r in back:
        by_key.setdefault(int(r.body) % 5, set()).add(r.queue_id)
    assert len(back) == 600 and all(len(q) == 1 for q in by_key.values())


def test_a_row_that_cannot_be_a_message_fails_the_write(spark, server):
    empty = spark.range(3).select(F.lit("SparkSinkBad").alias("topic"), F.lit(b"").alias("body"))
    with pytest.raises(Exception) as e:
        empty.write.format("rocketq").option("namesrv", server.namesrv).mode("append").save()
    assert "the body is null or empty" in str(e.value)
    no_topic = spark.range(3).select(F.lit(b"x").alias("body"))
    with pytest.raises(Exception) as e:
        no_topic.write.format("rocketq").option("namesrv", server.namesrv).mode("append").save()
    assert "no topic" in str(e.value)


def test_streaming_copy_from_topic_to_topic(spark, server, tmp_path):
    produce(server.namesrv, "SparkSinkStreamIn", 500)
    source = spark.readStream.format("rocketq").option("namesrv", server.namesrv) \
        .option("topics", "SparkSinkStreamIn").option("startingOffsets", "earliest").load()
    query = (source.select(F.lit("SparkSinkStreamOut").alias("topic"), "body", "keys")
             .writeStream.format("rocketq").option("namesrv", server.namesrv)
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination(120)
    back = _read(spark, server, "SparkSinkStreamOut").collect()
    assert sorted(r.body for r in back) == sorted(f"SparkSinkStreamIn-{i}".encode() for i in range(500))
