"""One real SparkSession (local mode) and one real `rocketq serve` for all Spark tests.

The environment is set before the session starts: Python workers run this interpreter (so
they import rocketq and pyarrow from the same venv) and Spark binds to loopback.
"""

from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed (pip install -e .[spark])")

from rocketq.bench.broker_bench import ServeProcess  # noqa: E402

os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/spark/" in str(item.fspath).replace(os.sep, "/"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    import rocketq.spark
    # the client profile file the Python workers read (they inherit the JVM's environment, fixed when
    # it starts): test_security.py writes named profiles there, never a default one other tests would use
    os.environ["ROCKETQ_CLIENT_CONFIG"] = str(tmp_path_factory.mktemp("client-config") / "client.toml")
    session = (SparkSession.builder.master("local[2]").appName("rocketq-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.python.filterPushdown.enabled", "true")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    rocketq.spark.register(session)
    yield session
    session.stop()
    os.environ.pop("ROCKETQ_CLIENT_CONFIG", None)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """`rocketq serve` (NameServer + broker, auto-created topics with 4 queues) on free ports."""
    root = tmp_path_factory.mktemp("spark-server") / "store"
    with ServeProcess(root) as srv:
        srv.store = root
        yield srv
