"""``rocketq bench grpc --java`` at smoke size: Apache RocketMQ's Java clients of both protocols against
one real ``rocketq serve`` per gRPC transport (grpcio and native, ``--transport both``); every row of
each transport's report moved messages. Skipped, saying why, without
java and mvn (the Maven build is cached under compat/.build, shared with tests/compat)."""

import json

import pytest

from rocketq.bench.java_bench import GRPC, REMOTING, SCENARIOS
from rocketq.bench.java_clients import missing_java

N = 40


@pytest.mark.skipif(missing_java() is not None, reason=str(missing_java()))
def test_bench_grpc_java_smoke(invoke, tmp_path):
    res = invoke("bench", "grpc", "--java", "--runs", "1", "--count", N, "--transport", "both",
                 "--json", tmp_path / "j.json")
    assert res.exit_code == 0, res.output
    both = json.loads((tmp_path / "j.json").read_text())
    assert set(both["by_transport"]) == {"grpcio", "native"}
    for transport, report in both["by_transport"].items():
        _check(report)
        assert f"gRPC transport {transport}" in res.stdout
    assert "gRPC / remoting" in res.stdout


def _check(report: dict) -> None:
    assert report["clients"] == [GRPC, REMOTING]
    assert set(report["rows"]) == set(report["ratios"]) == set(SCENARIOS)
    stored = 2 * (N + 1)                          # both send scenarios, each with one untimed send first
    expected = {SCENARIOS[0]: N, SCENARIOS[1]: N, SCENARIOS[2]: stored, SCENARIOS[3]: stored - 1}
    for scenario, by_client in report["rows"].items():
        for client in (GRPC, REMOTING):
            cell = by_client[client]
            assert cell["messages"] == expected[scenario], (scenario, client, cell)
            assert cell["msgs_per_s"][0] > 0, (scenario, client, cell)
            # CPU is counted in clock ticks (10 ms): a smoke-sized scenario may cost less than one
            assert cell["server_cpu_us_per_msg"] >= 0 and cell["client_cpu_us_per_msg"] >= 0, (scenario, client, cell)
        assert report["ratios"][scenario] > 0
    for scenario in SCENARIOS[:3]:                # sends and receive + ack report latencies
        assert all(0 < by_client[c]["p50_ms"] <= by_client[c]["p99_ms"] for c in (GRPC, REMOTING)
                   for by_client in [report["rows"][scenario]])
    (run,) = report["runs"]
    for scenario in SCENARIOS[2:]:                # each consumer saw every stored message at least once
        assert all(run[scenario][c]["deliveries"] >= expected[scenario] for c in (GRPC, REMOTING))


def test_bench_grpc_java_without_java_says_what_is_missing(invoke, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    res = invoke("bench", "grpc", "--java", "--runs", "1", "--count", N)
    assert res.exit_code == 1
    assert "java and mvn not on PATH" in res.stderr and "openjdk-17-jdk-headless" in res.stderr


def test_bench_grpc_server_apache_is_for_the_java_clients_and_has_no_transport_choice(invoke):
    res = invoke("bench", "grpc", "--server", "apache", "--runs", "1", "--count", N)
    assert res.exit_code == 2 and "--server applies to --java" in res.output
    res = invoke("bench", "grpc", "--java", "--server", "apache", "--transport", "both", "--runs", "1", "--count", N)
    assert res.exit_code == 2 and "Apache RocketMQ serves gRPC from its proxy" in res.output


def test_the_apache_server_waits_in_its_send_queue_as_the_rocketq_runs_do(tmp_path):
    from rocketq.bench.java_bench import APACHE_SEND_QUEUE_WAIT_MS, ApacheServer
    server = ApacheServer(tmp_path / "apache")          # not started: what it would start with
    assert server.system.broker_settings == {"waitTimeMillsInSendQueue": str(APACHE_SEND_QUEUE_WAIT_MS)}
