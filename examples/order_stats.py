"""A Structured Streaming job on rocketq: count orders per tag, publish the counts to a topic and
append them to Parquet.

    rocketq serve &                                  # or any rocketq / RocketMQ-compatible cluster
    rocketq send Orders --tag books --count 1000 --size 64
    python examples/order_stats.py --namesrv 127.0.0.1:9876 --out /tmp/order-stats

Reads topic ``Orders`` from the earliest offset (the checkpoint under ``--out`` makes a restarted
job resume where it stopped), aggregates per ``tags``, and in every micro-batch writes the updated
rows to topic ``OrderStats`` (JSON bodies, the tag as key) and to Parquet under ``--out``.
``--once`` processes what is there and stops (``Trigger.AvailableNow``).
"""

from __future__ import annotations

import argparse

from pyspark.sql import functions as F

from rocketq.spark.session import get_session


def run(namesrv: str, out: str, *, once: bool = False, master: str = "local[*]") -> None:
    spark = get_session(master, app="order-stats")
    orders = (spark.readStream.format("rocketq")
              .option("namesrv", namesrv)
              .option("topics", "Orders")
              .option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", 100_000)
              .option("consumerGroup", "order-stats")        # lag tools see the job's progress
              .load())
    counts = orders.groupBy("tags").agg(F.count("*").alias("orders"), F.sum(F.length("body")).alias("body_bytes"))

    def publish(batch, batch_id: int) -> None:
        batch.select(F.lit("OrderStats").alias("topic"), F.col("tags").alias("keys"),
                     F.to_json(F.struct("tags", "orders", "body_bytes")).alias("body")) \
            .write.format("rocketq").option("namesrv", namesrv).mode("append").save()
        batch.withColumn("batch_id", F.lit(batch_id)).write.mode("append").parquet(f"{out}/counts")

    writer = (counts.writeStream.outputMode("update").foreachBatch(publish)
              .option("checkpointLocation", f"{out}/checkpoint"))
    query = writer.trigger(availableNow=True).start() if once else writer.trigger(processingTime="5 seconds").start()
    query.awaitTermination()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--namesrv", default="127.0.0.1:9876")
    parser.add_argument("--out", required=True, help="Directory for the Parquet output and the checkpoint.")
    parser.add_argument("--once", action="store_true", help="Process what is there, then stop.")
    parser.add_argument("--master", default="local[*]")
    args = parser.parse_args()
    run(args.namesrv, args.out, once=args.once, master=args.master)
