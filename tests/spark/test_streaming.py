"""Structured Streaming over format("rocketq"): exactly-once into Parquet across a stop and restart,
queue discovery between micro-batches, availableNow, and the consumer group's committed offsets."""

from __future__ import annotations

from rocketq.client.sync import Admin
from spark_helpers import BackgroundProducer, produce, wait_until


def _stream(spark, srv, **options):
    reader = spark.readStream.format("rocketq").option("namesrv", srv.namesrv)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def _start(df, out, ckpt, *, available_now=False):
    writer = df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(ckpt))
    writer = writer.trigger(availableNow=True) if available_now else writer.trigger(processingTime="500 milliseconds")
    return writer.start()


def _finish_exactly_once(spark, restart, producer, out, total: int):
    """Restart the query, let the producer finish, wait for *total* rows; the sink's rows."""
    query = restart()
    try:
        producer.join(120)
        assert producer.error is None and not producer.is_alive()
        wait_until(lambda: spark.read.parquet(str(out)).count() >= total, 180, "every message in the sink")
    finally:
        query.stop()
    rows = spark.read.parquet(str(out)).select("msg_id", "body", "queue_id", "queue_offset").collect()
    assert len(rows) == total, "duplicates or losses in the sink"
    assert len({(r.queue_id, r.queue_offset) for r in rows}) == total
    return rows


def _rows_in(query) -> int:
    return sum(p.get("numInputRows", 0) for p in query.recentProgress)


def test_stop_and_restart_mid_stream_delivers_every_message_exactly_once(spark, server, tmp_path):
    topic = "SparkExactlyOnce"
    produce(server.namesrv, topic, 4, batch=1)               # the topic exists before the query starts
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    producer = BackgroundProducer(server.namesrv, topic, 3000, batch=50, pause_s=0.02)
    options = dict(topics=topic, startingOffsets="earliest", maxOffsetsPerTrigger="400",
                   consumerGroup="spark-exactly-once")

    query = _start(_stream(spark, server, **options), out, ckpt)
    producer.start()
    try:
        wait_until(lambda: len([p for p in query.recentProgress if p["numInputRows"]]) >= 2, 120,
                   "two micro-batches with rows")
    finally:
        query.stop()                                          # stopped mid-stream, the producer still sending
    first_run = _rows_in(query)
    assert 0 < first_run < 3004

    rows = _finish_exactly_once(spark, lambda: _start(_stream(spark, server, **options), out, ckpt), producer, out,
                                3004)
    got = {r.msg_id: r.body for r in rows}
    assert all(got[k] == v for k, v in producer.sent.items())

    # the group's committed offsets follow the query (one micro-batch behind Spark's checkpoint)
    with Admin(server.namesrv) as admin:
        lags = admin.consumer_lag("spark-exactly-once", topic)
    assert sum(q.consumer_offset for q in lags) > 0


def test_available_now_stops_at_the_start_offsets_and_new_queues_are_discovered(spark, server, tmp_path):
    produce(server.namesrv, "SparkDiscoverA", 100)
    df = _stream(spark, server, topicPattern="SparkDiscover.*", startingOffsets="earliest", maxOffsetsPerTrigger="60")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    query = _start(df, out, ckpt, available_now=True)
    query.awaitTermination(120)
    assert spark.read.parquet(str(out)).count() == 100
    assert len([p for p in query.recentProgress if p["numInputRows"]]) >= 2    # the limit split the backlog

    produce(server.namesrv, "SparkDiscoverB", 40)            # a new topic: 4 queues the query has not seen
    produce(server.namesrv, "SparkDiscoverA", 10)
    query = _start(df, out, ckpt, available_now=True)
    query.awaitTermination(120)
    counts = dict(spark.read.parquet(str(out)).groupBy("topic").count().collect())
    assert counts == {"SparkDiscoverA": 110, "SparkDiscoverB": 40}


_KILLED_QUERY = """
import sys
from rocketq.spark.session import get_session
spark = get_session("local[2]")
df = (spark.readStream.format("rocketq").option("namesrv", sys.argv[1]).option("topics", sys.argv[2])
      .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "300").load())
(df.writeStream.format("parquet").option("path", sys.argv[3]).option("checkpointLocation", sys.argv[4])
   .trigger(processingTime="300 milliseconds").start().awaitTermination())
"""


def test_sigkill_of_the_driver_mid_stream_then_restart_loses_and_duplicates_nothing(spark, server, tmp_path):
    import os
    import signal
    import subprocess
    import sys

    topic = "SparkKilled"
    produce(server.namesrv, topic, 4, batch=1)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    producer = BackgroundProducer(server.namesrv, topic, 3000, batch=50, pause_s=0.02)
    producer.start()
    driver = subprocess.Popen([sys.executable, "-c", _KILLED_QUERY, server.namesrv, topic, str(out), str(ckpt)],
                              start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: (ckpt / "commits").is_dir() and len(list((ckpt / "commits").iterdir())) >= 3, 180,
                   "three committed micro-batches in the killed driver")
    finally:
        os.killpg(driver.pid, signal.SIGKILL)                 # driver, JVM and Python workers at once
        driver.wait(30)

    options = dict(topics=topic, startingOffsets="earliest", maxOffsetsPerTrigger="400")
    rows = _finish_exactly_once(spark, lambda: _start(_stream(spark, server, **options), out, ckpt), producer, out,
                                3004)
    assert set(producer.sent) <= {r.msg_id for r in rows}


def test_a_broker_that_joins_between_micro_batches_is_read_from_its_earliest(spark, server, tmp_path):
    import re
    import subprocess
    import sys

    from rocketq.client.sync import Admin

    topic = "SparkTwoBrokers"
    produce(server.namesrv, topic, 100)
    df = _stream(spark, server, topics=topic, startingOffsets="earliest")
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    _start(df, out, ckpt, available_now=True).awaitTermination(120)
    assert spark.read.parquet(str(out)).count() == 100

    second = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "broker", "--namesrv", server.namesrv,
                               "--broker-name", "broker-spark-b", "--port", "0", "--host", "127.0.0.1",
                               "--store-path", str(tmp_path / "store-b")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = second.stdout.readline()
        addr = re.search(r"listening on (\S+?),? ", line).group(1)
        with Admin(server.namesrv) as admin:
            admin.create_topic(topic, queues=2, broker_addr=addr)
        produce(server.namesrv, topic, 200, batch=1)          # round-robin over both brokers' queues
        _start(df, out, ckpt, available_now=True).awaitTermination(120)
        rows = spark.read.parquet(str(out)).select("broker", "msg_id").collect()
    finally:
        second.terminate()
        second.wait(30)
    assert len(rows) == 300 and len({r.msg_id for r in rows}) == 300
    assert {r.broker for r in rows} == {"broker-a", "broker-spark-b"}
