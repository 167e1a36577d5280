"""The durability check of `rocketq bench compare`: strace's summary parsed, a real strace counting
a child's sync calls exactly, and "not measured" (never a failure) when strace is missing."""

import subprocess
import sys

import pytest

from rocketq.bench.compare import fsync_check
from rocketq.bench.compare.fsync_check import (
    StraceCounter,
    SyncCount,
    check_durability,
    parse_summary,
    strace_missing,
    syncs_before_ack,
)

# strace 6.1, `strace -f -c -e trace=fsync,fdatasync,...`: errors are blank unless some failed
SUMMARY = """\
% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 97.51    0.412345         204      2021           fdatasync
  2.01    0.008500        2833         3         1 fsync
  0.48    0.002000        1000         2           msync
------ ----------- ----------- --------- --------- ----------------
100.00    0.422845                  2026         1 total
"""


def test_parse_summary_takes_the_calls_column_without_the_failed_ones():
    assert parse_summary(SUMMARY) == {"fdatasync": 2021, "fsync": 2, "msync": 2}


def test_parse_summary_of_a_pass_without_sync_calls_is_empty():
    empty = SUMMARY.splitlines()
    assert parse_summary("\n".join(empty[:2] + empty[-2:])) == {}
    assert parse_summary("") == {}


def test_sync_count_per_ack_and_the_line_between_modes():
    assert SyncCount(acks=2000, calls={"fdatasync": 2003}).syncs_every_ack
    assert not SyncCount(acks=2000, calls={"fdatasync": 6, "fsync": 3}).syncs_every_ack
    assert not SyncCount(acks=0, calls={"fdatasync": 5}).syncs_every_ack
    d = SyncCount(acks=2000, calls={"fdatasync": 9}).to_dict()
    assert d == {"acks": 2000, "calls": {"fdatasync": 9}, "syncs": 9, "syncs_per_ack": 0.0045,
                 "syncs_every_ack": False}


def test_the_sync_scenario_follows_the_measurement_and_falls_back_to_the_documented_mode():
    measured_yes = SyncCount(acks=10, calls={"fdatasync": 10}).to_dict()
    measured_no = SyncCount(acks=10, calls={}).to_dict()
    assert syncs_before_ack(measured_yes, documented=False)
    assert not syncs_before_ack(measured_no, documented=True)
    assert syncs_before_ack({"not_measured": "strace is not installed"}, documented=True)
    assert not syncs_before_ack(None, documented=False)


class _NeverStarted:
    name, durability = "fake", {"async": "a", "sync": "s"}

    def __init__(self, root, sync=False):
        raise AssertionError("no server is started when nothing can be measured")


def test_without_strace_every_mode_is_reported_not_measured(monkeypatch, tmp_path):
    monkeypatch.setattr(fsync_check.shutil, "which", lambda name: None)
    checks = check_durability([_NeverStarted], tmp_path, n=10, body=b"x", run=None)
    assert checks == {"fake": {"async": {"not_measured": "strace is not installed (apt-get install strace)"},
                               "sync": {"not_measured": "strace is not installed (apt-get install strace)"}}}


CHILD = """
import os, sys, tempfile
fd, _ = tempfile.mkstemp()
for line in sys.stdin:
    for _ in range(int(line)):
        os.write(fd, b"x")
        os.fdatasync(fd)
    os.fsync(fd)
    print("done", flush=True)
"""


@pytest.mark.skipif(strace_missing() is not None,
                    reason="strace is not installed: the sync counter under test is strace (apt-get install strace)")
def test_strace_counter_counts_exactly_the_syncs_made_while_attached():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child.stdin.write("3\n")                     # before attaching: not counted
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"
        try:
            counter = StraceCounter([child.pid]).__enter__()
        except RuntimeError as e:
            if "not permitted" in str(e):
                pytest.skip(f"strace cannot attach to a process here ({e}): the kernel or container forbids "
                            f"ptrace (kernel.yama.ptrace_scope, or no CAP_SYS_PTRACE), which counting a "
                            f"server's sync calls needs")
            raise
        try:
            child.stdin.write("25\n")
            child.stdin.flush()
            assert child.stdout.readline() == "done\n"
        finally:
            counter.__exit__(None, None, None)
        assert counter.calls == {"fdatasync": 25, "fsync": 1}
    finally:
        child.kill()
        child.wait()
