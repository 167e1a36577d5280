"""Apache RocketMQ and Apache Kafka in `bench compare`: the load tools' outputs are parsed from golden
copies of real runs (tests/bench/golden/), and the servers' configuration and command lines are built
as their own scripts would. The real runs are the benchmark (`rocketq bench compare`), not tests."""

import json
from pathlib import Path

import pytest

from rocketq.bench.compare import apache_grpc, jars, kafka, kafka_tools, rmq_tools
from rocketq.bench.compare import apache_rocketmq as arm

GOLDEN = Path(__file__).parent / "golden"


def _golden(name: str) -> str:
    return (GOLDEN / name).read_text()


def test_kafka_producer_perf_takes_the_final_summary_not_the_progress_lines():
    out = kafka_tools.parse_producer(_golden("kafka_producer_perf_4.4.0.txt"))
    assert out["records"] == 200_000
    assert out["rate"] == pytest.approx(15687.504902)
    assert (out["p50"], out["p99"], out["p999"]) == (1219, 3332, 3409)


def test_kafka_consumer_perf_reads_the_csv_under_its_header():
    out = kafka_tools.parse_consumer(_golden("kafka_consumer_perf_4.4.0.txt"))
    assert out["data.consumed.in.nMsg"] == 200_000
    assert out["fetch.nMsg.sec"] == pytest.approx(83752.0938)
    assert out["nMsg.sec"] == pytest.approx(40306.3281)


@pytest.mark.parametrize("parse", [kafka_tools.parse_producer, kafka_tools.parse_consumer, rmq_tools.parse_complete])
def test_an_output_without_results_is_an_error_that_quotes_it(parse):
    with pytest.raises(ValueError, match="Exception in thread main"):
        parse("Exception in thread main java.net.ConnectException\n")


def test_rmq_benchmark_producer_summary():
    out = rmq_tools.parse_complete(_golden("rmq_benchmark_producer.txt"))
    assert out["Mode"] == "producer" and out["Threads"] == 64 and out["Size"] == 1024
    for key in ("Send TPS", "p50 RT(ms)", "p99 RT(ms)", "Send Total", "Send Failed"):
        assert isinstance(out[key], float), key
    assert out["p99 RT(ms)"] >= out["p50 RT(ms)"] > 0
    assert out["Measured"] <= out["Send Total"]


def test_rmq_benchmark_batch_and_consumer_summaries():
    batch = rmq_tools.parse_complete(_golden("rmq_benchmark_batch.txt"))
    assert batch["Mode"] == "batch" and batch["Batch"] == 16 and batch["Send TPS"] > 0
    consumer = rmq_tools.parse_complete(_golden("rmq_benchmark_consumer.txt"))
    assert consumer["Mode"] == "consumer" and consumer["Consume Total"] == consumer["Expected"]
    assert consumer["Consume TPS"] > 0


def test_rmq_tool_rows_come_from_the_summary():
    rows = rmq_tools.producer_rows("rmq_producer", rmq_tools.parse_complete(_golden("rmq_benchmark_producer.txt")))
    assert [(s, m) for s, m, _ in rows] == [("rmq_producer", "msgs/s"), ("rmq_producer", "p50 ms"),
                                            ("rmq_producer", "p99 ms"), ("rmq_producer", "failed")]


def test_rmq_tool_takes_rocketmqs_flags():
    cmd = rmq_tools.tool_command("CP", "batch", "127.0.0.1:9876", "T", size=1024, seconds=20, warmup_s=3)
    args = cmd[cmd.index(rmq_tools.MAIN) + 1:]
    assert args[0] == "batch"
    flags = dict(zip(args[1::2], args[2::2]))
    assert flags == {"-n": "127.0.0.1:9876", "-t": "T", "-w": "64", "-s": "1024", "-k": "false", "-d": "20",
                     "-W": "3", "-b": "16"}
    consumer = rmq_tools.tool_command("CP", "consumer", "ns", "T", expect=500)
    flags = dict(zip(consumer[consumer.index(rmq_tools.MAIN) + 2::2], consumer[consumer.index(rmq_tools.MAIN) + 3::2]))
    assert flags["-w"] == "20" and flags["-x"] == "500"


def test_broker_conf_binds_loopback_and_sets_the_flush_mode(tmp_path):
    conf = dict(line.split("=", 1) for line in arm.broker_conf(tmp_path, 9876, 30911, sync=True).splitlines())
    assert conf["flushDiskType"] == "SYNC_FLUSH"
    assert conf["bindAddress"] == "127.0.0.1" and conf["brokerIP1"] == "127.0.0.1"
    assert conf["namesrvAddr"] == "127.0.0.1:9876" and conf["listenPort"] == "30911"
    assert conf["haListenPort"] == "30912"
    assert conf["storePathRootDir"].startswith(str(tmp_path))
    assert "ASYNC_FLUSH" in arm.broker_conf(tmp_path, 9876, 30911, sync=False)
    assert "bindAddress=127.0.0.1" in arm.namesrv_conf(9876)
    more = arm.broker_conf(tmp_path, 9876, 30911, sync=False, more={"waitTimeMillsInSendQueue": "2000"})
    assert "waitTimeMillsInSendQueue=2000" in more.splitlines()


def test_rocketmq_jvm_flags_fit_the_machine_and_jdk17():
    cmd = arm.command("CP", arm.BROKER_MAIN, arm.BROKER_JVM, Path("/r"), Path("/r/broker.conf"))
    assert "-Xmx1g" in cmd and "-XX:+UseG1GC" in cmd
    assert not any("UseBiasedLocking" in a or "java.ext.dirs" in a for a in cmd)      # JDK 17 refuses them
    assert cmd[-3:] == [arm.BROKER_MAIN, "-c", "/r/broker.conf"]
    assert "-Duser.home=/r" in cmd                                                   # logs stay in the run's dir


def test_proxy_runs_in_local_mode_with_the_brokers_conf_and_jvm(tmp_path):
    cmd = apache_grpc.proxy_command("CP", tmp_path, tmp_path / "broker.conf", tmp_path / "p.json", "127.0.0.1:9876")
    main = cmd.index(apache_grpc.PROXY_MAIN)
    flags = dict(zip(cmd[main + 1::2], cmd[main + 2::2]))
    assert flags == {"-pm": "local", "-bc": str(tmp_path / "broker.conf"), "-pc": str(tmp_path / "p.json"),
                     "-n": "127.0.0.1:9876"}
    assert cmd[1:main - 2] == [*arm.BROKER_JVM, f"-Duser.home={tmp_path}", f"-Drocketmq.home.dir={tmp_path}"]


def test_proxy_conf_names_the_brokers_cluster_and_its_ports():
    conf = json.loads(apache_grpc.proxy_json(18081, 18080))
    assert conf["rocketMQClusterName"] == arm.CLUSTER and conf["proxyMode"] == "LOCAL"
    assert (conf["grpcServerPort"], conf["remotingListenPort"]) == (18081, 18080)
    assert conf["localServeAddr"] == "127.0.0.1"
    assert conf["grpcClientConsumerMinLongPollingTimeoutMillis"] <= 500     # the Java bench's await


def test_the_proxys_ports_avoid_the_brokers():
    taken = {arm.free_port() for _ in range(5)}
    ports = apache_grpc.free_ports(2, taken)
    assert len(set(ports)) == 2 and not set(ports) & taken


def test_keyed_producer_takes_rocketmqs_flag():
    cmd = rmq_tools.tool_command("CP", "producer", "ns", "TK", keys=True)
    assert cmd[cmd.index("-k") + 1] == "true"


def test_broker_port_leaves_room_for_its_neighbours():
    port = arm.broker_port()
    assert arm._port_free(port - 2) and arm._port_free(port + 1)


def test_kafka_properties_one_kraft_node_on_loopback(tmp_path):
    props = dict(line.split("=", 1) for line in kafka.server_properties(tmp_path, 9092, 9093, sync=False).splitlines())
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["offsets.topic.replication.factor"] == "1"
    assert "log.flush.interval.messages" not in props                                 # Kafka's default durability
    sync = kafka.server_properties(tmp_path, 9092, 9093, sync=True)
    assert "log.flush.interval.messages=1\n" in sync


def test_kafka_format_passes_a_cluster_id_that_may_start_with_a_dash():
    cmd = kafka.format_command("CP", Path("/r/server.properties"), "-abc")
    assert "--cluster-id=-abc" in cmd and "kafka.tools.StorageTool" in cmd
    cid = kafka.cluster_id()
    assert len(cid) == 22 and "=" not in cid


def test_kafka_perf_commands():
    cmd = kafka_tools.producer_command("CP", "127.0.0.1:9092", "t", 1000, 128)
    assert cmd[cmd.index("--record-size") + 1] == "128" and cmd[cmd.index("--throughput") + 1] == "-1"
    assert "bootstrap.servers=127.0.0.1:9092" in cmd
    cmd = kafka_tools.consumer_command("CP", "127.0.0.1:9092", "t", 1000, "g")
    assert cmd[cmd.index("--num-records") + 1] == "1000" and cmd[cmd.index("--group") + 1] == "g"


def test_maven_build_goes_to_a_cache_outside_the_tree(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert jars.cache_root() == tmp_path / "rocketq" / "bench-java"
    cmd = jars.build_command(jars.PROJECTS / "kafka", tmp_path / "out")
    assert f"-Dpeer.build.dir={tmp_path / 'out'}" in cmd and "dependency:build-classpath" in cmd
    assert jars._tree_hash(jars.PROJECTS / "rocketmq") != jars._tree_hash(jars.PROJECTS / "kafka")


def test_a_peer_that_cannot_run_says_why():
    why = jars.missing_java("nope")
    assert why and ("java/nope" in why or "not on PATH" in why)


def test_report_has_the_tool_rows_versions_and_failed_tool_runs(tmp_path):
    from rocketq.bench.compare.report import write_report
    systems = ["rocketq (remoting)", "Apache RocketMQ (remoting)", "Apache Kafka"]
    cells = [{"system": s, "size": 1024, "scenario": sc, "metric": "msgs/s", "min_median_max": [1.0, v, 3.0]}
             for s, sc, v in (("rocketq (remoting)", "rmq_producer", 900.0), ("Apache RocketMQ (remoting)",
                                                                               "rmq_producer", 1000.0),
                              ("rocketq (remoting)", "fast", 5.0), ("Apache RocketMQ (remoting)", "fast", 4.0),
                              ("Apache Kafka", "fast", 8.0), ("Apache Kafka", "kafka_producer_perf", 7.0),
                              ("rocketq (remoting)", "rmq_producer_keys", 800.0),
                              ("Apache RocketMQ (remoting)", "rmq_producer_keys", 1000.0))]
    write_report({"machine": {"cpus": 2}, "runs": 1, "skipped": {}, "systems": systems,
                  "durability": {s: {"async": "a", "sync": None} for s in systems}, "settings": {"e2e_rate": 1, "verify_n": 300},
                  "versions": {"Apache RocketMQ (remoting)": "5.3.3", "Apache Kafka": "4.4.0"},
                  "failures": ["Apache Kafka, 128 B, sync: ProducerPerformance failed"],
                  "cells": cells, "latency_samples_ms": {}}, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "Apache RocketMQ (remoting) 5.3.3; Apache Kafka 4.4.0" in report
    assert "ProducerPerformance failed" in report
    producer = report.split("Producer, 64 threads, one message per sync send")[1].split("##")[0]
    assert "| 1024 B | msgs/s | 1 / 900 / 3 | 1 / 1,000 / 3 | 0.90 (remoting) |" in producer
    assert "kafka-producer-perf-test" in report
    keyed = report.split("Producer with keys on (-k true: the broker indexes every message)")[1].split("##")[0]
    assert "| 1024 B | msgs/s | 1 / 800 / 3 | 1 / 1,000 / 3 | 0.80 (remoting) |" in keyed
    assert (tmp_path / "throughput.png").stat().st_size > 0


def test_only_selects_systems_by_a_word_of_their_name():
    from rocketq.bench.compare.runner import _unselected
    assert _unselected("Apache Kafka", ()) is None
    assert _unselected("Apache Kafka", ("kafka",)) is None
    assert "--only rocketq" in _unselected("Apache Kafka", ("rocketq",))
    assert _unselected("Apache RocketMQ (remoting)", ("rocketq",)) is not None      # "RocketMQ" is not "rocketq"


def test_a_consumer_that_read_nothing_is_a_failed_run_and_the_producers_rows_stay(tmp_path, monkeypatch):
    """A push consumer that never got its first message used to be reported as 0 msgs/s - a figure, which
    the median then took as the system's rate (2 of 3 runs at 128 B on 2026-11-26)."""
    from rocketq.bench.compare.runner import Cells, Plan, _tool_rows
    producer = rmq_tools.parse_complete(_golden("rmq_benchmark_producer.txt"))
    stalled = dict(rmq_tools.parse_complete(_golden("rmq_benchmark_consumer.txt")), **{"Consume Total": 0.0})
    reports = iter([producer, producer, stalled])
    monkeypatch.setattr(jars, "build", lambda name: "CP")
    monkeypatch.setattr(rmq_tools, "_create_topic", lambda namesrv, topic: _nothing())
    monkeypatch.setattr(rmq_tools, "run_tool", lambda cmd, timeout: next(reports))

    class System:
        name = "rocketq (remoting)"

        def tool_rows(self, size, plan, sync):
            return rmq_tools.tool_rows("ns", tmp_path, size, seconds=1, warmup_s=0, sync=sync)

    cells = Cells()
    _tool_rows(System(), 128, Plan(), cells, sync=False)
    assert len(cells.errors) == 1 and "read none of the" in cells.errors[0]
    scenarios = {c["scenario"] for c in cells.to_list()}
    assert scenarios == {"rmq_producer", "rmq_batch"}


async def _nothing():
    return None


def test_tools_only_runs_the_load_tools_and_nothing_else():
    from rocketq.bench.compare.runner import Cells, Plan, _timed_async, _timed_sync
    called = []

    class System:
        name = "rocketq (remoting)"

        def tool_rows(self, size, plan, sync):
            called.append(("tools", sync))
            return [("rmq_producer", "msgs/s", 1.0)]

        def __getattr__(self, attr):                   # any client scenario would land here
            raise AssertionError(f"tools_only ran {attr}")

    cells = Cells()
    _timed_async(System(), 128, Plan(tools_only=True), cells)
    _timed_sync(System(), 128, Plan(tools_only=True), cells)
    assert called == [("tools", False), ("tools", True)]
    assert {c["scenario"] for c in cells.to_list()} == {"rmq_producer"}
