"""format("rocketq") against a real `rocketq serve` with ACL and TLS (enforcing) on (issue 23):
reads, a stream and the sink with accessKey / secretKey / tlsCaFile options or a profile the
executors read themselves; a wrong secret, none, or no TLS fail with the server's refusal and what
to set; and the secret is in no plan string, explain output, UI execution, streaming progress,
Spark conf or driver log line.  One secured server for the module; the session is the shared one.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import functions as F
from secured import ADMIN, ADMIN_SECRET, WRONG_SECRET, assert_no_secret, secured_server

from rocketq.cli.main import cli
from rocketq.client.access import CLIENT_ENV_VARS
from rocketq.client.sync import Producer
from rocketq.common.message import Message
from rocketq.remoting.tls import client_context

TOPIC, OUT, STREAM_OUT = "SparkSec", "SparkSecOut", "SparkSecStream"
MESSAGES = 300


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    with secured_server(tmp_path_factory.mktemp("spark-secured")) as s:
        with Producer("spark-sec-producer", s.namesrv, credentials=_admin(), ssl_context=client_context(str(s.ca))) as p:
            for start in range(0, MESSAGES, 100):
                assert p.send_batch([Message(TOPIC, f"m-{i}".encode()) for i in range(start, start + 100)]) \
                    .status.name == "SEND_OK"
        yield s


def _admin():
    from rocketq.client.model import Credentials
    return Credentials(ADMIN, ADMIN_SECRET)


def _options(s, secret=ADMIN_SECRET, **extra) -> dict:
    return {"namesrv": s.namesrv, "accessKey": ADMIN, "secretKey": secret, "tlsCaFile": str(s.ca), **extra}


def _shown(spark, *frames) -> list[str]:
    """Everything Spark shows about the queries run so far: plans, the SQL UI's executions, the conf."""
    texts = [df._jdf.queryExecution().toString() for df in frames]
    store = spark._jsparkSession.sharedState().statusStore()
    executions = store.executionsList()
    for i in range(executions.size()):
        e = executions.apply(i)
        texts += [e.description(), e.details(), e.physicalPlanDescription()]
    texts += [f"{k}={v}" for k, v in spark.sparkContext.getConf().getAll()]
    return texts


def test_reads_the_sink_and_a_stream_work_and_spark_shows_no_secret(spark, secured, tmp_path, caplog, capsys):
    caplog.set_level(logging.DEBUG, logger="rocketq")      # py4j's own DEBUG log shows every option it sends
    df = spark.read.format("rocketq").options(**_options(secured, topics=TOPIC)).load()
    assert df.count() == MESSAGES                            # planned on the driver, pulled by executors
    df.explain(True)

    out = spark.range(50).select(F.concat(F.lit("s-"), F.col("id").cast("string")).cast("binary").alias("body"))
    out.write.format("rocketq").options(**_options(secured, topic=OUT)).mode("append").save()
    back = spark.read.format("rocketq").options(**_options(secured, topics=OUT)).load()
    assert sorted(r.body for r in back.collect()) == sorted(f"s-{i}".encode() for i in range(50))

    stream = spark.readStream.format("rocketq").options(**_options(secured, topics=TOPIC,
                                                                   startingOffsets="earliest")).load()
    query = (stream.select("body").writeStream.format("rocketq").options(**_options(secured, topic=STREAM_OUT))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination(180)
    assert query.exception() is None
    progress = [p.json() for p in query._jsq.recentProgress()]
    query.explain(True)
    copied = spark.read.format("rocketq").options(**_options(secured, topics=STREAM_OUT)).load().count()
    assert copied == MESSAGES and sum(json.loads(p)["numInputRows"] for p in progress) == MESSAGES

    printed = capsys.readouterr()
    assert "BatchScan rocketq" in printed.out                 # the explain output really was captured
    assert_no_secret(*_shown(spark, df, back), *progress, printed.out, printed.err, caplog.text)


@pytest.mark.parametrize("options, says", [
    (dict(secret=WRONG_SECRET), [f"does not match for AccessKey '{ADMIN}'",
                                  "the secret key is wrong for this access key (it came from secretKey)"]),
    (dict(accessKey=None, secretKey=None), ["carries no AccessKey", "give accessKey and secretKey, set "
                                                                     "ROCKETQ_ACCESS_KEY and ROCKETQ_SECRET_KEY"]),
    (dict(tlsCaFile=None), ["if the server requires TLS, add tls (and tlsCaFile with its CA)"]),
    (dict(secretKey=None), ["an access key (from accessKey) but no secret key: set secretKey, ROCKETQ_SECRET_KEY"]),
], ids=["wrong secret", "no credentials", "no tls", "half"])
def test_refusals_name_what_to_set_for_reads_and_the_sink(spark, secured, options, says):
    given = _options(secured, **{k: v for k, v in options.items() if k == "secret"})
    given.update({k: v for k, v in options.items() if k != "secret"})
    given = {k: v for k, v in given.items() if v is not None}
    with pytest.raises(Exception) as read_error:
        spark.read.format("rocketq").options(topics=TOPIC, **given).load().count()
    with pytest.raises(Exception) as write_error:
        spark.range(3).select(F.lit(b"x").alias("body")).write.format("rocketq") \
            .options(topic=OUT, **given).mode("append").save()
    for error in (read_error, write_error):
        assert all(s in str(error.value) for s in says), str(error.value)[-3000:]
        assert_no_secret(str(error.value))


def test_a_profile_read_by_every_process_keeps_the_secret_out_of_the_options(spark, secured):
    path = Path(os.environ["ROCKETQ_CLIENT_CONFIG"])
    path.write_text(f'[profiles.sparksec]\nnamesrv = "{secured.namesrv}"\naccess_key = "{ADMIN}"\n'
                    f'secret_key = "{ADMIN_SECRET}"\nca_file = "{secured.ca}"\n')
    path.chmod(0o600)
    try:
        df = spark.read.format("rocketq").option("profile", "sparksec").option("topics", TOPIC).load()
        assert df.count() == MESSAGES                 # executors found the secret in the file themselves
        assert_no_secret(*_shown(spark, df))
        path.chmod(0o644)
        with pytest.raises(Exception, match=f"chmod 600 {path}"):
            spark.read.format("rocketq").option("profile", "sparksec").option("topics", TOPIC).load().count()
    finally:
        path.unlink()


def test_rocketq_spark_stats_passes_the_cli_credentials_on(spark, secured, tmp_path):
    env = {name: None for name in CLIENT_ENV_VARS} | {"XDG_CONFIG_HOME": str(tmp_path),
                                                       "ROCKETQ_ACCESS_KEY": ADMIN, "ROCKETQ_SECRET_KEY": ADMIN_SECRET}
    r = CliRunner(env=env).invoke(cli, ["spark", "stats", "--namesrv", secured.namesrv, "--topics", TOPIC,
                                        "--ca-file", str(secured.ca), "--json"])
    assert r.exit_code == 0, r.output
    assert sum(json.loads(line)["messages"] for line in r.stdout.splitlines()) == MESSAGES
    assert_no_secret(r.stdout, r.stderr)
