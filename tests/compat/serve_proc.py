"""``rocketq serve`` as a process for the reference-client suites, on fixed loopback ports so it can be
restarted under the clients' feet (same ports, same store).

Settings differ from the defaults only where a scenario would otherwise wait for minutes, each named
here: every delay level is one second (a retry comes back in 1 s instead of 10 s+), the transaction
check-back runs every second for half messages older than one second (RocketMQ: 60 s / 6 s), and
the small store profile; and the message-trace topic is created at start (``traceTopicEnable``, off
by default as in RocketMQ), as an operator who wants client traces sets it. The boot line on stdout gives the addresses; the log goes to a file in the
test's directory, printed when a start fails.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

BOOT_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
ALL_DELAYS_ONE_SECOND = " ".join(["1s"] * 18)
FAST_SETTINGS = (f"messageDelayLevel={ALL_DELAYS_ONE_SECOND}", "transactionCheckInterval=1000",
                 "transactionTimeOut=1000", "traceTopicEnable=true")
BOOT_LINE = re.compile(r"rocketq serving: NameServer")


def free_port(*, taken: frozenset[int] = frozenset(), with_next: bool = False) -> int:
    """A free loopback port not in *taken*; with *with_next* also the one after it free (the broker's HA port
    is listenPort + 1)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port in taken or (with_next and (port + 1 in taken or not _bindable(port + 1))):
            continue
        return port
    raise RuntimeError("no free loopback port pair found")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class ServeProcess:
    """One ``rocketq serve``; ``restart()`` stops it with SIGTERM (a clean stop) and starts it again."""

    def __init__(self, workdir: Path, *, acl_file: Path | None = None, grpc: bool = False,
                 extra: tuple[str, ...] = ()):
        self.workdir = workdir
        self.store = workdir / "store"
        self.log_path = workdir / "serve.log"
        self.broker_port = free_port(with_next=True)
        taken = frozenset({self.broker_port, self.broker_port + 1})
        self.namesrv_port = free_port(taken=taken)
        self.grpc_port = free_port(taken=taken | {self.namesrv_port}) if grpc else None
        self.acl_file, self.extra = acl_file, extra
        self.proc: subprocess.Popen | None = None

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def grpc(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def start(self) -> "ServeProcess":
        args = [sys.executable, "-m", "rocketq.cli.main", "serve", "--store-path", str(self.store), "--profile", "small",
                "--host", "127.0.0.1", "--port", str(self.broker_port), "--namesrv-port", str(self.namesrv_port)]
        args += ["--grpc-port", str(self.grpc_port)] if self.grpc_port else ["--no-grpc"]
        if self.acl_file:
            args += ["--acl", str(self.acl_file)]
        for setting in FAST_SETTINGS + self.extra:
            args += ["--set", setting]
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        line = self.proc.stdout.readline().decode()     # the boot line, or EOF when serve died
        if not BOOT_LINE.search(line) or time.monotonic() > deadline:
            self.stop()
            raise AssertionError(f"rocketq serve did not start: {line!r}\n{self.log_tail()}")
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                raise AssertionError(f"rocketq serve did not stop within {STOP_TIMEOUT_S} s\n{self.log_tail()}")
        proc.stdout.close()

    def restart(self) -> None:
        self.stop()
        self.start()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"
