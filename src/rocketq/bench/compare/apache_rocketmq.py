"""Apache RocketMQ 5.3.3 (the system rocketq re-implements) as a :class:`System`: a NameServer and a
broker JVM started from the jars Maven resolved (:mod:`.jars`), driven by rocketq's own Python
client over the same remoting protocol as the ``rocketq (remoting)`` row, and by the suite's Java
load tool (:mod:`.rmq_tools`) with the same flags against both.

Launch: ``org.apache.rocketmq.namesrv.NamesrvStartup -c namesrv.conf`` and
``org.apache.rocketmq.broker.BrokerStartup -c broker.conf`` with the installed JDK, ``ROCKETMQ_HOME``
and ``user.home`` in the system's temporary directory (logs land in ``<root>/logs``), stores under
``<root>/store``, listeners bound to 127.0.0.1 (``bindAddress``; the broker's HA listener on
``listenPort + 1`` has no bind option and listens on every interface while the run lasts). The JVM
flags are runserver.sh's / runbroker.sh's G1 settings, minus what JDK 17 refuses
(``-XX:-UseBiasedLocking``, ``-Djava.ext.dirs``) and with heaps fit for 2 cores / 24 GiB: NameServer
256 MiB, broker 1 GiB (runbroker.sh's default is 8 GiB) with 2 GiB of direct memory. Stopped by pid
(SIGTERM, then SIGKILL).

Durability: ``flushDiskType`` ASYNC_FLUSH (the commit log is flushed every 500 ms, the same as
rocketq's default) or SYNC_FLUSH (GroupCommitService: the send is answered after the force), checked
by counting sync calls like every other system. The gRPC row (the proxy in local mode, the broker
inside it) subclasses this one: :mod:`.apache_grpc`, through :meth:`ApacheRocketMQ.server_command`.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from rocketq.bench.compare.peers import free_port
from rocketq.bench.compare.rocketq_remoting import Rocketq

VERSION = "5.3.3"
PROJECT = "rocketmq"
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
CLUSTER, BROKER_NAME = "BenchCluster", "bench-broker"
# runserver.sh / runbroker.sh (JDK 9+ branch) with smaller heaps; the GC log flags are left out
_G1 = ("-XX:+UseG1GC", "-XX:G1HeapRegionSize=16m", "-XX:G1ReservePercent=25",
       "-XX:InitiatingHeapOccupancyPercent=30", "-XX:SoftRefLRUPolicyMSPerMB=0", "-XX:-OmitStackTraceInFastThrow")
NAMESRV_JVM = ("-server", "-Xms256m", "-Xmx256m", "-XX:MetaspaceSize=128m", "-XX:MaxMetaspaceSize=320m", *_G1)
BROKER_JVM = ("-server", "-Xms1g", "-Xmx1g", *_G1, "-XX:+AlwaysPreTouch", "-XX:MaxDirectMemorySize=2g",
              "-XX:-UseLargePages")
START_TIMEOUT_S = 180.0             # the broker's init takes ~30 s on 2 busy cores (timer wheel, stores, JIT)
REGISTER_TIMEOUT_S = 60.0           # the broker registers with the NameServer a moment after its port opens
STOP_TIMEOUT_S = 30.0
PORT_POLL_S = 0.1
START_ATTEMPTS = 3                  # starts tried when a port picked free was taken before the JVM bound it


def namesrv_conf(port: int) -> str:
    return f"listenPort={port}\nbindAddress=127.0.0.1\n"


def broker_conf(root: Path, namesrv_port: int, port: int, sync: bool, more: dict[str, str] | None = None) -> str:
    """broker.conf: one master on loopback, its store under *root*, topics created on first send; *more*:
    further keys (a benchmark's own settings)."""
    store = root / "store"
    return "\n".join([*(f"{k}={v}" for k, v in (more or {}).items()),
        f"brokerClusterName={CLUSTER}", f"brokerName={BROKER_NAME}", "brokerId=0", "brokerRole=ASYNC_MASTER",
        f"namesrvAddr=127.0.0.1:{namesrv_port}", "brokerIP1=127.0.0.1", "bindAddress=127.0.0.1",
        f"listenPort={port}", f"haListenPort={port + 1}",
        f"storePathRootDir={store}", f"storePathCommitLog={store / 'commitlog'}",
        f"flushDiskType={'SYNC_FLUSH' if sync else 'ASYNC_FLUSH'}",
        "autoCreateTopicEnable=true", "autoCreateSubscriptionGroup=true", ""])


def command(classpath: str, main: str, jvm: tuple[str, ...], root: Path, conf: Path) -> list[str]:
    return ["java", *jvm, f"-Duser.home={root}", f"-Drocketmq.home.dir={root}", "-cp", classpath, main,
            "-c", str(conf)]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def broker_port() -> int:
    """A free port whose neighbours the broker also takes are free: listenPort - 2 (the "fast"
    remoting server) and listenPort + 1 (HA)."""
    for _ in range(100):
        port = free_port()
        if 1026 < port < 65534 and _port_free(port - 2) and _port_free(port + 1):
            return port
    raise RuntimeError("no free port with free neighbours for the Apache RocketMQ broker")


async def _registered(namesrv: str, timeout_s: float) -> None:
    from rocketq.client import Admin
    deadline = time.monotonic() + timeout_s
    async with Admin(namesrv) as admin:
        while time.monotonic() < deadline:
            try:
                if await admin.brokers():
                    return
            except Exception:            # the NameServer answers "no cluster" until the first registration
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"the Apache RocketMQ broker did not register with {namesrv} in {timeout_s:g} s")


class ApacheRocketMQ(Rocketq):
    name = "Apache RocketMQ (remoting)"
    durability = {"async": "ASYNC_FLUSH: page cache, commit log flushed every 500 ms",
                  "sync": "SYNC_FLUSH: GroupCommitService forces the commit log before the ack"}
    version = VERSION
    broker_settings: dict[str, str] | None = None      # more broker.conf keys; the compare rows run its defaults
    notes = (f"Apache RocketMQ {VERSION} NameServer + broker (JDK 17, broker heap 1 GiB), driven by rocketq's "
             "Python client over remoting exactly as the rocketq (remoting) row")

    @classmethod
    def available(cls):
        from rocketq.bench.compare import jars
        return jars.unavailable(PROJECT)

    def start(self) -> None:
        """NameServer and broker (or proxy) on free ports. A port picked free can be taken before the JVM
        binds it (any process's outgoing connection may get it), so a start that fails with "Address
        already in use" is tried again on new ports, ``START_ATTEMPTS`` times in all."""
        for attempt in range(1, START_ATTEMPTS + 1):
            try:
                return self._start_once()
            except RuntimeError as e:
                if "Address already in use" not in str(e) or attempt == START_ATTEMPTS:
                    raise

    def _start_once(self) -> None:
        from rocketq.bench.compare import jars
        classpath = jars.build(PROJECT)
        r = self.root
        ns_port, port = free_port(), broker_port()
        self.namesrv, self.broker_port = f"127.0.0.1:{ns_port}", port
        (r / "namesrv.conf").write_text(namesrv_conf(ns_port))
        (r / "broker.conf").write_text(broker_conf(r, ns_port, port, self.sync, self.broker_settings))
        server = self.server_command(classpath, r / "broker.conf")         # before any JVM starts: it may raise
        env = dict(os.environ, ROCKETMQ_HOME=str(r))
        self._out = open(r / "jvm.out", "ab")
        self.namesrv_proc = subprocess.Popen(command(classpath, NAMESRV_MAIN, NAMESRV_JVM, r, r / "namesrv.conf"),
                                             stdout=self._out, stderr=subprocess.STDOUT, env=env, cwd=r)
        self.proc = subprocess.Popen(server, stdout=self._out, stderr=subprocess.STDOUT, env=env, cwd=r)
        try:
            self._wait_listening((ns_port, port, *self.more_ports()))
            asyncio.run(_registered(self.namesrv, REGISTER_TIMEOUT_S))
        except BaseException:
            self.stop()
            raise
        self._topic = f"T{time.monotonic_ns()}"

    def _wait_listening(self, ports: tuple[int, ...]) -> None:
        """Until every port listens; a JVM that exits first fails at once, quoting its output."""
        deadline = time.monotonic() + START_TIMEOUT_S
        for port in ports:
            while not _listening(port):
                exited = [p for p in (self.namesrv_proc, self.proc) if p.poll() is not None]
                if exited or time.monotonic() > deadline:
                    said = (self.root / "jvm.out").read_text(errors="replace")[-1500:]
                    why = f"a JVM exited ({exited[0].returncode})" if exited else f"not in {START_TIMEOUT_S:g} s"
                    raise RuntimeError(f"Apache RocketMQ did not listen on port {port}: {why}\n{said}")
                time.sleep(PORT_POLL_S)

    def server_command(self, classpath: str, broker_conf_path: Path) -> list[str]:
        """The JVM that serves the broker (the gRPC row runs the proxy with the broker inside)."""
        return command(classpath, BROKER_MAIN, BROKER_JVM, self.root, broker_conf_path)

    def more_ports(self) -> tuple[int, ...]:
        """Ports besides the NameServer's and the broker's that must listen before ``start`` returns."""
        return ()

    def stop(self) -> None:
        for proc in (self.proc, getattr(self, "namesrv_proc", None)):        # broker first: it unregisters
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        if getattr(self, "_out", None):
            self._out.close()

    def pids(self) -> list[int]:
        return [self.proc.pid, self.namesrv_proc.pid]
