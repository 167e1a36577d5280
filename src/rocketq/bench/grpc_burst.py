"""A burst against the gRPC endpoint (issue 24 item 3): several producer processes each fire
``send_async`` calls all at once while push consumers consume, with the official RocketMQ 5 Python
client; counts failed sends (by error), messages delivered twice, and the server's CPU.

    python -m rocketq.bench.grpc_burst --producers 4 --sends 1000 --consumers 2 [--endpoint HOST:PORT]

Without ``--endpoint`` it starts its own ``rocketq serve`` (loopback, temporary store) and
reports that process's CPU seconds per million sends.  Every client runs in a process of its own
(``--role`` is the internal entry point of those processes); producers start together on a line
from the orchestrator, after their route and a warm-up send.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BODY = b"b" * 1024
WAIT_S = 120.0                      # a burst not answered in this time counts as a hang


def _config(endpoint: str, timeout_s: int):
    from rocketmq import ClientConfiguration, Credentials
    return ClientConfiguration(endpoint, Credentials(), request_timeout=timeout_s)


def _producer_role(endpoint: str, topic: str, sends: int, timeout_s: int) -> None:
    from rocketmq import Message, Producer
    p = Producer(_config(endpoint, timeout_s), (topic,))
    p.startup()
    warm = Message()
    warm.topic, warm.body = topic, b"warm"
    p.send(warm)
    print("ready", flush=True)
    sys.stdin.readline()                             # go
    t0 = time.perf_counter()
    futures = []
    for i in range(sends):
        m = Message()
        m.topic, m.body = topic, BODY
        futures.append(p.send_async(m))
    errors: collections.Counter = collections.Counter()
    ids = []
    for f in futures:
        try:
            ids.append(f.result(WAIT_S).message_id)
        except Exception as exc:                     # noqa: BLE001 - counted by kind
            errors[_kind(exc)] += 1
    print(json.dumps({"ok": len(ids), "errors": errors, "secs": time.perf_counter() - t0, "ids": ids}), flush=True)
    p.shutdown()


def _kind(exc: Exception) -> str:
    text = f"{type(exc).__name__}: {exc}"
    for word in ("CANCELLED", "DEADLINE_EXCEEDED", "UNAVAILABLE", "RESOURCE_EXHAUSTED", "TOO_MANY_REQUESTS"):
        if word in text:
            return word
    return text[:120]


def _consumer_role(endpoint: str, topic: str, group: str, timeout_s: int) -> None:
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer
    lock = threading.Lock()

    class Record(MessageListener):
        def consume(self, msg):
            with lock:
                print(f"got {msg.message_id} {msg.delivery_attempt}", flush=True)
            return ConsumeResult.SUCCESS

    c = PushConsumer(_config(endpoint, timeout_s), group, Record(), {topic: FilterExpression("*")})
    c.startup()
    print("ready", flush=True)
    sys.stdin.readline()                             # stop
    c.shutdown()


class _Proc:
    def __init__(self, *args: str):
        self.p = subprocess.Popen([sys.executable, "-m", "rocketq.bench.grpc_burst", *args], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.p.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, pred, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if any(pred(x) for x in list(self.lines)):
                return True
            time.sleep(0.05)
        return False

    def say(self, line: str = "") -> None:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def close(self) -> None:
        try:
            self.say()
            self.p.wait(60)
        except Exception:                            # noqa: BLE001 - gone already, or hung
            self.p.kill()


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_burst(endpoint: str, *, producers: int, sends: int, consumers: int, timeout_s: int,
              server_pid: int | None = None) -> dict:
    topic, group = f"Burst{time.monotonic_ns()}", f"GBurst{time.monotonic_ns()}"
    cons = [_Proc("--role", "consumer", "--endpoint", endpoint, "--topic", topic, "--group", group,
                  "--timeout", str(timeout_s)) for _ in range(consumers)]
    prods = [_Proc("--role", "producer", "--endpoint", endpoint, "--topic", topic, "--sends", str(sends),
                   "--timeout", str(timeout_s)) for _ in range(producers)]
    try:
        for x in cons + prods:
            if not x.wait_for(lambda s: s == "ready", 60):
                raise RuntimeError("a client process did not start")
        cpu0 = _cpu_s(server_pid) if server_pid else None
        t0 = time.perf_counter()
        for p in prods:
            p.say("go")
        results = []
        for p in prods:
            if not p.wait_for(lambda s: s.startswith("{"), WAIT_S + 30):
                raise RuntimeError("a producer did not finish")
            results.append(json.loads(next(s for s in p.lines if s.startswith("{"))))
        burst_s = time.perf_counter() - t0
        cpu = (_cpu_s(server_pid) - cpu0) if server_pid else None
        sent = {i for r in results for i in r["ids"]}
        got: collections.Counter = collections.Counter()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            got = collections.Counter(s.split()[1] for c in cons for s in list(c.lines) if s.startswith("got "))
            if sent <= set(got) and time.monotonic() > t0 + 2:
                break
            time.sleep(0.2)
        time.sleep(2)                                # late duplicates (a retried ack) show up by now
        lines = [s.split() for c in cons for s in list(c.lines) if s.startswith("got ")]
        got = collections.Counter(w[1] for w in lines)
        redelivered = sum(1 for w in lines if w[2] != "1")
    finally:
        for x in prods + cons:
            x.close()
    errors: collections.Counter = collections.Counter()
    for r in results:
        errors.update(r["errors"])
    ok = sum(r["ok"] for r in results)
    return {"sends": producers * sends, "ok": ok, "failed": dict(errors), "burst_s": round(burst_s, 2),
            "sends_per_s": round(ok / burst_s), "delivered": len(set(got) & sent),
            # a duplicate is stored twice (a send retried after its deadline that had been stored) or
            # delivered again (delivery attempt > 1: an ack that did not arrive in time)
            "duplicates": sum(n - 1 for i, n in got.items() if n > 1 and i in sent), "redelivered": redelivered,
            "server_cpu_s": None if cpu is None else round(cpu, 2),
            "server_cpu_s_per_million_sends": None if cpu is None or not ok else round(cpu / ok * 1e6)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", choices=("producer", "consumer"))
    ap.add_argument("--endpoint")
    ap.add_argument("--topic")
    ap.add_argument("--group")
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--sends", type=int, default=1000)
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=3, help="the clients' request timeout, s (their default: 3)")
    ap.add_argument("--runs", type=int, default=1)
    a = ap.parse_args(argv)
    if a.role == "producer":
        return _producer_role(a.endpoint, a.topic, a.sends, a.timeout)
    if a.role == "consumer":
        return _consumer_role(a.endpoint, a.topic, a.group, a.timeout)
    kw = dict(producers=a.producers, sends=a.sends, consumers=a.consumers, timeout_s=a.timeout)
    if a.endpoint:
        for _ in range(a.runs):
            print(json.dumps(run_burst(a.endpoint, **kw)), flush=True)
        return
    from rocketq.bench.broker_bench import ServeProcess
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(a.runs):
            with ServeProcess(Path(tmp) / f"r{run}", grpc=True) as srv:
                print(json.dumps(run_burst(srv.grpc_endpoint, server_pid=srv.proc.pid, **kw)), flush=True)


if __name__ == "__main__":
    main()
