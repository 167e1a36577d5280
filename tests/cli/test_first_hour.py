"""What a new user tripped over in the first hour (issue 21), each through a real `rocketq serve`."""

import json
import os
import subprocess
import sys
import time

from test_client_commands import server  # noqa: F401 (a module-scoped `rocketq serve` of this module's own)

from rocketq.common.msgid import may_be_offset_msg_id

WAIT_S = 60


def _until(invoke_result, timeout_s: float = WAIT_S):
    """Call *invoke_result()* until it exits 0 (the index is built a moment after a send); the last result."""
    deadline = time.monotonic() + timeout_s
    while True:
        r = invoke_result()
        if r.exit_code == 0 or time.monotonic() > deadline:
            return r
        time.sleep(0.05)


def test_message_query_takes_either_kind_of_id_without_the_topic(invoke, server):  # noqa: F811
    ns = ("--namesrv", server)
    sent = json.loads(invoke("send", "IdTopic", "find me", "--json", *ns).stdout)
    assert not may_be_offset_msg_id(sent["msg_id"]) or os.getpid() % 65536 == 0   # the client id's pid field
    assert may_be_offset_msg_id(sent["offset_msg_id"])
    r = _until(lambda: invoke("message", "query", "--id", sent["msg_id"], "--json", *ns))
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)
    assert row["body"] == "find me" and row["topic"] == "IdTopic" and row["offset_msg_id"] == sent["offset_msg_id"]
    for args in (("--id", sent["offset_msg_id"]), ("--id", sent["msg_id"].lower(), "--topic", "IdTopic"),
                 ("IdTopic", "--id", sent["msg_id"])):
        r = invoke("message", "query", *args, "--json", *ns)
        assert r.exit_code == 0, (args, r.output)
        assert json.loads(r.stdout)[0]["msg_id"] == sent["msg_id"]
    unknown = sent["msg_id"][:-4] + ("0000" if not sent["msg_id"].endswith("0000") else "0001")
    r = invoke("message", "query", "--id", unknown, *ns)
    assert r.exit_code == 1 and "no message with id" in r.stderr and "UNIQ_KEY" in r.stderr


def test_topic_delete_of_a_missing_topic_fails(invoke, server):  # noqa: F811
    r = invoke("topic", "delete", "NoSuchTopic", "--namesrv", server)
    assert r.exit_code == 1 and "NoSuchTopic does not exist" in r.stderr and r.stdout == ""


def test_consume_of_a_missing_topic_fails_at_once(server):  # noqa: F811
    # a process of its own: the failure this guards against is waiting forever
    r = subprocess.run([sys.executable, "-m", "rocketq.cli.main", "consume", "NoSuchTopic", "--namesrv", server],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                       timeout=WAIT_S)
    assert r.returncode == 1 and "NoSuchTopic does not exist" in r.stderr and "--wait" in r.stderr


def test_consume_wait_reads_a_topic_created_after_it_started(invoke, server):  # noqa: F811
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "consume", "LateTopic", "--wait", "--from",
                             "first", "--count", "1", "--namesrv", server], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert invoke("send", "LateTopic", "at last", "--namesrv", server).exit_code == 0
        stdout, stderr = proc.communicate(timeout=WAIT_S)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "at last" in stdout


def test_body_and_file_together_are_refused(invoke, server, tmp_path):  # noqa: F811
    body = tmp_path / "body.txt"
    body.write_text("from the file")
    r = invoke("send", "T", "from the argument", "--file", body, "--namesrv", server)
    assert r.exit_code == 2 and "BODY and --file" in r.stderr
    r = invoke("send", "T", "x", "--count", "3", "--namesrv", server)
    assert r.exit_code == 2 and "BODY and --count" in r.stderr


def test_reading_without_a_group_leaves_no_group_topic_or_offsets_behind(invoke, server):  # noqa: F811
    ns = ("--namesrv", server)
    assert invoke("send", "NoTrace", "one", *ns).exit_code == 0
    r = invoke("consume", "NoTrace", "--from", "first", "--count", "1", *ns)
    assert r.exit_code == 0 and "one" in r.stdout
    groups = invoke("group", "list", "--all", "--json", *ns)
    assert groups.exit_code == 0, groups.output
    assert not [g for g in json.loads(groups.stdout) if g.startswith("rocketq-cli") or g == "TOOLS_CONSUMER"]
    topics = [row["topic"] for row in json.loads(invoke("topic", "list", "--all", "--json", *ns).stdout)]
    assert "NoTrace" in topics and not [t for t in topics if t.startswith("%RETRY%")]
    r = invoke("group", "lag", "TOOLS_CONSUMER", *ns)
    assert r.exit_code == 1 and "no committed offsets" in r.stderr


def test_from_last_without_a_group_starts_at_the_end_and_a_new_group_replays_a_young_queue(invoke, server):  # noqa: F811
    ns = ("--namesrv", server)
    assert invoke("topic", "create", "Young", "--queues", "1", *ns).exit_code == 0
    assert invoke("send", "Young", "--count", "3", "--size", "8", *ns).exit_code == 0
    r = invoke("consume", "Young", "--idle", "1", *ns)                        # --from last is the default
    assert r.exit_code == 0 and r.stdout == ""
    r = invoke("consume", "Young", "--group", "young-new", "--idle", "1", "--json", *ns)
    assert r.exit_code == 0 and len(r.stdout.splitlines()) == 3               # RocketMQ's young-queue rule


def test_topic_list_shows_user_topics_and_marks_the_rest_with_all(invoke, server):  # noqa: F811
    ns = ("--namesrv", server)
    assert invoke("topic", "create", "Listed", *ns).exit_code == 0
    plain = invoke("topic", "list", *ns).stdout.split()
    assert "Listed" in plain
    assert not {"DefaultCluster", "broker-a", "TBW102", "SCHEDULE_TOPIC_XXXX"} & set(plain)
    kinds = {row["topic"]: row["kind"] for row in json.loads(invoke("topic", "list", "--all", "--json", *ns).stdout)}
    assert kinds["DefaultCluster"] == "cluster" and kinds["broker-a"] == "broker" and kinds["TBW102"] == "system"
    assert kinds["Listed"] == "user"


def test_tables_are_not_cut_short_when_piped(server):  # noqa: F811
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    out = subprocess.run([sys.executable, "-m", "rocketq.cli.main", "cluster", "--namesrv", server],
                         capture_output=True, text=True, env=env, timeout=WAIT_S)
    assert out.returncode == 0, out.stderr
    assert "DefaultCluster" in out.stdout and "…" not in out.stdout
