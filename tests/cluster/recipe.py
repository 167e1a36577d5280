"""The README's "Running a cluster" recipe, run as real processes: 2 NameServers and broker groups
from examples/cluster/*.conf (master + slave each), `rocketq namesrv` / `rocketq broker` as a user
starts them.

The configuration files are used as they are; only what two runs on one machine cannot share is
overridden on the command line: ports (0: free ones, kept across restarts of a broker), the store
path and the NameServer addresses (those free ports).  Small store files come from tests/conftest.py's
ROCKETQ_* variables, as ``--store-profile small`` would.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "cluster"
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 20


def _spawn(args: list[str], pattern: str, what: str, log_path: Path):
    with open(log_path, "a") as err:
        proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", *args], stdout=subprocess.PIPE,
                                stderr=err, text=True, env=ENV)
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
    line = proc.stdout.readline() if ready else ""
    m = re.search(pattern, line)
    if not m:
        proc.kill()
        raise AssertionError(f"{what} did not start: {line!r} {log_path.read_text()[-3000:]}")
    return proc, line


@dataclass
class Node:
    name: str
    proc: subprocess.Popen
    addr: str
    grpc: str | None = None
    ports: tuple[int, int] = (0, 0)        # (remoting, gRPC) to come back on


class RecipeCluster:
    def __init__(self, root: Path, groups: tuple[str, ...] = ("broker-a", "broker-b"), slaves: bool = True):
        self.root = root
        self.names = [n for g in groups for n in ((g, f"{g}-s") if slaves else (g,))]
        self.namesrvs: list[Node] = []
        self.brokers: dict[str, Node] = {}
        self.sets: dict[str, list[str]] = {}     # broker name -> extra KEY=VALUE settings (its next start)

    @property
    def namesrv(self) -> str:
        return ";".join(n.addr for n in self.namesrvs)

    def log(self, name: str) -> Path:
        return self.root / f"{name}.log"

    def start(self) -> RecipeCluster:
        for i in (1, 2):
            proc, line = _spawn(["namesrv", "--port", "0", "--kv-config", str(self.root / f"namesrv-{i}" / "kv.json")],
                                r"listening on", f"namesrv-{i}", self.log(f"namesrv-{i}"))
            addr = re.search(r"([\d.]+:\d+) \(NameServer\)", line).group(1)
            self.namesrvs.append(Node(f"namesrv-{i}", proc, addr))
        for name in self.names:
            self.start_broker(name)
        return self

    def start_broker(self, name: str) -> Node:
        port, grpc = self.brokers[name].ports if name in self.brokers else (0, 0)
        args = ["broker", "-c", str(EXAMPLES / f"{name}.conf"), "--store-profile", "small",
                "--store-path", str(self.root / name), "--port", str(port), "--grpc-port", str(grpc),
                "--set", "haListenPort=0", "--namesrv", self.namesrv]
        for kv in self.sets.get(name, ()):
            args += ["--set", kv]
        proc, line = _spawn(args, r"listening on", name, self.log(name))
        addr = re.search(r"([\d.]+:\d+) \(broker\)", line).group(1)
        grpc_addr = re.search(r"([\d.]+:\d+) \(gRPC\)", line).group(1)
        node = Node(name, proc, addr, grpc_addr, (int(addr.rsplit(":", 1)[1]), int(grpc_addr.rsplit(":", 1)[1])))
        self.brokers[name] = node
        return node

    def kill(self, name: str) -> None:
        node = self.brokers[name]
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait(STOP_TIMEOUT_S)

    def cli(self, *args: str) -> str:
        """``rocketq <args> --namesrv ...``: its stdout (an AssertionError with stderr if it failed)."""
        r = subprocess.run([sys.executable, "-m", "rocketq.cli.main", *args, "--namesrv", self.namesrv],
                           capture_output=True, text=True, env=ENV, timeout=60)
        assert r.returncode == 0, f"rocketq {' '.join(args)} failed: {r.stderr}"
        return r.stdout

    def cli_json(self, *args: str):
        return json.loads(self.cli(*args, "--json"))

    def close(self) -> None:
        nodes = list(self.brokers.values()) + self.namesrvs
        for n in nodes:
            if n.proc.poll() is None:
                n.proc.send_signal(signal.SIGTERM)
        for n in nodes:
            try:
                n.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                n.proc.kill()
            with contextlib.suppress(Exception):
                n.proc.stdout.close()
