"""The server commands as an operator meets them (issue 21): one environment for servers and client
commands, the store size profiles, the demo's own store, and the log (INFO events, JSON, rotation)."""

import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path

from rocketq.cli.log_setup import configure
from rocketq.cli.serve_cmd import load_config

# without the small sizes tests/conftest.py sets for every server through ROCKETQ_<key> variables
# (they would win over the store profile): the servers here run with --store-profile small
ENV = {k: v for k, v in os.environ.items() if not k.startswith("ROCKETQ_")}
ENV["PYTHONPATH"] = os.pathsep.join(sys.path)
BOOT_S = 60
SMALL_SEGMENT = 64 << 20


def spawn(args, pattern, *, env=ENV, stderr=subprocess.DEVNULL):
    """``rocketq ARGS`` as a process; waits for its first stdout line to match *pattern*."""
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", *args], stdout=subprocess.PIPE, stderr=stderr,
                            text=True, env=env)
    ready, _, _ = select.select([proc.stdout], [], [], BOOT_S)
    line = proc.stdout.readline() if ready else ""
    match = re.search(pattern, line)
    if not match:
        proc.kill()
        raise AssertionError(f"rocketq {args[0]} did not start: {line!r}")
    return proc, match


def stop(proc) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=BOOT_S) == 0
    finally:
        proc.kill()


def cli(*args, env=ENV) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocketq.cli.main", *args], capture_output=True, text=True, env=env,
                          timeout=BOOT_S)


def test_broker_registers_with_rocketq_namesrv_from_the_environment(tmp_path):
    namesrv, m = spawn(["namesrv", "--host", "127.0.0.1", "--port", "0", "--kv-config", str(tmp_path / "kv.json")],
                       r"listening on [\d.]+:(\d+)")
    env = dict(ENV, ROCKETQ_NAMESRV=f"127.0.0.1:{m.group(1)}")         # what the README has users export
    try:
        # --profile: the store profile's name before issue 23, still accepted by the servers
        broker, _ = spawn(["broker", "--store-path", str(tmp_path / "b"), "--host", "127.0.0.1", "--port", "0",
                           "--profile", "small", "--broker-name", "env-broker"], r"listening on", env=env)
        try:
            out = cli("cluster", "--json", env=env)                   # and the client command reads it too
            assert out.returncode == 0, out.stderr
            assert [row["broker"] for row in json.loads(out.stdout)] == ["env-broker"]
        finally:
            stop(broker)
    finally:
        stop(namesrv)


def test_serve_starts_with_the_client_variables_set_and_leaves_them_to_the_client_commands(tmp_path):
    # the variables a user exports for the client commands (issue 23): not server keys, so ignored
    env = dict(ENV, ROCKETQ_NAMESRV="127.0.0.1:1", ROCKETQ_ACCESS_KEY="ak", ROCKETQ_SECRET_KEY="sk-not-for-servers",
               ROCKETQ_PROFILE="prod", ROCKETQ_TLS="true", ROCKETQ_CA_FILE="/nowhere/ca.pem",
               ROCKETQ_CERT_FILE="/nowhere/c.pem", ROCKETQ_KEY_FILE="/nowhere/c.key", ROCKETQ_CLIENT_CONFIG="/nowhere")
    log_file = tmp_path / "serve.log"
    proc, _ = spawn(["serve", "--store-path", str(tmp_path / "s"), "--host", "127.0.0.1", "--port", "0",
                     "--namesrv-port", "0", "--no-grpc", "--store-profile", "small", "--log-file", str(log_file)],
                    r"rocketq serving", env=env)
    stop(proc)
    logged = log_file.read_text()
    assert "127.0.0.1:1" not in logged                 # it registered with its own NameServer only
    assert "sk-not-for-servers" not in logged and "TLS disabled" in logged


def test_a_profile_is_a_layer_below_the_environment_and_flags(monkeypatch, tmp_path):
    for name in [k for k in os.environ if k.startswith("ROCKETQ_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ROCKETQ_MAXINDEXNUM", "12345")
    cfg = load_config(None, tmp_path, None, None, None, None, ("mapedFileSizeCommitLog=8388608",), profile="small")
    assert cfg.store.commitlog_file_size == 8 << 20                 # --set wins
    assert cfg.store.index_max_entries == 12345                     # the environment wins
    assert 100_000 <= cfg.store.index_slots < 100_100 and cfg.store.consume_queue_entries == 30_000   # profile (slots: a prime)
    default = load_config(None, tmp_path, None, None, None, None, ())
    assert default.store.commitlog_file_size == 1 << 30 and default.store.index_slots >= 5_000_000


def test_serve_logs_what_an_operator_needs_as_json_lines(tmp_path):
    log_file = tmp_path / "logs" / "rocketq.log"
    proc, m = spawn(["serve", "--store-path", str(tmp_path / "s"), "--host", "127.0.0.1", "--port", "0",
                     "--namesrv-port", "0", "--no-grpc", "--store-profile", "small", "--log-file", str(log_file),
                     "--log-format", "json"], r"NameServer [\d.]+:(\d+)")
    ns = ("--namesrv", f"127.0.0.1:{m.group(1)}")
    try:
        for args in (("topic", "create", "Logged", "--queues", "2"), ("send", "Logged", "hello"),
                     ("consume", "Logged", "--group", "log-readers", "--from", "first", "--count", "1"),
                     ("topic", "delete", "Logged")):
            out = cli(*args, *ns)
            assert out.returncode == 0, (args, out.stderr)
    finally:
        stop(proc)
    records = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records)
    said = "\n".join(r["message"] for r in records if r["level"] == "INFO")
    for event in (r"effective configuration: cluster DefaultCluster", r"disk: the store allocates 2 CommitLog "
                  r"segments of 64 MiB", r"broker broker-a listening on 127\.0\.0\.1:\d+",
                  r"topic Logged created: 2 read / 2 write queues", r"client \S+ connected from 127\.0\.0\.1",
                  r"client \S+ disconnected", r"consumer group log-readers created", r"topic Logged deleted"):
        assert re.search(event, said), f"no INFO record matching {event!r} in:\n{said}"
    assert not [r for r in records if "hello" in r["message"]]                  # nothing per message
    assert (tmp_path / "s" / "commitlog" / "00000000000000000000").stat().st_size == SMALL_SEGMENT


def test_the_log_file_rotates_by_size(tmp_path):
    path = tmp_path / "r.log"
    log = logging.getLogger("rocketq.test_rotation")
    try:
        configure("INFO", log_file=path, max_bytes=4000, backups=2)
        for i in range(400):
            log.info("record %d of the rotation test, long enough to fill a file in a few dozen records", i)
    finally:
        configure("WARNING")                      # back to what the test session had (stderr only)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["r.log", "r.log.1", "r.log.2"]
    assert all((tmp_path / f).stat().st_size <= 4000 for f in files)
    assert "record 399 " in path.read_text()


def test_run_writes_its_own_store_not_the_servers(tmp_path):
    env = dict(ENV, HOME=str(tmp_path))
    out = cli("run", "--count", "1000", "--json", env=env)
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout)
    demo = tmp_path / "rocketq" / "demo-store"
    assert Path(summary["store_path"]) == demo and summary["verified"]
    assert not (tmp_path / "rocketq" / "store").exists()
    assert (demo / "commitlog" / "00000000000000000000").stat().st_size == SMALL_SEGMENT    # the small profile
