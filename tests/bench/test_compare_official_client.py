"""How the benchmarks drive the official RocketMQ 5 client (rocketq.bench.official_client), against
fakes of its Producer and SimpleConsumer: the send window is respected, failures surface, the
receive loop acks everything it got and stops once the backlog is drained."""

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from rocketq.bench import official_client as oc

pytest.importorskip("rocketmq")          # oc.message builds the client's own Message


class FakeProducer:
    """``send_async`` answered on another thread; records the most sends ever in flight."""

    def __init__(self, fail_at: int | None = None):
        self.pool = ThreadPoolExecutor(4)
        self.lock = threading.Lock()
        self.in_flight = self.most_in_flight = self.sent = 0
        self.fail_at = fail_at

    def send_async(self, message) -> Future:
        with self.lock:
            self.sent += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            number = self.sent
        f: Future = Future()

        def answer():
            with self.lock:
                self.in_flight -= 1
            if number == self.fail_at:
                f.set_exception(RuntimeError("broker said no"))
            else:
                f.set_result(number)
        self.pool.submit(answer)
        return f


def test_send_windowed_keeps_at_most_the_window_in_flight_and_times_every_send():
    p = FakeProducer()
    lat = oc.send_windowed(p, "T", b"x", 500, window=8)
    assert len(lat) == 500 and all(t >= 0 for t in lat)
    assert p.sent == 500 and p.most_in_flight <= 8


def test_a_failed_send_fails_the_benchmark():
    with pytest.raises(RuntimeError, match="broker said no"):
        oc.send_windowed(FakeProducer(fail_at=37), "T", b"x", 100, window=4)


class FakeConsumer:
    """A backlog handed out ``RECEIVE_BATCH`` at a time, then empty receives."""

    def __init__(self, backlog: int):
        self.left, self.acked, self.receives = backlog, [], 0
        self.lock = threading.Lock()

    def _batch(self) -> list[int]:
        with self.lock:
            self.receives += 1
            take = min(oc.RECEIVE_BATCH, self.left)
            self.left -= take
            return list(range(take))

    def receive_async(self, max_messages, invisible_s) -> Future:
        f: Future = Future()
        f.set_result(self._batch())
        return f

    def receive(self, max_messages, invisible_s) -> list[int]:
        return self._batch()

    def ack(self, m) -> None:
        with self.lock:
            self.acked.append(m)


def test_receive_and_ack_stops_at_the_total_and_acks_everything_received():
    c = FakeConsumer(backlog=1000)
    got, secs = oc.receive_and_ack(c, 100)
    assert got == 4 * oc.RECEIVE_BATCH and len(c.acked) == got and secs >= 0


def test_receive_and_ack_stops_once_the_backlog_is_drained():
    c = FakeConsumer(backlog=50)
    got, _ = oc.receive_and_ack(c, 10_000)
    assert got == 50 and len(c.acked) == 50
    assert c.receives == 2 + oc.EMPTY_RECEIVES_TO_STOP


def test_background_receiver_hands_over_batches_and_acks_them():
    c = FakeConsumer(backlog=100)
    seen: list[int] = []
    drained = threading.Event()

    def on_batch(msgs):
        seen.extend(msgs)
        if len(seen) >= 100:
            drained.set()
    with oc.BackgroundReceiver(c, on_batch):
        assert drained.wait(10)
    assert len(seen) == 100 and len(c.acked) == 100
