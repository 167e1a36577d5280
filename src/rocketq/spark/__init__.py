"""PySpark connector: rocketq topics and store files as DataFrames (``pip install rocketq[spark]``).

::

    import rocketq.spark
    rocketq.spark.register(spark)
    df = spark.read.format("rocketq").option("namesrv", "127.0.0.1:9876").option("topics", "Orders").load()
    raw = spark.read.format("rocketq-store").load("/var/rocketq/store")

The data sources live in :mod:`rocketq.spark.topic_source` (``rocketq``: batch and streaming
source, batch and streaming sink) and :mod:`rocketq.spark.store_source` (``rocketq-store``).
"""

from __future__ import annotations

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark) -> None:
    """Register ``rocketq`` and ``rocketq-store`` with *spark*'s data source registry.

    The store source takes ``where`` filters on topic and store time when the session has
    ``spark.sql.python.filterPushdown.enabled=true`` at registration (Spark refuses a reader that
    accepts filters while that setting is off).
    """
    from rocketq.spark.store_source import PushdownRocketqStoreDataSource, RocketqStoreDataSource
    from rocketq.spark.topic_source import RocketqDataSource
    pushdown = str(spark.conf.get(PUSHDOWN_CONF, "false")).lower() == "true"
    spark.dataSource.register(PushdownRocketqStoreDataSource if pushdown else RocketqStoreDataSource)
    spark.dataSource.register(RocketqDataSource)
