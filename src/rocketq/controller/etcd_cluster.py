"""Starting a local etcd cluster of real ``etcd`` processes (Debian's etcd-server) on loopback ports
with temporary data directories: what the controller's tests and ``rocketq bench failover`` run on.

Each member gets a client and a peer port picked free on 127.0.0.1; the cluster is bootstrapped
with ``--initial-cluster`` naming all members, and :meth:`LocalEtcdCluster.start` returns once every
member answers ``/health`` with a quorum.  Members can be killed (SIGKILL) and restarted on the same
data directory and ports, as an operator would after a crash.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

ETCD_BINARY = "etcd"
START_TIMEOUT_S = 30.0
# etcd's defaults are 100 ms / 1000 ms; a 2-core machine shared with busy tests needs slack before
# a member calls an election
HEARTBEAT_MS = 100
ELECTION_MS = 1000


def etcd_missing() -> str | None:
    """Why a local cluster cannot run here (no etcd binary), or None."""
    if shutil.which(ETCD_BINARY) is None:
        return "etcd is not installed (Debian: apt-get install etcd-server)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalEtcdCluster:
    def __init__(self, root: Path | str, members: int = 3, host: str = "127.0.0.1"):
        self.root = Path(root)
        self.host = host
        self.names = [f"etcd{i}" for i in range(members)]
        self.client_ports = {n: _free_port() for n in self.names}
        self.peer_ports = {n: _free_port() for n in self.names}
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def endpoints(self) -> list[str]:
        return [f"http://{self.host}:{self.client_ports[n]}" for n in self.names]

    def endpoint(self, name: str) -> str:
        return f"http://{self.host}:{self.client_ports[name]}"

    def _command(self, name: str) -> list[str]:
        initial = ",".join(f"{n}=http://{self.host}:{self.peer_ports[n]}" for n in self.names)
        return [ETCD_BINARY, "--name", name, "--data-dir", str(self.root / name),
                "--listen-client-urls", self.endpoint(name), "--advertise-client-urls", self.endpoint(name),
                "--listen-peer-urls", f"http://{self.host}:{self.peer_ports[name]}",
                "--initial-advertise-peer-urls", f"http://{self.host}:{self.peer_ports[name]}",
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", f"rocketq-{os.getpid()}-{id(self)}",
                "--heartbeat-interval", str(HEARTBEAT_MS), "--election-timeout", str(ELECTION_MS),
                "--log-outputs", str(self.root / f"{name}.log"), "--logger", "zap"]

    def start_member(self, name: str) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{name}.out", "ab") as out:
            self.procs[name] = subprocess.Popen(self._command(name), stdout=out, stderr=subprocess.STDOUT)

    def start(self) -> LocalEtcdCluster:
        for n in self.names:
            self.start_member(n)
        self.wait_healthy(self.names)
        return self

    def healthy(self, name: str) -> bool:
        try:
            with urllib.request.urlopen(self.endpoint(name) + "/health", timeout=1) as r:
                return b'"true"' in r.read()
        except OSError:
            return False

    def wait_healthy(self, names: list[str], timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        for n in names:
            while not self.healthy(n):
                proc = self.procs.get(n)
                if proc is not None and proc.poll() is not None:
                    raise RuntimeError(f"etcd member {n} exited {proc.returncode}: {self.log_tail(n)}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"etcd member {n} not healthy within {timeout_s} s: {self.log_tail(n)}")
                time.sleep(0.1)

    def log_tail(self, name: str, chars: int = 2000) -> str:
        out = []
        for suffix in (".out", ".log"):
            p = self.root / f"{name}{suffix}"
            if p.exists():
                out.append(p.read_text(errors="replace")[-chars:])
        return "\n".join(out)

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop(self) -> None:
        """SIGKILL every member: a graceful stop makes each member try to hand its leadership to the
        others (also stopping) and takes seconds; the data directories are throwaway and etcd is
        crash-safe anyway."""
        for name in list(self.procs):
            self.kill(name)

    def __enter__(self) -> LocalEtcdCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
