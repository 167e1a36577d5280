"""`rocketq bench compare --quick`: runs rocketq (both protocols) and whichever peers are installed,
checks every durability mode by counting sync calls (or says why it could not), writes the report."""

import json

from rocketq.bench import official_client


def test_compare_quick_writes_report_json_and_charts(invoke, tmp_path):
    out = tmp_path / "cmp"
    # the peers from the OS; the Java peers (Apache RocketMQ, Kafka: ~30 s per JVM start here) and the JVM load
    # tools are left to the benchmark itself, their parts tested in tests/bench/test_compare_java_peers.py
    only = [w for name in ("rocketq", "redis", "nats", "rabbitmq") for w in ("--only", name)]
    res = invoke("bench", "compare", "--quick", "--runs", "1", *only, "--no-tools", "--out", out)
    assert res.exit_code == 0, res.output
    results = json.loads((out / "results.json").read_text())
    systems = {c["system"] for c in results["cells"]}
    assert "rocketq (remoting)" in systems
    assert "not selected" in results["skipped"].get("Apache Kafka", "not selected")
    assert not any(c["scenario"].startswith("rmq_") for c in results["cells"])
    if official_client.available() is None:
        assert "rocketq (gRPC)" in systems
        assert {("rocketq (gRPC)", "sync64")} <= {(c["system"], c["scenario"]) for c in results["cells"]}
    for name in results["systems"]:                    # every mode of every system run: measured or why not
        for mode, check in results["durability_check"][name].items():
            assert "syncs_per_ack" in check or check["not_measured"], (name, mode, check)
    sync_check = results["durability_check"]["rocketq (remoting)"]["sync"]
    assert sync_check.get("syncs_every_ack", True), "SYNC_FLUSH acknowledged sends without a sync each"
    report = (out / "report.md").read_text()
    assert "rocketq / best peer" in report and "Durability per system" in report
    assert "sync calls per ack (measured)" in report
    assert (out / "throughput.png").stat().st_size > 1000 and (out / "latency_cdf.png").stat().st_size > 1000
