"""A network namespace made by a test (we run as root): one veth pair between it and the host.

Inside the namespace the broker binds ``inner``; on the host side the pair has ``outer`` (the
NameServer, clients, other brokers) and ``controller_ip`` (the controllers bind it).  :meth:`partition`
adds a blackhole route to ``controller_ip`` inside the namespace: the broker there can no longer reach
any controller, while clients, the NameServer and the HA slaves still reach it and it reaches them.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess


def netns_missing() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "no `ip` command (Debian: apt-get install iproute2)"
    probe = subprocess.run(["ip", "netns", "add", f"rqprobe{os.getpid()}"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`ip netns add` fails here: {probe.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", f"rqprobe{os.getpid()}"], capture_output=True)
    return None


def _ip(*args: str, ns: str | None = None) -> None:
    cmd = ["ip", "netns", "exec", ns, "ip", *args] if ns else ["ip", *args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")


class NetNs:
    def __init__(self):
        tag = f"{os.getpid() % 100000}{random.randrange(100)}"
        self.name = f"rqctl{tag}"
        self.host_if, self.ns_if = f"rqh{tag}", f"rqn{tag}"
        net = f"10.{random.randrange(200, 250)}.{random.randrange(1, 250)}"
        self.outer, self.inner, self.controller_ip = f"{net}.1", f"{net}.2", f"{net}.3"

    def __enter__(self) -> NetNs:
        _ip("netns", "add", self.name)
        try:
            _ip("link", "add", self.host_if, "type", "veth", "peer", "name", self.ns_if)
            _ip("link", "set", self.ns_if, "netns", self.name)
            for addr in (self.outer, self.controller_ip):
                _ip("addr", "add", f"{addr}/24", "dev", self.host_if)
            _ip("link", "set", self.host_if, "up")
            _ip("addr", "add", f"{self.inner}/24", "dev", self.ns_if, ns=self.name)
            _ip("link", "set", self.ns_if, "up", ns=self.name)
            _ip("link", "set", "lo", "up", ns=self.name)
        except Exception:
            self.__exit__()
            raise
        return self

    def partition(self) -> None:
        _ip("route", "add", "blackhole", f"{self.controller_ip}/32", ns=self.name)

    def heal(self) -> None:
        _ip("route", "del", "blackhole", f"{self.controller_ip}/32", ns=self.name)

    def __exit__(self, *exc) -> None:
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)
