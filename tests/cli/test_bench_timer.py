"""`rocketq bench timer` end to end at smoke size: a real server delivers every scheduled message once."""

import json

import pytest


@pytest.mark.parametrize("via, count", [("remoting", 500), ("grpc", 200)])
def test_bench_timer_smoke(invoke, tmp_path, via, count):
    res = invoke("bench", "timer", "--count", count, "--window", "3", "--lead", "2", "--via", via,
                 "--json", tmp_path / "t.json")
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "t.json").read_text())
    assert report["via"] == via and report["scheduled"] == count
    assert report["delivered"] == count and report["missing"] == 0 and report["duplicates"] == 0
    assert report["foreign_messages"] == 0
    assert report["memory_mib"]["peak_rss"] > 0
    assert "delivered" in res.output and via in res.output
