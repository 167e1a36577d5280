"""A whole controller-mode deployment on one machine, as separate processes: a local etcd cluster,
``rocketq controller`` processes, a NameServer and the brokers of one broker set (SYNC_MASTER,
SYNC_FLUSH).  ``rocketq bench failover`` and the controller tests drive it.

Theory of operation
-------------------
Every process is started with ``python -m rocketq.cli.main`` (the interpreter and ``PYTHONPATH`` of
the caller) and is ready once its first stdout line (the boot line) appears; stderr goes to a log
file per process in *root* (a pipe nobody reads could fill and stall it).  Broker 1 starts first and
is waited for as the confirmed master, so every run begins from the same, known state; the others
then join as slaves.  A broker can be started inside a network namespace (``netns``): its
``ip netns exec`` prefix is used and it binds the given address.

Nothing here sleeps to hope: :meth:`until` polls a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from rocketq.controller.etcd_cluster import LocalEtcdCluster
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode

BOOT_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
CALL_TIMEOUT_S = 3.0
POLL_S = 0.05
CONTROLLER_BOOT = r"listening on ([\d.]+:\d+)"
BROKER_BOOT = r"listening on ([\d.]+:\d+)"
NAMESRV_BOOT = r"listening on [\d.]+:(\d+)"


def launch(args: list[str], log_path: Path, *, prefix: list[str] = (), env=None) -> subprocess.Popen:
    """Start ``rocketq <args>``, stdout piped (its boot line is read by :func:`ready`), stderr to *log_path*."""
    with open(log_path, "a") as err:
        return subprocess.Popen([*prefix, sys.executable, "-m", "rocketq.cli.main", *args], stdout=subprocess.PIPE,
                                stderr=err, text=True,
                                env=env or dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


def ready(proc: subprocess.Popen, pattern: str, what: str, log_path: Path):
    """Wait for *proc*'s first stdout line to match *pattern*; the match (the process is killed if not)."""
    ready_, _, _ = select.select([proc.stdout], [], [], BOOT_TIMEOUT_S)
    line = proc.stdout.readline() if ready_ else ""
    m = re.search(pattern, line)
    if not m:
        proc.kill()
        proc.wait(10)
        raise RuntimeError(f"{what} did not start: {line!r} {log_path.read_text(errors='replace')[-3000:]}")
    return m


def spawn(args: list[str], pattern: str, what: str, log_path: Path, *, prefix: list[str] = (), env=None):
    """Start ``rocketq <args>`` and wait for its boot line: (process, match)."""
    proc = launch(args, log_path, prefix=prefix, env=env)
    return proc, ready(proc, pattern, what, log_path)


async def call(addr: str, code: int, header: dict | None = None, body: bytes = b"",
               timeout_s: float = CALL_TIMEOUT_S, credentials: tuple[str, str] | None = None) -> RemotingCommand:
    """One request; signed with *credentials* (accessKey, secretKey) when given."""
    from rocketq.acl.signing import sign
    host, _, port = addr.rpartition(":")
    client = RemotingClient(host, int(port))
    cmd = RemotingCommand.create_request(code, header or {}, body)
    try:
        return await client.invoke(sign(cmd, *credentials) if credentials else cmd, timeout_s)
    finally:
        await client.close()


async def until(what: str, predicate, timeout_s: float = 30.0):
    """Await *predicate* (an async callable) until it returns something true; its value."""
    deadline = time.monotonic() + timeout_s
    last = None
    while True:
        try:
            value = await predicate()
        except Exception as exc:              # a process being killed or starting: try again
            value, last = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what} (last error: {last})")
        await asyncio.sleep(POLL_S)


class LocalControlledCluster:
    def __init__(self, root: Path | str, *, brokers: int = 3, controllers: int = 2, etcd_members: int = 3,
                 master_timeout_ms: int = 1500, lease_ttl_s: int = 2, broker_name: str = "broker-a",
                 commitlog_bytes: int = 4 << 20, controller_host: str = "127.0.0.1",
                 namesrv_host: str = "127.0.0.1", acl_file: Path | None = None,
                 credentials: tuple[str, str] | None = None):
        """*acl_file*: the controllers run with ``--acl``; *credentials*: an admin account of it, which
        the brokers sign with (innerClientAuthenticationCredentials) and so do this object's requests."""
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.etcd = LocalEtcdCluster(self.root / "etcd", etcd_members)
        self.n_brokers, self.n_controllers = brokers, controllers
        self.master_timeout_ms, self.lease_ttl_s = master_timeout_ms, lease_ttl_s
        self.broker_name, self.commitlog_bytes = broker_name, commitlog_bytes
        self.controller_host, self.namesrv_host = controller_host, namesrv_host
        self.controller_procs: dict[int, subprocess.Popen] = {}
        self.controller_addrs: dict[int, str] = {}
        self.broker_procs: dict[int, subprocess.Popen] = {}
        self.broker_addrs: dict[int, str] = {}
        self.namesrv_proc: subprocess.Popen | None = None
        self.namesrv = ""
        self.netns: dict[int, tuple[str, str]] = {}        # broker id -> (namespace, address to bind)
        self.acl_file, self.credentials = acl_file, credentials
        self.broker_credentials: dict[int, tuple[str, str]] = {}   # a broker's own, instead of *credentials*
        self.broker_controller_addr: dict[int, str] = {}           # a broker's own controllerAddr

    # -- processes -------------------------------------------------------------------------------

    def _controller_args(self, port: int) -> list[str]:
        return ["controller", "--etcd", ",".join(self.etcd.endpoints), "--host", self.controller_host,
                "--port", str(port),
                "--master-timeout-ms", str(self.master_timeout_ms), "--lease-ttl-s", str(self.lease_ttl_s),
                *(["--acl", str(self.acl_file)] if self.acl_file else [])]

    def start_controller(self, i: int, port: int = 0) -> None:
        log_path = self.root / f"controller{i}.log"
        proc = launch(self._controller_args(port), log_path)
        self.controller_procs[i] = proc
        self.controller_addrs[i] = ready(proc, CONTROLLER_BOOT, f"controller {i}", log_path).group(1)

    def restart_controller(self, i: int) -> None:
        """Start controller *i* again on its old port: the brokers' controllerAddr names that address."""
        self.start_controller(i, int(self.controller_addrs[i].rpartition(":")[2]))

    def broker_conf(self, bid: int) -> Path:
        ns = self.netns.get(bid)
        bind = ns[1] if ns else "127.0.0.1"
        conf = self.root / f"b{bid}.conf"
        conf.write_text(
            f"brokerName={self.broker_name}\nbrokerId={bid}\nenableControllerMode=true\n"
            f"controllerAddr={self.broker_controller_addr.get(bid) or ';'.join(self.controller_addrs.values())}\n"
            f"storePathRootDir={self.root / f'b{bid}'}\nnamesrvAddr={self.namesrv}\nlistenPort=0\nhaListenPort=0\n"
            f"bindAddress={bind}\nbrokerIP1={bind}\nflushDiskType=SYNC_FLUSH\n"
            f"mapedFileSizeCommitLog={self.commitlog_bytes}\nmaxHashSlotNum=1009\nmaxIndexNum=20000\n"
            f"consolePort=-1\n")
        creds = self.broker_credentials.get(bid, self.credentials)
        if creds:
            with open(conf, "a") as f:
                inner = json.dumps({"accessKey": creds[0], "secretKey": creds[1]})
                f.write(f"innerClientAuthenticationCredentials={inner}\n")
        return conf

    def start_broker(self, bid: int) -> None:
        self.start_brokers([bid])

    def start_brokers(self, bids: list[int]) -> None:
        """Start these brokers at once and wait for every one's boot line."""
        procs = {}
        for bid in bids:
            ns = self.netns.get(bid)
            procs[bid] = launch(["broker", "-c", str(self.broker_conf(bid))], self.root / f"b{bid}.log",
                                prefix=["ip", "netns", "exec", ns[0]] if ns else [])
        self.broker_procs.update(procs)        # stop() reaches them even if a boot line never comes
        for bid, proc in procs.items():
            self.broker_addrs[bid] = ready(proc, BROKER_BOOT, f"broker {bid}", self.root / f"b{bid}.log").group(1)

    def start(self, *, slaves: bool = True) -> LocalControlledCluster:
        self.etcd.start()
        ns_log = self.root / "ns.log"
        ns = launch(["namesrv", "--host", self.namesrv_host, "--port", "0", "--kv-config", str(self.root / "ns" / "kv")],
                    ns_log)
        procs = {i: launch(self._controller_args(0), self.root / f"controller{i}.log")
                 for i in range(self.n_controllers)}
        self.namesrv_proc = ns
        self.controller_procs.update(procs)
        self.namesrv = f"{self.namesrv_host}:{ready(ns, NAMESRV_BOOT, 'namesrv', ns_log).group(1)}"
        for i, proc in procs.items():
            self.controller_addrs[i] = ready(proc, CONTROLLER_BOOT, f"controller {i}",
                                             self.root / f"controller{i}.log").group(1)
        self.start_brokers([1])
        asyncio.run(until("broker 1 confirmed master", self._first_master_ready, BOOT_TIMEOUT_S))
        if slaves:
            self.start_brokers(list(range(2, self.n_brokers + 1)))
        return self

    async def _first_master_ready(self):
        info = await self.replica_info()
        return info.get("masterId") == 1 and not info["pending"] and await self.master_routed()

    def kill(self, proc: subprocess.Popen | None) -> None:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(STOP_TIMEOUT_S)

    def kill_broker(self, bid: int) -> None:
        self.kill(self.broker_procs.pop(bid, None))

    def kill_controller(self, i: int) -> None:
        self.kill(self.controller_procs.pop(i, None))

    def stop(self) -> dict[str, int | None]:
        """SIGTERM everything (brokers first); the exit codes of the brokers and controllers."""
        codes: dict[str, int | None] = {}
        groups = [("broker", self.broker_procs), ("controller", self.controller_procs),
                  ("namesrv", {0: self.namesrv_proc} if self.namesrv_proc else {})]
        for what, procs in groups:
            for i, p in procs.items():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for i, p in procs.items():
                try:
                    codes[f"{what}{i}"] = p.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    p.kill()
                    codes[f"{what}{i}"] = p.wait(10)
            procs.clear() if isinstance(procs, dict) else None
        self.etcd.stop()
        return codes

    def logs(self) -> list[Path]:
        return sorted(self.root.glob("*.log")) + sorted((self.root / "etcd").glob("*.log"))

    # -- state over the wire -----------------------------------------------------------------------

    async def metadata(self, addr: str) -> RemotingCommand:
        return await call(addr, RequestCode.CONTROLLER_GET_METADATA_INFO, credentials=self.credentials)

    async def active_controller(self) -> str | None:
        """The address the live controllers agree is active and that says so itself."""
        for addr in self.live_controller_addrs():
            try:
                r = await self.metadata(addr)
            except Exception:
                continue
            if r.ext_fields.get("isLeader") == "true":
                return addr
        return None

    def live_controller_addrs(self) -> list[str]:
        return [self.controller_addrs[i] for i, p in self.controller_procs.items() if p.poll() is None]

    async def replica_info(self) -> dict:
        """The broker set's state from the active controller ({} when none is active)."""
        addr = await self.active_controller()
        if addr is None:
            return {}
        r = await self.metadata(addr)
        sets = [s for s in json.loads(r.body or b"{}").get("brokerSets", []) if s["brokerName"] == self.broker_name]
        return sets[0] if sets else {}

    async def master_routed(self, topic: str = "TBW102") -> str | None:
        """The address the NameServer routes *topic*'s master (brokerId 0) of this set to."""
        from rocketq.common import fastjson
        r = await call(self.namesrv, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if r.code != 0 or not r.body:
            return None
        for b in fastjson.loads(r.body).get("brokerDatas", []):
            if b.get("brokerName") == self.broker_name:
                addrs = {str(k): v for k, v in (b.get("brokerAddrs") or {}).items()}
                return addrs.get("0")
        return None
