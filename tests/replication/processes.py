"""Starting `rocketq namesrv` / `rocketq broker` as real processes for the replication tests."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys

ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


def spawn(args, pattern, what, log_path):
    """Start ``rocketq <args>``; wait for its first stdout line to match *pattern* (the match is
    returned). Stderr goes to *log_path* (a pipe nobody reads could fill and stall the process)."""
    with open(log_path, "a") as err:
        proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", *args], stdout=subprocess.PIPE,
                                stderr=err, text=True, env=ENV)
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline() if ready else ""
    m = re.search(pattern, line)
    if not m:
        proc.kill()
        with open(log_path) as f:
            raise AssertionError(f"{what} did not start: {line!r} {f.read()[-3000:]}")
    return proc, m
