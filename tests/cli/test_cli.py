"""The command line, run in-process against real stores."""

import json

import pytest
from click.testing import CliRunner

from rocketq.cli.main import cli
from rocketq.store import Message, MessageStore, StoreConfig


@pytest.fixture
def small_store(tmp_path):
    path = tmp_path / "store"
    cfg = StoreConfig(store_path=path, commitlog_file_size=64 * 1024, consume_queue_entries=100,
                      index_slots=101, index_max_entries=400)
    with MessageStore(cfg) as s:
        results = [s.put_message(Message(topic="T", body=b"body-%d" % i, tags="A", keys=[f"k{i}"])) for i in range(30)]
    return path, results


def test_run_writes_reads_and_closes_cleanly(tmp_path):
    out = CliRunner().invoke(cli, ["run", "--store-path", str(tmp_path / "s"), "--count", "1000"])
    assert out.exit_code == 0, out.output
    assert "found" in out.output and "closed cleanly" in out.output
    assert not (tmp_path / "s" / "abort").exists()


def test_verify_good_store(small_store):
    path, _ = small_store
    out = CliRunner().invoke(cli, ["store", "verify", str(path)])
    assert out.exit_code == 0, out.output
    assert "30 records" in out.output and "OK" in out.output


def test_verify_reports_a_flipped_byte_with_file_and_offset(small_store):
    path, results = small_store
    victim = results[7]
    seg = path / "commitlog" / "00000000000000000000"
    data = bytearray(seg.read_bytes())
    data[victim.physical_offset + 90] ^= 0xFF
    seg.write_bytes(bytes(data))
    out = CliRunner().invoke(cli, ["store", "verify", str(path), "--json"])
    assert out.exit_code == 1
    report = json.loads(out.output)
    assert not report["ok"] and f"commitlog offset {victim.physical_offset}" in report["problems"][0]
    assert "00000000000000000000" in report["problems"][0]


def test_dump_prints_json_lines(small_store):
    path, results = small_store
    out = CliRunner().invoke(cli, ["store", "dump", str(path)])
    assert out.exit_code == 0
    lines = [json.loads(line) for line in out.output.splitlines()]
    assert [r["body"] for r in lines] == ["body-%d" % i for i in range(30)]
    assert lines[3]["msg_id"] == results[3].msg_id and lines[3]["properties"]["KEYS"] == "k3"


def test_rebuild_and_repair(small_store):
    path, results = small_store
    out = CliRunner().invoke(cli, ["store", "rebuild", str(path)])
    assert out.exit_code == 0 and "from 30 records" in out.output
    cut = results[20].physical_offset
    out = CliRunner().invoke(cli, ["store", "repair", str(path), "--truncate-at", str(cut)], input="n\n")
    assert out.exit_code != 0                                     # declined: nothing changes
    out = CliRunner().invoke(cli, ["store", "repair", str(path), "--truncate-at", str(cut), "--yes"])
    assert out.exit_code == 0, out.output
    assert "from 20 records" in out.output
    assert CliRunner().invoke(cli, ["store", "verify", str(path)]).exit_code == 0


def test_errors_are_one_line(tmp_path):
    (tmp_path / "x").write_text("not a store")
    out = CliRunner().invoke(cli, ["store", "verify", str(tmp_path)])
    assert out.exit_code == 1
    assert out.output.strip().startswith("rocketq: error:") and "not a store" in out.output
    assert len(out.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_bench_store_quick_smoke(tmp_path):
    out = CliRunner().invoke(cli, ["bench", "store", "--quick", "--runs", "1", "--dir", str(tmp_path),
                                   "--json", str(tmp_path / "r.json")])
    assert out.exit_code == 0, out.output
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    assert len(results) == 6 and all(r["values"][0] > 0 for r in results)


def test_broker_command_serves_and_stops_cleanly_on_sigterm(tmp_path):
    import os
    import signal
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "broker", "--store-path", str(tmp_path / "s"),
                             "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert "listening on 127.0.0.1:%d" % port in proc.stdout.readline()
        assert (tmp_path / "s" / "abort").exists()
        proc.send_signal(signal.SIGTERM)
        assert "stopped cleanly" in proc.stdout.read()
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    assert not (tmp_path / "s" / "abort").exists()
