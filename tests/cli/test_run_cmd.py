"""``rocketq run``: the demo job writes, reads back, looks up and closes the store cleanly."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import SMALL
from rocketq.store import MessageStore, StoreConfig

STOP_TIMEOUT_S = 120


def test_run_writes_reads_and_closes_cleanly(invoke, tmp_path):
    store = tmp_path / "s"
    res = invoke("run", "--store-path", store, "--count", 1000)
    assert res.exit_code == 0, res.output
    assert "1,000 messages" in res.stdout and "every key and body as written" in res.stdout
    assert "found" in res.stdout and "store closed cleanly" in res.stdout
    assert not (store / "abort").exists()


def test_run_json_summary_and_a_second_run_on_the_same_store(invoke, tmp_path):
    store = tmp_path / "s"
    first = json.loads(invoke("run", "--store-path", store, "--count", 300, "--json").stdout)
    res = invoke("run", "--store-path", store, "--count", 200, "--json")
    assert res.exit_code == 0, res.output
    second = json.loads(res.stdout)
    for summary, n in ((first, 300), (second, 200)):
        assert summary["written"] == summary["read"] == n and summary["verified"] and not summary["problems"]
        assert summary["query_found"] == 1 and summary["view_by_id"] and summary["closed_cleanly"]
    assert second["log_end_at_start"] > 0 and sum(second["queue_max_offsets"].values()) == 500


def test_run_stops_at_seconds_when_count_is_not_reached(invoke, tmp_path):
    res = invoke("run", "--store-path", tmp_path / "s", "--seconds", "0.2", "--json")
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert summary["written"] == summary["read"] and summary["written"] % 64 == 0


def test_store_profile_is_the_option_and_profile_its_old_name(invoke, tmp_path):
    res = invoke("run", "--store-path", tmp_path / "new", "--store-profile", "small", "--count", 64, "--json")
    assert res.exit_code == 0 and res.stderr == "", res.output
    res = invoke("run", "--store-path", tmp_path / "old", "--profile", "small", "--count", 64, "--json")
    assert res.exit_code == 0, res.output             # issue 21's spelling still works, with a note
    assert "--profile small is now --store-profile small" in res.stderr
    res = invoke("run", "--store-path", tmp_path / "x", "--profile", "small", "--store-profile", "default")
    assert res.exit_code == 2 and "disagree" in res.stderr


def test_run_opens_an_existing_store_with_its_own_segment_size(invoke, tmp_path):
    store = tmp_path / "small"
    MessageStore(StoreConfig(store_path=store, **SMALL)).start().shutdown()
    res = invoke("run", "--store-path", store, "--count", 2000)
    assert res.exit_code == 0, res.output
    assert invoke("store", "verify", store).exit_code == 0


def test_run_refuses_a_directory_that_is_not_a_store(invoke, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    res = invoke("run", "--store-path", tmp_path, "--count", 10)
    assert res.exit_code == 1
    assert res.stderr.startswith("rocketq: error:") and "not a store" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_run_stops_cleanly_on_ctrl_c_or_sigterm(tmp_path, sig):
    store = tmp_path / "s"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "run", "--store-path", str(store),
                             "--seconds", "600", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        # interrupt mid-write: the first dispatched batch has created the topic's consume queue
        _wait_for(lambda: (store / "consumequeue" / "DemoTopic").exists() or proc.poll() is not None)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=STOP_TIMEOUT_S)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    summary = json.loads(stdout)
    assert summary["interrupted_by"] == sig.name and summary["closed_cleanly"] and not summary["problems"]
    assert not (store / "abort").exists()
    assert summary["written"] > 0 and summary["written"] == sum(summary["queue_max_offsets"].values())


def _wait_for(condition, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Poll a condition (not a timing assumption): the deadline only guards against a hang."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)
