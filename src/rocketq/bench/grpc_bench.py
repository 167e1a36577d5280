"""The gRPC benchmark (issue 4's numbers): one ``rocketq serve`` process serving both protocols; in
the same run, 1 KiB messages

* sent one at a time, and 256 at a time in flight (``send_async``), by the official RocketMQ 5 Python
  client over gRPC, and received + acked with its SimpleConsumer: the next ``receive_async`` is in
  flight while the previous batch is acked, each message with the client's blocking ``ack`` on a
  pool of threads, and the clock stops when the last ack has answered (how the client is driven
  lives in :mod:`rocketq.bench.official_client`, shared with ``rocketq bench compare``);
* sent one at a time and 256 in flight by rocketq's own client over the remoting protocol, and read
  + committed with its LitePullConsumer (background pulls), the clock stopping after the commit;

and the ratio gRPC / remoting for each (the issue asks for gRPC within 2x of remoting).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rocketq.bench import official_client as oc
from rocketq.bench.broker_bench import ServeProcess, _run, _sends


def _grpc_rates(endpoint: str, topic: str, n: int, body: bytes) -> dict[str, float]:
    p = oc.started_producer(endpoint, topic)             # one send made: the route is warm
    try:
        sync = n / sum(oc.send_each(p, topic, body, n))
        t0 = time.perf_counter()
        oc.send_windowed(p, topic, body, n, oc.ASYNC_WINDOW)
        async_rate = n / (time.perf_counter() - t0)
    finally:
        p.shutdown()
    c = oc.started_consumer(endpoint, f"GBENCH{time.monotonic_ns()}", topic)
    try:
        got, secs = oc.receive_and_ack(c, 2 * n + 1)
    finally:
        c.shutdown()
    return {"sync send": sync, "async send": async_rate, "receive + ack": got / secs}


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
    await c.commit()                                  # the acknowledgement of a pull consumer
    rate = got / (time.perf_counter() - t0)
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
