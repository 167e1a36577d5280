"""`rocketq send / consume / topic / group / cluster / message` against a real `rocketq serve` process."""

import json
import os
import re
import select
import signal
import subprocess
import sys

import pytest

BOOT = re.compile(r"NameServer [\d.]+:(\d+), broker")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "serve", "--store-path", str(root / "s"),
                             "--host", "127.0.0.1", "--port", "0", "--namesrv-port", "0", "--no-grpc"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    m = BOOT.search(proc.stdout.readline() if ready else "")
    assert m, "rocketq serve did not start"
    yield f"127.0.0.1:{m.group(1)}"
    proc.send_signal(signal.SIGTERM)
    proc.wait(30)


def test_send_consume_and_lag(invoke, server):
    ns = ("--namesrv", server)
    r = invoke("send", "CliT", "hello world", "--tag", "A", "--key", "k-1", "--property", "color=red", *ns)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("SEND_OK msgId=")
    r = invoke("send", "CliT", "--count", "50", "--size", "64", "--json", *ns)
    assert r.exit_code == 0, r.output
    summary = json.loads(r.stdout)
    assert summary["sent"] == 50 and summary["failed"] == 0 and summary["msgs_per_s"] > 0
    r = invoke("consume", "CliT", "--group", "GID_CLI", "--from", "first", "--count", "51", "--json", *ns)
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(rows) == 51
    first = next(x for x in rows if x["body"] == "hello world")
    assert first["tags"] == "A" and first["keys"] == ["k-1"] and first["properties"]["color"] == "red"
    r = invoke("group", "lag", "GID_CLI", "--json", *ns)
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["total_lag"] == 0
    r = invoke("send", "CliT", "one more", *ns)
    r = invoke("group", "lag", "GID_CLI", *ns)
    assert r.exit_code == 0 and "total" in r.stdout
    r = invoke("consume", "CliT", "--group", "GID_CLI", "--count", "1", *ns)       # resumes where it stopped
    assert r.exit_code == 0 and "one more" in r.stdout
    r = invoke("consume", "CliT", "--group", "GID_CLI", "--idle", "1", *ns)
    assert r.exit_code == 0 and r.stdout == ""


def test_topics_cluster_and_message_queries(invoke, server, tmp_path):
    ns = ("--namesrv", server)
    assert invoke("topic", "create", "Made", "--queues", "2", *ns).exit_code == 0
    r = invoke("topic", "route", "Made", "--json", *ns)
    assert r.exit_code == 0 and json.loads(r.stdout)["queues"][0]["write_queues"] == 2
    assert "Made" in invoke("topic", "list", *ns).stdout.split()
    body = tmp_path / "body.bin"
    body.write_bytes(b"\xff\xfe binary")
    sent = json.loads(invoke("send", "Made", "--file", str(body), "--key", "bin-key", "--json", *ns).stdout)
    for _ in range(100):                      # the index is built by the dispatcher, a moment after the send
        r = invoke("message", "query", "Made", "--key", "bin-key", "--json", *ns)
        if r.exit_code == 0:
            break
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)
    assert row["body_encoding"] == "base64"
    by_offset = json.loads(invoke("message", "query", "--id", sent["offset_msg_id"], "--json", *ns).stdout)
    by_client = json.loads(invoke("message", "query", "Made", "--id", sent["msg_id"], "--json", *ns).stdout)
    assert by_offset[0]["offset_msg_id"] == by_client[0]["offset_msg_id"] == sent["offset_msg_id"]
    r = invoke("cluster", "--json", *ns)
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["broker"] == "broker-a"
    assert invoke("topic", "delete", "Made", *ns).exit_code == 0
    r = invoke("topic", "route", "Made", *ns)
    assert r.exit_code == 1 and "Made" in r.stderr


def test_errors_are_one_line(invoke, server):
    r = invoke("send", "T", "x", "--namesrv", "127.0.0.1:1")
    assert r.exit_code == 1 and len(r.stderr.strip().splitlines()) == 1 and "127.0.0.1:1" in r.stderr
    r = invoke("send", "T", "--namesrv", server)
    assert r.exit_code == 2 and "BODY" in r.stderr
    r = invoke("message", "query", "--id", "nothex", "--namesrv", server)
    assert r.exit_code == 1 and "nothex" in r.stderr
    r = invoke("consume", "T", "--from", "yesterday", "--namesrv", server)
    assert r.exit_code == 2 and "yesterday" in r.stderr
