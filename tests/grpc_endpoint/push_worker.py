"""A PushConsumer of the official 5.x client in a process of its own, for tests that kill it.

    python push_worker.py ACCESS_POINT GROUP TOPIC hold|ack

Prints ``ready`` once started, then ``got <body> <delivery attempt>`` for every delivery (flushed
at once). ``hold`` never returns from the listener (a consumer busy with its messages when it is
killed); ``ack`` consumes successfully.
"""

import sys
import threading

from rocketmq import ClientConfiguration, ConsumeResult, Credentials, FilterExpression, MessageListener, PushConsumer

HOLD_LIMIT_S = 600          # a held listener gives up eventually, so a forgotten worker ends


def main(access_point: str, group: str, topic: str, mode: str) -> None:
    out_lock = threading.Lock()
    forever = threading.Event()

    class Listener(MessageListener):
        def consume(self, msg):
            with out_lock:
                print(f"got {msg.body.decode()} {msg.delivery_attempt}", flush=True)
            if mode == "hold":
                forever.wait(HOLD_LIMIT_S)
            return ConsumeResult.SUCCESS

    cfg = ClientConfiguration(access_point, Credentials(), request_timeout=5)
    consumer = PushConsumer(cfg, group, Listener(), {topic: FilterExpression("*")})
    consumer.startup()
    print("ready", flush=True)
    sys.stdin.read()           # until the test closes our stdin (or kills us)
    consumer.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:5])
