"""The suite's own safety net (tests/conftest.py): a process a test starts and never stops - as a worker
that crashes leaves its servers - is stopped and named when the run ends, and nothing else is."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

LEAKY_TEST = '''
import subprocess, sys
from pathlib import Path

def test_leaves_a_process_running(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    Path({pid_file!r}).write_text(str(child.pid))
'''


def test_a_process_left_running_is_stopped_when_the_run_ends(tmp_path):
    pid_file = tmp_path / "pid"
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text())
    (tmp_path / "test_leaky.py").write_text(LEAKY_TEST.format(pid_file=str(pid_file)))
    neighbour = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])   # this run's, not the inner one's
    env = {k: v for k, v in os.environ.items() if k != "ROCKETQ_TEST_RUN"}                # the inner run marks its own
    env["ROCKETQ_TEST_EXIT_GRACE_S"] = "0.5"                                                # not 15 s: it never ends by itself
    try:
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
        pid = int(pid_file.read_text())
        assert "stopped 1 process(es) the tests left running" in run.stdout and str(pid) in run.stdout, run.stdout
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), "the leaked process still runs"
        assert neighbour.poll() is None, "a process of another run was stopped"
    finally:
        neighbour.kill()
        neighbour.wait()


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as stopped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
