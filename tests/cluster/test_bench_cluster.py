"""``rocketq bench cluster``: one small run over one and two groups, and its input checks."""

import json
import os
import subprocess
import sys

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


def _bench(*args):
    return subprocess.run([sys.executable, "-m", "rocketq.cli.main", "bench", "cluster", *args],
                          capture_output=True, text=True, env=ENV, timeout=240)


def test_one_small_run_over_one_and_two_groups(tmp_path):
    r = _bench("--runs", "1", "--count", "1000", "--groups", "1,2", "--json", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert set(report["groups"]) == {"1", "2"}
    for g in report["groups"].values():
        lo, mid, hi = g["msgs_per_s"]
        assert 0 < lo == mid == hi and g["broker_cpu_us_per_msg"][0] > 0 and g["client_cpu_us_per_msg"][0] > 0
    assert "load average" in r.stdout


def test_bad_group_counts_are_refused_by_name():
    r = _bench("--groups", "1,x")
    assert r.returncode != 0 and "--groups" in r.stderr
