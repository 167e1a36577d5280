"""`rocketq bench broker` end to end at smoke size: every scenario runs against a real server."""

import json


def test_bench_broker_quick(invoke, tmp_path):
    res = invoke("bench", "broker", "--quick", "--runs", "1", "--backlog", "2000", "--json", tmp_path / "b.json")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "b.json").read_text())
    by_name = {s["name"]: s for s in report["scenarios"]}
    assert len(by_name) == 8
    assert all(s["msgs_per_s"] and s["msgs_per_s"][0] > 0 for s in by_name.values())
    assert "drain 1KiB backlog" in res.output


def test_bench_replication_smoke(invoke, tmp_path):
    res = invoke("bench", "replication", "--runs", "1", "--count", "1000", "--json", tmp_path / "r.json")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert all(v["msgs_per_s"][0] > 0 for v in report["produce_1KiB_64_senders"].values())
    assert report["failover_read_from_slave_s"][0] > 0 and report["failover_send_to_other_master_s"][0] > 0


def test_bench_grpc_smoke(invoke, tmp_path):
    res = invoke("bench", "grpc", "--runs", "1", "--count", "50", "--json", tmp_path / "g.json")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "g.json").read_text())
    assert all(v > 0 for v in report["ratios"].values())
