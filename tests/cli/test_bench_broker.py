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
