"""The gRPC endpoint's server CPU per unary call, for each transport (grpcTransport), in one run.

``python -m rocketq.bench.grpc_call_cost [--calls N] [--window W] [--runs R] [--transports T,...] [--tls]`` starts a
``rocketq serve`` per transport and run (alternating, so a noisy machine weighs on both alike), sends N Heartbeat calls
(the cheapest handler: what is measured is mostly the transport) keeping W in flight from one grpc
channel, and prints the server process's CPU time (``/proc/<pid>/stat`` utime + stime) per call (and
the part of it spent on the native transport's HTTP/2 thread) and the calls per second, as JSON lines
and a summary of medians.  ``--tls``: the servers run with ``tlsMode=enforcing`` and a throwaway
self-signed certificate (made with the ``openssl`` command), the channel is TLS.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from rocketq.bench.broker_bench import ServeProcess
from rocketq.bench.java_bench import _cpu_s

NATIVE_THREAD = "rocketq-grpc"      # the native transport's HTTP/2 thread (its name in /proc)


def _thread_cpu_s(pid: int, name: str) -> float:
    """CPU seconds of *pid*'s threads called *name*."""
    total = 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            if (task / "comm").read_text().strip() == name:
                total += _task_cpu_s(task)
        except OSError:
            continue                                  # the thread ended meanwhile
    return total


def _task_cpu_s(task: Path) -> float:
    fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

TRANSPORTS = ("grpcio", "native")
HEARTBEAT = "/apache.rocketmq.v2.MessagingService/Heartbeat"


def _self_signed(directory: Path) -> tuple[Path, Path]:
    """A P-256 certificate for 127.0.0.1 and its key, valid for a day: (cert.pem, key.pem)."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-days", "1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key


def _calls(endpoint: str, n: int, window: int, ca: bytes | None = None) -> float:
    """Seconds for *n* Heartbeat calls with *window* in flight."""
    import grpc

    from rocketq.grpc_endpoint.protocol import pb, spb
    body = spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER).SerializeToString()
    md = (("x-mq-client-id", "call-cost-bench"),)
    slots = threading.Semaphore(window)
    done = threading.Event()
    left = [n]
    lock = threading.Lock()

    def finished(fut) -> None:
        fut.result()                                # a failed call is an error of the benchmark
        slots.release()
        with lock:
            left[0] -= 1
            if left[0] == 0:
                done.set()
    with (grpc.insecure_channel(endpoint) if ca is None
          else grpc.secure_channel(endpoint, grpc.ssl_channel_credentials(ca))) as ch:
        call = ch.unary_unary(HEARTBEAT)
        call(body, metadata=md, timeout=10)          # connected before the clock starts
        started = time.perf_counter()
        for _ in range(n):
            slots.acquire()
            call.future(body, metadata=md, timeout=30).add_done_callback(finished)
        done.wait(600)
        return time.perf_counter() - started


def run(calls: int, window: int, runs: int, transports: tuple[str, ...] = TRANSPORTS, tls: bool = False) -> dict:
    out: dict[str, list[dict]] = {t: [] for t in transports}
    with tempfile.TemporaryDirectory(prefix="rocketq-callcost-") as tmp:
        extra, ca = [], None
        if tls:
            cert, key = _self_signed(Path(tmp))
            extra, ca = ["--set", "tlsMode=enforcing", "--set", f"tls.server.certPath={cert}",
                         "--set", f"tls.server.keyPath={key}"], cert.read_bytes()
        for r in range(runs):
            for t in transports:
                with ServeProcess(Path(tmp) / f"{t}{r}", "--set", f"grpcTransport={t}", *extra, grpc=True) as srv:
                    _calls(srv.grpc_endpoint, min(calls, 2000), window, ca)          # warm-up
                    cpu0, h2_0 = _cpu_s(srv.proc.pid), _thread_cpu_s(srv.proc.pid, NATIVE_THREAD)
                    secs = _calls(srv.grpc_endpoint, calls, window, ca)
                    cpu = _cpu_s(srv.proc.pid) - cpu0
                    h2 = _thread_cpu_s(srv.proc.pid, NATIVE_THREAD) - h2_0
                row = {"transport": t, "tls": tls, "run": r + 1, "calls": calls, "window": window,
                       "server_cpu_us_per_call": round(cpu / calls * 1e6, 1),
                       "of_which_native_http2_thread_us": round(h2 / calls * 1e6, 1),
                       "calls_per_s": round(calls / secs)}
                print(json.dumps(row), flush=True)
                out[t].append(row)
    keys = ("server_cpu_us_per_call", "of_which_native_http2_thread_us", "calls_per_s")
    return {t: {k: statistics.median(x[k] for x in rows) for k in keys} for t, rows in out.items()}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=20_000)
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--transports", default=",".join(TRANSPORTS), help="comma-separated, of: " + ", ".join(TRANSPORTS))
    ap.add_argument("--tls", action="store_true", help="tlsMode=enforcing and a TLS channel")
    a = ap.parse_args(argv)
    transports = tuple(t for t in a.transports.split(",") if t)
    unknown = [t for t in transports if t not in TRANSPORTS]
    if unknown or not transports:
        ap.error(f"--transports {a.transports!r}: each must be one of {', '.join(TRANSPORTS)}")
    print(json.dumps({"medians": run(a.calls, a.window, a.runs, transports, a.tls)}), flush=True)


if __name__ == "__main__":
    main()
