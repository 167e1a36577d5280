"""The SparkSession the ``rocketq spark`` commands run on (local mode by default).

Python workers must import rocketq and pyarrow from the interpreter running the command, so
``PYSPARK_PYTHON`` is pinned to it unless the user set it; ``--master`` takes any Spark master
URL (``local[*]``, ``spark://host:7077``, ``yarn``), or use ``spark-submit`` with
:mod:`rocketq.spark.jobs` directly on a cluster.
"""

from __future__ import annotations

import os
import sys


def get_session(master: str = "local[*]", app: str = "rocketq", conf: dict[str, str] | None = None):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import rocketq.spark
    builder = (SparkSession.builder.master(master).appName(app)
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.python.filterPushdown.enabled", "true"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    rocketq.spark.register(spark)
    return spark
