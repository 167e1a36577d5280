"""A real ``rocketq serve`` process for the hostile-client tests, and the raw sockets they use.

The server runs as its own process (uvloop, as deployed) so its memory, descriptors and log can be
read from outside: ``/proc/<pid>/status`` (RssAnon: the heap, not the store's mapped files),
``/proc/<pid>/fd`` and its stderr.  Raw sockets are plain blocking ones that never read unless a
test says so; whether the server closed one is read from the kernel (TCP_INFO), not by reading.
"""

from __future__ import annotations

import os
import re
import resource
import select
import socket
import subprocess
import sys
import time
from pathlib import Path

from rocketq.remoting import RemotingCommand, RequestCode
from rocketq.remoting.codec import encode

BOOT = re.compile(r"NameServer [\d.]+:(\d+), broker \S+ \(\S+\) [\d.]+:(\d+)")
TCP_ESTABLISHED = 1
SMALL_RCVBUF_BYTES = 4096          # what a hostile client asks for: the kernel holds little for it


class ServeProcess:
    """``rocketq serve`` on free loopback ports with ``--set key=value`` settings; optionally with a
    low RLIMIT_NOFILE (soft = hard, so the server cannot raise it)."""

    def __init__(self, tmp_path: Path, settings: dict[str, object] | None = None, *, grpc: bool = False,
                 open_files: int | None = None) -> None:
        self.log_path = tmp_path / "serve.log"
        sets = [arg for k, v in (settings or {}).items() for arg in ("--set", f"{k}={v}")]
        grpc_args = ["--grpc-port", "0"] if grpc else ["--no-grpc"]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), COLUMNS="400")   # no wrapped log lines
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))) if open_files else None
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "rocketq.cli.main", "serve", "--store-path", str(tmp_path / "store"),
                 "--host", "127.0.0.1", "--port", "0", "--namesrv-port", "0", *grpc_args, *sets],
                stdout=subprocess.PIPE, stderr=log, text=True, env=env, preexec_fn=limit)
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline() if ready else ""
        match = BOOT.search(line)
        if not match:
            self.proc.kill()
            raise AssertionError(f"no boot line: {line!r}; log: {self.log()}")
        self.namesrv_port, self.broker_port = int(match.group(1)), int(match.group(2))
        grpc_match = re.search(r"gRPC [\d.]+:(\d+)", line)
        self.grpc_port = int(grpc_match.group(1)) if grpc_match else None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def rss_anon_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no RssAnon in /proc/<pid>/status")

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def log(self) -> str:
        return " ".join(self.log_path.read_text(errors="replace").split())

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def raw_socket(port: int, *, rcvbuf: int | None = SMALL_RCVBUF_BYTES) -> socket.socket:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    return sock


def is_open(sock: socket.socket) -> bool:
    """Still ESTABLISHED as far as this end knows (the server's FIN or RST changes it); reads nothing."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_ESTABLISHED


def view_requests(offset: int, count: int, first_opaque: int = 1) -> bytes:
    """*count* VIEW_MESSAGE_BY_ID requests for the message at CommitLog *offset*, as one byte string."""
    out = []
    for i in range(count):
        cmd = RemotingCommand.create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(offset)})
        cmd.opaque = first_opaque + i
        out.append(encode(cmd))
    return b"".join(out)


def wait_until(predicate, timeout_s: float, what: str, poll_s: float = 0.02):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)
