"""What the server processes listen on, read from the kernel (/proc), against what their start-up
lines say: loopback by default, another interface only when asked, and the line tells the truth."""

from __future__ import annotations

import ipaddress
import os
import re
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads listening sockets from /proc")
LISTEN = "0A"


def _listening(pid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket of *pid* in LISTEN state (IPv4 and IPv6)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = set()
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        if not os.path.exists(table):
            continue
        for row in Path(table).read_text().splitlines()[1:]:
            cols = row.split()
            if cols[3] != LISTEN or cols[9] not in inodes:
                continue
            host_hex, port_hex = cols[1].split(":")
            raw = bytes.fromhex(host_hex)
            # /proc writes each 32-bit word in host (little-endian) order
            addr = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            out.add((_plain(ipaddress.ip_address(addr if width == 16 else addr[:4])), int(port_hex, 16)))
    return out


def _plain(ip) -> str:
    """grpc binds "127.0.0.1" as a dual-stack socket on ::ffff:127.0.0.1 (the same address), and
    "0.0.0.0" as "::" (every interface, IPv6 ones too): both read back as what was asked for."""
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return "0.0.0.0" if str(ip) == "::" else str(ip)


def _start(tmp_path, command: list[str]) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", *command], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    line = proc.stdout.readline() if ready else ""
    if "listening on" not in line:
        proc.kill()
        raise AssertionError(f"no start-up line: {line!r}; stderr: {proc.stderr.read()}")
    return proc, line


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _said(line: str) -> dict[str, tuple[str, int]]:
    """{what: (host, port)} from the line's "listening on h:p (what), ..." part."""
    part = line.split("listening on ", 1)[1].split(";", 1)[0]
    return {what: (host, int(port)) for host, port, what in re.findall(r"([\d.]+):(\d+) \(([^)]+)\)", part)}


SERVE = ["serve", "--port", "0", "--namesrv-port", "0", "--grpc-port", "0"]


def test_serve_listens_on_loopback_only_by_default_and_says_so(tmp_path):
    proc, line = _start(tmp_path, [*SERVE, "--store-path", str(tmp_path / "s")])
    try:
        sockets = _listening(proc.pid)
        said = _said(line)
        assert set(said) == {"NameServer", "broker", "HA", "gRPC", "metrics", "console"}, line
        assert sockets == set(said.values()), (sockets, line)
        assert {host for host, _ in sockets} == {"127.0.0.1"}
        assert "ACL off, TLS off: reachable from this machine only" in line
    finally:
        _stop(proc)


def test_serve_binds_every_interface_only_when_asked_and_warns(tmp_path):
    proc, line = _start(tmp_path, [*SERVE, "--host", "0.0.0.0", "--store-path", str(tmp_path / "s")])
    try:
        sockets = _listening(proc.pid)
        assert sockets == set(_said(line).values()) and {host for host, _ in sockets} == {"0.0.0.0"}
        assert "reachable from other machines, and with ACL off anyone" in line
    finally:
        _stop(proc)


def test_serve_with_acl_says_acl_on(tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n  - {accessKey: ops, secretKey: ops-secret, admin: true}\n")
    proc, line = _start(tmp_path, [*SERVE, "--no-grpc", "--acl", str(acl), "--store-path", str(tmp_path / "s")])
    try:
        assert "ACL on, TLS off: reachable from this machine only" in line
        assert _listening(proc.pid) == set(_said(line).values())
    finally:
        _stop(proc)


def test_broker_and_namesrv_alone_listen_on_loopback_by_default(tmp_path):
    ns, ns_line = _start(tmp_path, ["namesrv", "--port", "0", "--kv-config", str(tmp_path / "kv.json")])
    try:
        assert _listening(ns.pid) == set(_said(ns_line).values())
        assert {host for host, _ in _listening(ns.pid)} == {"127.0.0.1"}
        assert "reachable from this machine only" in ns_line
        ns_port = _said(ns_line)["NameServer"][1]
        broker, line = _start(tmp_path, ["broker", "--port", "0", "--namesrv", f"127.0.0.1:{ns_port}",
                                         "--store-path", str(tmp_path / "b")])
        try:
            said = _said(line)
            assert set(said) == {"broker", "HA", "metrics", "console"} and _listening(broker.pid) == set(said.values())
            assert {host for host, _ in said.values()} == {"127.0.0.1"}
            assert "ACL off, TLS off: reachable from this machine only" in line
        finally:
            _stop(broker)
    finally:
        _stop(ns)
