"""The official Python 5.x PushConsumer against rocketq with failing listeners (issue 21)."""

import random
import threading
from collections import defaultdict

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
