import gc
import importlib.util
import os
import signal
import time
from pathlib import Path

import pytest

# Servers the tests start as processes (`rocketq serve`, `rocketq broker`) read ROCKETQ_<key>
# settings: small segments and index files, so a test run does not fallocate gigabytes (a default
# store preallocates a 1 GiB CommitLog segment, the next one, and a 420 MB index file).
# The console and /metrics on ports the system picks: several serve processes run at once in some
# modules (the reference-client suites keep three), and 8080 / 5557 would be taken by the first.
for _key, _value in (("MAPEDFILESIZECOMMITLOG", str(8 << 20)), ("MAXHASHSLOTNUM", "100003"),
                     ("MAXINDEXNUM", "400000"), ("CONSOLEPORT", "0"), ("METRICSPROMEXPORTERPORT", "0")):
    os.environ.setdefault(f"ROCKETQ_{_key}", _value)


# Every process the run starts inherits this mark from the run's first process (pytest, or xdist's
# controller), so that what a test left running can be found when the run ends: a worker that dies (a
# crash, a signal) takes its fixtures' teardown with it, and its `rocketq serve`, JVMs and etcd members
# would keep their ports and CPU until someone noticed.
RUN_MARK = "ROCKETQ_TEST_RUN"
os.environ.setdefault(RUN_MARK, f"{os.getpid()}-{time.time_ns()}")
# how long the marked processes get to end by themselves first (a Spark JVM ends a moment after the
# xdist worker that drove it), then how long a SIGTERM gets before SIGKILL
LEFT_RUNNING_EXIT_S = float(os.environ.get("ROCKETQ_TEST_EXIT_GRACE_S", "15"))
LEFT_RUNNING_TERM_S = 5.0


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    """In the run's first process, once every test and fixture is done (and, trylast, after xdist shut
    its workers down): stop the processes that still carry this run's mark and name them."""
    if hasattr(session.config, "workerinput"):
        return
    left = _left_running(f"{RUN_MARK}={os.environ[RUN_MARK]}".encode())
    left = _still_running(left, LEFT_RUNNING_EXIT_S)
    if not left:
        return
    for pid in left:
        _signal(pid, signal.SIGTERM)
    for pid in _still_running(left, LEFT_RUNNING_TERM_S):
        _signal(pid, signal.SIGKILL)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"stopped {len(left)} process(es) the tests left running: "
                            + "; ".join(f"{pid} {cmd[:100]}" for pid, cmd in left.items()), yellow=True)


def _left_running(mark: bytes) -> dict[int, str]:
    """pid -> command line of the processes but this one with *mark* in their environment."""
    me, out = os.getpid(), {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            pid = int(proc.name)
            if pid == me or mark not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            out[pid] = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):           # gone meanwhile, or not ours to read
            continue
    return out


def _still_running(procs: dict[int, str], wait_s: float) -> dict[int, str]:
    """Those of *procs* still running once they all ended, or after *wait_s*."""
    deadline = time.monotonic() + wait_s
    while procs and time.monotonic() < deadline:
        time.sleep(0.1)
        procs = {pid: cmd for pid, cmd in procs.items() if _running(pid)}
    return procs


def _running(pid: int) -> bool:
    """Not gone, and not a zombie its parent has yet to reap (a stopped child of a leaked process)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.fixture(autouse=True)
def _collect_garbage():
    """Mappings of closed stores go away promptly, so temp dirs can be removed between tests."""
    yield
    gc.collect()


# `make test` runs the suite on two workers (pytest-xdist).  Work is handed out a test file at a time
# (module fixtures start once), except that the tests under each prefix below go to one worker together:
# the compat and Spark folders share session fixtures that are costly to start (the reference clients'
# `rocketq serve` and their Java, Go and Node builds; one SparkSession; one etcd), and the peers' tests start
# system-wide daemons (RabbitMQ's epmd on its one port).  xdist's own `loadgroup` marks cannot do this
# under pytest 9.2 (xdist 3.8 renames items through an attribute pytest no longer reads), its
# scheduler hook can.
_ONE_WORKER = {"tests/compat/": "compat", "tests/spark/": "spark", "tests/controller/": "controller", "tests/bench/": "peers",
               "tests/cli/test_bench_compare.py": "peers"}

if importlib.util.find_spec("xdist") is not None:
    def pytest_xdist_make_scheduler(config, log):
        from xdist.scheduler import LoadScopeScheduling

        class GroupOrFileScheduling(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                for prefix, group in _ONE_WORKER.items():
                    if nodeid.startswith(prefix):
                        return group
                return nodeid.split("::", 1)[0]

        return GroupOrFileScheduling(config, log)
