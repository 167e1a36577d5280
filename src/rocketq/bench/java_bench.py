"""``rocketq bench grpc --java`` (issue 16's numbers): Apache RocketMQ's Java clients against one
``rocketq serve`` serving both protocols, in the same run:

* over gRPC, ``rocketmq-client-java`` 5.0.8: ``Producer.send`` one at a time and ``sendAsync`` with
  ``ASYNC_WINDOW`` in flight; a SimpleConsumer receiving ``RECEIVE_BATCH`` at a time on
  ``RECEIVE_THREADS`` threads and acking every message (``ackAsync``, ``ASYNC_WINDOW`` in flight);
  a PushConsumer with the client's defaults;
* over remoting, ``rocketmq-client`` 5.3.3: ``DefaultMQProducer`` sync sends and async sends with
  ``ASYNC_WINDOW`` in flight; a ``DefaultLitePullConsumer`` pulling ``RECEIVE_BATCH`` at a time, then
  ``commitSync`` (a pull consumer's acknowledgement is its committed offset); a
  ``DefaultMQPushConsumer`` with the client's defaults.

Each client line is one JVM (:mod:`rocketq.bench.java_clients`) kept for the whole benchmark; the
scenarios are in ``compat/java/*/BenchScenarios.java`` and time themselves with System.nanoTime. A
warm-up pass of every scenario runs first (JIT, class loading, the client's thread pools) on its own
topics, with ``min(WARMUP_N, n)`` messages. Each run then starts a fresh server, creates one topic per protocol (``TOPIC_QUEUES``
queues), and alternates the two clients scenario by scenario; the consumers read what the two sends
stored (``2 * (n + 1)`` messages: each send scenario makes one untimed send first), each consumer
with a fresh group. The CPU time (``/proc/<pid>/stat``) of the server and of the client's JVM over
each scenario gives their cost per message (the JVM's includes its JIT and GC threads). Rows are medians over the runs; the ratio is gRPC / remoting of the median rates.

``server="apache"`` runs the same scenarios, the same way, against Apache RocketMQ 5.3.3 instead
(:class:`ApacheServer`): its proxy in local mode serves gRPC, the broker inside that JVM serves
remoting, so the report gives Apache RocketMQ's own gRPC / remoting ratio to set beside rocketq's.
The server's CPU then counts the proxy's JVM and its NameServer's.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rocketq.bench.broker_bench import ServeProcess, _run
from rocketq.bench.java_clients import (
    BENCH_JVM,
    JavaRunner,
    JavaUnavailable,
    missing_java,
)

SERVERS = {"rocketq": "rocketq serve", "apache": "Apache RocketMQ 5.3.3, proxy in local mode (broker in its JVM)"}
APACHE_TRANSPORT = "apache-proxy"  # Apache's gRPC server (grpc-java on Netty) in place of rocketq's transports
# Apache's broker refuses a send that waited longer than waitTimeMillsInSendQueue (200 ms) in its queue
# (TIMEOUT_CLEAN_QUEUE): on 2 loaded cores the remoting client's 256 async sends meet it at once. rocketq's
# runs in BENCHMARKS.md set the same key to 2 s (ROCKETQ_WAITTIMEMILLSINSENDQUEUE); so does this one.
APACHE_SEND_QUEUE_WAIT_MS = 2000
GRPC = "gRPC: rocketmq-client-java 5.0.8"
REMOTING = "remoting: rocketmq-client 5.3.3"
ASYNC_WINDOW = 256                 # async sends (and acks) in flight
RECEIVE_BATCH = 32                 # messages per receive (gRPC) / per pull (remoting)
RECEIVE_THREADS = 4                # threads calling SimpleConsumer.receive
TOPIC_QUEUES = 8
WARMUP_N = 2000                    # messages per send scenario in the warm-up pass
SCENARIO_TIMEOUT_S = 900           # the longest one scenario may take (a loaded 2-core machine, big counts)
SEND_SYNC, SEND_ASYNC = "sync send", f"async send ({ASYNC_WINDOW} in flight)"
RECEIVE_ACK, PUSH = "receive + ack", "push consumer"
SCENARIOS = (SEND_SYNC, SEND_ASYNC, RECEIVE_ACK, PUSH)


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")      # utime + stime


class ApacheServer:
    """Apache RocketMQ's proxy in local mode beside its NameServer, shaped like :class:`ServeProcess`
    for the scenarios (``proc``, ``namesrv``, ``grpc_endpoint``; ``extra_pids``: the NameServer's JVM,
    whose CPU counts as the server's too)."""

    def __init__(self, root: Path):
        from rocketq.bench.compare.apache_grpc import ApacheRocketMQGrpc
        root.mkdir(parents=True)
        self.system = ApacheRocketMQGrpc(root)
        self.system.broker_settings = {"waitTimeMillsInSendQueue": str(APACHE_SEND_QUEUE_WAIT_MS)}

    def __enter__(self) -> ApacheServer:
        self.system.start()
        self.proc, self.namesrv, self.grpc_endpoint = self.system.proc, self.system.namesrv, self.system.endpoint
        self.extra_pids = [self.system.namesrv_proc.pid]
        return self

    def __exit__(self, *exc) -> None:
        self.system.stop()


def _server(server: str, root: Path, transport: str):
    if server == "apache":
        return ApacheServer(root)
    return ServeProcess(root, "--set", f"grpcTransport={transport}", grpc=True)


def _server_cpu_s(srv) -> float:
    return sum(_cpu_s(pid) for pid in (srv.proc.pid, *getattr(srv, "extra_pids", ())))


class _Clients:
    """The two JVMs and the requests of each scenario, by protocol."""

    def __init__(self, logdir: Path):
        self.grpc = JavaRunner("grpc", None, "rocketq.compat.grpc.GrpcRunner", logdir / "jvm-grpc", BENCH_JVM)
        self.remoting = JavaRunner("remoting", "rmq5", "rocketq.compat.Runner", logdir / "jvm-remoting", BENCH_JVM)

    def runner(self, protocol: str) -> JavaRunner:
        return self.grpc if protocol == GRPC else self.remoting

    def close(self) -> None:
        self.grpc.close()
        self.remoting.close()

    def scenario(self, name: str, protocol: str, srv: ServeProcess, topic: str, n: int, size: int,
                 group: str) -> dict:
        expect = 2 * (n + 1)
        if protocol == GRPC:
            runner, where = self.grpc, {"endpoint": srv.grpc_endpoint}
            consume = {RECEIVE_ACK: ("bench_simple", {"threads": RECEIVE_THREADS, "window": ASYNC_WINDOW}),
                       PUSH: ("bench_push", {})}
        else:
            runner, where = self.remoting, {"namesrv": srv.namesrv}
            consume = {RECEIVE_ACK: ("bench_lite", {}), PUSH: ("bench_push", {})}
        if name in (SEND_SYNC, SEND_ASYNC):
            window = 0 if name == SEND_SYNC else ASYNC_WINDOW
            return runner.run("bench_send", timeout_s=SCENARIO_TIMEOUT_S, topic=topic, n=n, size=size,
                              window=window, group=group, **where)
        what, extra = consume[name]
        return runner.run(what, timeout_s=SCENARIO_TIMEOUT_S, topic=topic, group=group, expect=expect,
                          batch=RECEIVE_BATCH, **extra, **where)


async def _create_topics(namesrv: str, *topics: str) -> None:
    from rocketq.client import Admin
    async with Admin(namesrv) as admin:
        for topic in topics:
            await admin.create_topic(topic, queues=TOPIC_QUEUES)


def _one_pass(clients: _Clients, srv: ServeProcess, tag: str, n: int, size: int,
              progress: Callable[[str], None]) -> dict[str, dict[str, dict]]:
    """Every scenario once for each protocol on *srv*: {scenario: {protocol: the scenario's report}}."""
    topics = {GRPC: f"JBG{tag}", REMOTING: f"JBR{tag}"}
    _run(_create_topics(srv.namesrv, *topics.values()))
    out: dict[str, dict[str, dict]] = {}
    for name in SCENARIOS:
        for protocol in (GRPC, REMOTING):
            progress(f"{tag}: {name}, {protocol.split(':')[0]}")
            group = f"JB_{tag}_{SCENARIOS.index(name)}_{protocol.split(':')[0]}"
            jvm = clients.runner(protocol)
            jvm.start()
            cpu0, jvm0 = _server_cpu_s(srv), _cpu_s(jvm.proc.pid)
            row = clients.scenario(name, protocol, srv, topics[protocol], n, size, group)
            row["serverCpuUsPerMsg"] = (_server_cpu_s(srv) - cpu0) / row["messages"] * 1e6
            row["clientCpuUsPerMsg"] = (_cpu_s(jvm.proc.pid) - jvm0) / row["messages"] * 1e6
            out.setdefault(name, {})[protocol] = row
    return out


def _summary(per_run: list[dict[str, dict[str, dict]]]) -> dict:
    rows: dict[str, dict[str, dict]] = {}
    for name in SCENARIOS:
        for protocol in (GRPC, REMOTING):
            reports = [r[name][protocol] for r in per_run]
            rates = [r["msgsPerS"] for r in reports]
            cell = {"msgs_per_s": [min(rates), statistics.median(rates), max(rates)],
                    "messages": reports[0]["messages"],
                    "server_cpu_us_per_msg": statistics.median(r["serverCpuUsPerMsg"] for r in reports),
                    "client_cpu_us_per_msg": statistics.median(r["clientCpuUsPerMsg"] for r in reports)}
            for key, src in (("p50_ms", "p50Ms"), ("p99_ms", "p99Ms")):
                if src in reports[0]:
                    cell[key] = statistics.median(r[src] for r in reports)
            rows.setdefault(name, {})[protocol] = cell
    ratios = {name: rows[name][GRPC]["msgs_per_s"][1] / rows[name][REMOTING]["msgs_per_s"][1] for name in rows}
    return {"clients": [GRPC, REMOTING], "rows": rows, "ratios": ratios, "runs": per_run}


def run_java_bench(*, runs: int = 3, n: int = 5000, size: int = 1024, warmup_n: int = WARMUP_N,
                   transports: tuple[str, ...] = ("grpcio",), server: str = "rocketq",
                   progress: Callable[[str], None] = lambda s: None) -> dict:
    """The report: ``rows[scenario][client]`` (msgs/s min / median / max, p50 / p99 ms, the server's CPU
    µs per message), ``ratios[scenario]`` and every run's raw reports. Raises :class:`JavaUnavailable`
    when java, Maven or the scenario sources are missing.

    *transports*: the gRPC endpoint's (grpcTransport); with several, each run serves each in turn (a
    fresh server each, both protocols measured on it) and ``by_transport`` holds a report for each; the
    top-level rows are the first one's. *server*: a key of ``SERVERS``; with ``"apache"`` the transports
    are Apache's own (``APACHE_TRANSPORT``)."""
    why = missing_java()
    if why:
        raise JavaUnavailable(why)
    if server not in SERVERS:
        raise ValueError(f"server {server!r}: expected one of {', '.join(SERVERS)}")
    if server == "apache":
        transports = (APACHE_TRANSPORT,)
    warmup_n = min(warmup_n, n)
    with tempfile.TemporaryDirectory(prefix="rocketq-javabench-") as tmp:
        progress("building the Java scenarios (first time: Maven downloads the clients)")
        clients = _Clients(Path(tmp))
        try:
            per_run: dict[str, list] = {t: [] for t in transports}
            for run in range(runs):
                for transport in transports:
                    root = Path(tmp) / f"r{run}-{transport}"
                    with _server(server, root, transport) as srv:
                        if run == 0 and warmup_n and transport == transports[0]:
                            _one_pass(clients, srv, "warmup", warmup_n, size, lambda s: progress(f"warm-up {s}"))
                        tag = f"run{run + 1}x{time.monotonic_ns() % 100_000}"
                        per_run[transport].append(_one_pass(
                            clients, srv, tag, n, size,
                            lambda s, run=run, t=transport: progress(f"run {run + 1}/{runs} [{t}] {s}")))
        finally:
            clients.close()
    report = dict(_summary(per_run[transports[0]]), server=SERVERS[server])
    if len(transports) > 1:
        report["by_transport"] = {t: _summary(per_run[t]) for t in transports}
    return report
