"""The official Python 5.x PushConsumer against rocketq: failing listeners (issue 21), consumers that
are killed (issue 24)."""

import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

from grpc_helpers import ServerThread, client_config, message, shutdown_within, wait_until

from rocketq.grpc_endpoint import EndpointSettings


def test_push_consumer_nacks_with_the_settings_backoff_and_does_not_stall(tmp_path):
    """The settings tell push consumers a backoff starting at 1 s; the endpoint must accept that
    nack although a receive may not ask for less than 10 s (RocketMQ's proxy does the same)."""
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, Producer, PushConsumer
    seed = random.randrange(1 << 30)
    print("seed", seed)
    rng = random.Random(seed)
    count = 50
    fails = {i: rng.choice((2, 3)) for i in rng.sample(range(count), 12)}      # body index -> failures first
    # the receive minimum stays RocketMQ's 10 s; short delay levels keep the retries quick
    server = ServerThread(tmp_path, endpoint_settings=EndpointSettings(default_invisible_ms=5000,
                                                                       default_long_polling_ms=3000),
                          store_settings={"message_delay_level": "1s 1s 1s 1m"}).start()
    attempts: dict[int, list[int]] = defaultdict(list)
    lock = threading.Lock()

    class Flaky(MessageListener):
        def consume(self, msg):
            i = int(msg.body)
            with lock:
                attempts[i].append(msg.delivery_attempt)
                seen = len(attempts[i])
            return ConsumeResult.FAILURE if seen <= fails.get(i, 0) else ConsumeResult.SUCCESS

    try:
        server.create_topic("Flaky")
        consumer = PushConsumer(client_config(server), "GFlakyPush", Flaky(), {"Flaky": FilterExpression("*")})
        consumer.startup()
        try:
            p = Producer(client_config(server), ("Flaky",))
            p.startup()
            try:
                for i in range(count):
                    p.send(message("Flaky", str(i).encode()))
            finally:
                p.shutdown()

            def all_done():
                with lock:
                    return all(len(attempts[i]) == fails.get(i, 0) + 1 for i in range(count))
            wait_until(all_done, timeout_s=40, what=f"each of {count} messages consumed after its failures ({len(fails)} fail first)")
            wait_until(lambda: drained(server, "GFlakyPush"), what="every message acked, no retry pending")
        finally:
            shutdown_within(consumer)
        with lock:
            assert {i: a for i, a in attempts.items()} == {i: list(range(1, fails.get(i, 0) + 2))
                                                            for i in range(count)}
    finally:
        server.shutdown()


def drained(server, group: str) -> bool:
    """Nothing of *group* in flight and every queue it pops (retry topic too) read to its end:
    nothing can be delivered to it any more."""
    def check():
        store = server.broker.store
        keys = [(k, q) for k, q in server.endpoint.pop_state.queues.items() if k.group == group]
        return bool(keys) and all(not q.inflight and q.next_offset >= store.max_offset(k.topic, k.queue_id)
                                  for k, q in keys)
    return server.call(check)


class Worker:
    """push_worker.py in a subprocess; its output lines collected on a thread."""

    def __init__(self, server, group: str, topic: str, mode: str):
        self.lines: list[str] = []
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("push_worker.py")),
                                      server.access_point, group, topic, mode],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.strip())

    def got(self) -> list[str]:
        return [line.split()[1] for line in list(self.lines) if line.startswith("got ")]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def test_messages_of_a_killed_push_consumer_reach_the_other_within_seconds(tmp_path):
    """RocketMQ's proxy gives a gone client's messages back after invisibleTimeMillisWhenClear
    (1 s), not after the rest of their invisible time (here 40 s, the test's limit is 10 s)."""
    from rocketmq import ConsumeResult, FilterExpression, MessageListener, Producer, PushConsumer
    server = ServerThread(tmp_path, endpoint_settings=EndpointSettings(default_invisible_ms=40_000,
                                                                       default_long_polling_ms=3000)).start()
    victim = None
    try:
        server.create_topic("Jobs")
        victim = Worker(server, "GJobs", "Jobs", "hold")
        wait_until(lambda: "ready" in victim.lines, timeout_s=30, what="the victim consumer")
        p = Producer(client_config(server), ("Jobs",))
        p.startup()
        try:
            bodies = {f"job-{i}" for i in range(8)}
            for b in sorted(bodies):
                p.send(message("Jobs", b.encode()))
        finally:
            p.shutdown()
        wait_until(lambda: set(victim.got()) == bodies, what="the victim holding every message")
        seen: list[tuple[str, int]] = []

        class Survivor(MessageListener):
            def consume(self, msg):
                seen.append((msg.body.decode(), msg.delivery_attempt))
                return ConsumeResult.SUCCESS

        survivor = PushConsumer(client_config(server), "GJobs", Survivor(), {"Jobs": FilterExpression("*")})
        survivor.startup()
        try:
            victim.kill()
            killed = time.monotonic()
            wait_until(lambda: {b for b, _ in seen} == bodies, timeout_s=10,
                       what="the killed consumer's messages at the other consumer")
            print(f"at the survivor {time.monotonic() - killed:.1f} s after the kill")
            wait_until(lambda: drained(server, "GJobs"), what="every message acked")
        finally:
            shutdown_within(survivor)
        assert sorted(seen) == sorted((b, 2) for b in bodies)      # each once more, as its second attempt
    finally:
        if victim is not None:
            victim.kill()
        server.shutdown()
