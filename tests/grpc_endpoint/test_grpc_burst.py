"""A burst of calls while the broker's event loop is busy (issue 24 item 3): grpc holds the calls
the server has not picked up yet, and by default drops some of them (CANCELLED) once more than
1,000 wait; the endpoint lets many more wait."""

import threading
import time
from collections import Counter

from grpc_helpers import ServerThread, client_config, message, shutdown_within, wait_until
from test_grpc_push import drained

from rocketq.grpc_endpoint import EndpointSettings

BURST = 2_500
LOOP_BUSY_S = 2.0


def test_a_burst_during_a_busy_loop_is_served_without_cancelling(tmp_path):
    from rocketmq import ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener
    from rocketmq import Producer, PushConsumer
    server = ServerThread(tmp_path, endpoint_settings=EndpointSettings(default_long_polling_ms=2000)).start()
    seen: Counter = Counter()
    lock = threading.Lock()

    class Count(MessageListener):
        def consume(self, msg):
            with lock:
                seen[msg.message_id] += 1
            return ConsumeResult.SUCCESS

    consumer = None
    try:
        server.create_topic("Burst")
        consumer = PushConsumer(client_config(server), "GBurst", Count(), {"Burst": FilterExpression("*")})
        consumer.startup()
        # a deadline the calls cannot miss here: what is tested is grpc's drop of waiting calls
        p = Producer(ClientConfiguration(server.access_point, Credentials(), request_timeout=60), ("Burst",))
        p.startup()
        try:
            p.send(message("Burst", b"warm"))
            server.loop.call_soon_threadsafe(time.sleep, LOOP_BUSY_S)        # the loop is busy elsewhere
            futures = [p.send_async(message("Burst", b"x" * 512)) for _ in range(BURST)]
            errors: Counter = Counter()
            ids = set()
            for f in futures:
                try:
                    ids.add(f.result(120).message_id)
                except Exception as exc:          # noqa: BLE001 - counted
                    errors[str(getattr(exc, "code", lambda: type(exc).__name__)())] += 1
        finally:
            p.shutdown()
        assert not errors, f"{sum(errors.values())} of {BURST} sends failed: {dict(errors)}"
        wait_until(lambda: ids <= set(seen), timeout_s=60, what="every message at the consumer")
        wait_until(lambda: drained(server, "GBurst"), what="every message acked")
        with lock:
            assert [i for i, n in seen.items() if n > 1] == []
    finally:
        if consumer is not None:
            shutdown_within(consumer)
        server.shutdown()
