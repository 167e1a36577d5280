"""The gRPC benchmark (issue 4's numbers): one ``rocketq serve`` process serving both protocols; in
the same run, 1 KiB messages

* sent one at a time, and 256 at a time in flight (``send_async``), by the official RocketMQ 5 Python
  client over gRPC, and received + acked with its SimpleConsumer;
* sent one at a time and 256 in flight by rocketq's own client over the remoting protocol, and read
  + committed with its LitePullConsumer;

and the ratio gRPC / remoting for each (the issue asks for gRPC within 2x of remoting).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rocketq.bench.broker_bench import ServeProcess, _run, _sends

ASYNC_WINDOW = 256


def _grpc_rates(endpoint: str, topic: str, n: int, body: bytes) -> dict[str, float]:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
    cfg = ClientConfiguration(endpoint, Credentials(), request_timeout=10)

    def msg():
        m = Message()
        m.topic, m.body = topic, body
        return m
    p = Producer(cfg, (topic,))
    p.startup()
    try:
        p.send(msg())
        t0 = time.perf_counter()
        for _ in range(n):
            p.send(msg())
        sync = n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for start in range(0, n, ASYNC_WINDOW):          # with thousands in flight grpc cancels calls
            futures = [p.send_async(msg()) for _ in range(min(ASYNC_WINDOW, n - start))]
            for f in futures:
                f.result(timeout=60)
        async_rate = n / (time.perf_counter() - t0)
    finally:
        p.shutdown()
    c = SimpleConsumer(cfg, f"GBENCH{time.monotonic_ns()}", {topic: FilterExpression("*")}, await_duration=2)
    c.startup()
    try:
        got, t0 = 0, time.perf_counter()
        deadline = time.monotonic() + 120
        while got < 2 * n + 1 and time.monotonic() < deadline:
            msgs = c.receive(32, 30)
            for m in msgs:
                c.ack(m)
            got += len(msgs)
        receive = got / (time.perf_counter() - t0)
    finally:
        c.shutdown()
    return {"sync send": sync, "async send": async_rate, "receive + ack": receive}


async def _remoting_rates(namesrv: str, topic: str, n: int, body: bytes) -> dict[str, float]:
    from rocketq.client import ConsumeFrom, LitePullConsumer
    sync, _ = await _sends(namesrv, topic, n, len(body), 1, 0)
    inflight, _ = await _sends(namesrv, topic, n, len(body), 256, 0)
    c = LitePullConsumer(f"RBENCH{time.monotonic_ns()}", namesrv, consume_from=ConsumeFrom.FIRST)
    c.subscribe(topic)
    await c.start()
    got, t0 = 0, time.perf_counter()
    while got < 2 * n:
        msgs = await c.poll(2.0)
        if not msgs:
            break
        got += len(msgs)
    rate = got / (time.perf_counter() - t0)
    await c.commit()
    await c.shutdown()
    return {"sync send": sync, "async send": inflight, "receive + ack": rate}


def run_grpc_bench(*, runs: int = 3, n: int = 3000, progress: Callable[[str], None] = lambda s: None) -> dict:
    body = b"g" * 1024
    rows: dict[str, dict[str, list[float]]] = {"gRPC (rocketmq-python-client 5.1.2)": {}, "remoting (rocketq client)": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(runs):
            with ServeProcess(Path(tmp) / f"r{run}", grpc=True) as srv:
                progress(f"run {run + 1}/{runs}: gRPC")
                for k, v in _grpc_rates(srv.grpc_endpoint, f"G{run}", n, body).items():
                    rows["gRPC (rocketmq-python-client 5.1.2)"].setdefault(k, []).append(v)
                progress(f"run {run + 1}/{runs}: remoting")
                for k, v in _run(_remoting_rates(srv.namesrv, f"R{run}", n, body)).items():
                    rows["remoting (rocketq client)"].setdefault(k, []).append(v)
    out = {path: {k: [min(v), statistics.median(v), max(v)] for k, v in m.items()} for path, m in rows.items()}
    g, r = out["gRPC (rocketmq-python-client 5.1.2)"], out["remoting (rocketq client)"]
    out["ratio gRPC / remoting (medians)"] = {k: g[k][1] / r[k][1] for k in g if r.get(k)}
    return out
