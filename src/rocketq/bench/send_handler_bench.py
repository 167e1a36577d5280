"""The broker's per-request send cost, in process: SEND_MESSAGE_V2 frames decoded and handled.

``python -m rocketq.bench.send_handler_bench [--messages N] [--rounds R] [--body BYTES]``

A broker is started on a temporary store (ASYNC_FLUSH, port 0); one encoded SEND_MESSAGE_V2 frame
is fed through the frame decoder and the broker's request entry point N times per round, with no
socket in between, so what is timed is the Python work per request (header decoding, the send
handler, the store's put, the counters of :mod:`rocketq.broker.stats`, and the dispatch to the consume
queue and index, which runs on the same loop every ``YIELD_EVERY`` requests).  Prints the best and the
median round in microseconds per request, of wall-clock time and of the process's CPU time (all its
threads: the steadier figure on a shared machine), with the load average before the rounds.  It uses only what existed before the metrics did, so
the same script times an older checkout (``PYTHONPATH=<old>/src``): that is how the metrics'
counting cost was measured (BENCHMARKS.md, "Metrics").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.remoting import RemotingCommand, RequestCode
from rocketq.remoting.codec import FrameDecoder, encode
from rocketq.store import StoreConfig


YIELD_EVERY = 64                    # requests between two turns of the event loop


class _Conn:
    """What the handlers read of a connection: a context dict, the peer, close callbacks."""

    peer = "127.0.0.1:40000"
    peername = ("127.0.0.1", 40000)

    def __init__(self):
        self.context: dict = {}

    def on_close(self, callback) -> None:
        pass


def _frame(topic: str, body: bytes) -> bytes:
    cmd = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {
        "a": "PID_BENCH", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 1795336474369, "h": 0,
        "i": "KEYS\x01k\x02TAGS\x01t\x02", "j": 0, "k": False}, body)
    return encode(cmd)


async def _round(broker: Broker, frame: bytes, count: int) -> tuple[float, float]:
    """(wall-clock, process CPU) microseconds per request over *count* requests."""
    conn, decoder = _Conn(), FrameDecoder()
    handle = broker._handle
    started, cpu_started = time.perf_counter(), time.process_time()
    for i in range(count):
        if i % YIELD_EVERY == 0:
            await asyncio.sleep(0)      # the dispatcher drains on this loop: its share is in the figure too
        decoder.receive_data(frame)
        response = await handle(conn, decoder.next_command())
        if response.code != 0:
            raise RuntimeError(f"send refused: {response.code} {response.remark}")
    return (time.perf_counter() - started) / count * 1e6, (time.process_time() - cpu_started) / count * 1e6


async def measure(messages: int, rounds: int, body_bytes: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cfg = StoreConfig(store_path=Path(tmp), commitlog_file_size=256 << 20, consume_queue_entries=300_000,
                          index_slots=100_003, index_max_entries=400_000)
        broker = await Broker(BrokerSettings(port=0), cfg).start()
        load = os.getloadavg()[0]
        try:
            frame = _frame("BenchTopic", b"x" * body_bytes)
            await _round(broker, frame, 1000)                     # warm-up: topic creation, caches
            per_request = [await _round(broker, frame, messages) for _ in range(rounds)]
        finally:
            await broker.close()
    wall, cpu = [w for w, _ in per_request], [c for _, c in per_request]
    return {"messages_per_round": messages, "rounds": rounds, "body_bytes": body_bytes,
            "best_us": round(min(wall), 2), "median_us": round(statistics.median(wall), 2),
            "best_cpu_us": round(min(cpu), 2), "median_cpu_us": round(statistics.median(cpu), 2),
            "load_before": round(load, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--body", type=int, default=1024)
    args = ap.parse_args()
    print(json.dumps(asyncio.run(measure(args.messages, args.rounds, args.body))))


if __name__ == "__main__":
    main()
