"""Driving the official RocketMQ 5 Python client (``rocketmq-python-client`` 5.1.2, package
``rocketmq``) from a benchmark, in one place for ``rocketq bench grpc`` and ``rocketq bench compare``.

What the 5.1.2 client can and cannot do decides how it is driven:

* ``Producer.send`` blocks for one round trip; ``send_async`` returns a ``concurrent.futures.Future``
  completed on the client's own I/O thread.  There is no batch send, so "many in flight" is the
  best it offers: :func:`send_windowed` keeps a sliding window of ``send_async`` calls open (with
  thousands in flight grpc starts cancelling calls, so the window is bounded).
* ``SimpleConsumer.ack_async`` builds an ``asyncio.Future`` outside any event loop and fails in a
  plain thread, and hands back nothing to wait on; acks therefore go through the blocking ``ack``
  on a pool of ``ACK_THREADS`` threads.  :func:`receive_and_ack` keeps the next ``receive_async``
  in flight while the previous batch is acked, and its clock stops when the last ack has answered.

Everything here blocks the calling thread; callers inside an event loop run it on a worker thread.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

CLIENT = "rocketmq-python-client 5.1.2"
ASYNC_WINDOW = 256                 # send_async calls in flight for the "many in flight" scenarios
ACK_THREADS = 16                   # threads running the blocking ack
RECEIVE_BATCH = 32                 # messages asked for per receive
INVISIBLE_S = 30                   # how long a received message stays invisible to other receives
REQUEST_TIMEOUT_S = 10
RESULT_TIMEOUT_S = 60              # the longest any single future is waited for
EMPTY_RECEIVES_TO_STOP = 2         # long polls in a row that found nothing: the backlog is drained


def available() -> str | None:
    """None when the official client can be imported here, else why not."""
    try:
        import rocketmq  # noqa: F401
    except ImportError:
        return f"the official client is not installed (pip install {CLIENT.replace(' ', '==')})"
    return None


def configuration(endpoint: str, credentials: tuple[str, str] = ("", "")):
    """*credentials*: (access key, secret key); empty for a server without ACL."""
    from rocketmq import ClientConfiguration, Credentials
    return ClientConfiguration(endpoint, Credentials(*credentials), request_timeout=REQUEST_TIMEOUT_S)


def message(topic: str, body: bytes):
    from rocketmq import Message
    m = Message()
    m.topic, m.body = topic, body
    return m


def started_producer(endpoint: str, topic: str, *, warm_body: bytes = b"warm", credentials=("", ""),
                     tls: bool = False):
    """A started Producer whose route to *topic* is already fetched (*warm_body* sent)."""
    from rocketmq import Producer
    p = Producer(configuration(endpoint, credentials), (topic,), tls_enable=tls)
    p.startup()
    p.send(message(topic, warm_body))
    return p


def started_consumer(endpoint: str, group: str, topic: str, *, await_duration_s: int = 2, credentials=("", ""),
                     tls: bool = False):
    from rocketmq import FilterExpression, SimpleConsumer
    c = SimpleConsumer(configuration(endpoint, credentials), group, {topic: FilterExpression("*")},
                       await_duration=await_duration_s, tls_enable=tls)
    c.startup()
    return c


def send_each(producer, topic: str, body: bytes, n: int) -> list[float]:
    """*n* blocking sends one after the other; the latency of each, in seconds."""
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        producer.send(message(topic, body))
        lat.append(time.perf_counter() - t)
    return lat


def send_windowed(producer, topic: str, body: bytes, n: int, window: int = ASYNC_WINDOW) -> list[float]:
    """*n* ``send_async`` calls, at most *window* in flight; the latency of each, in seconds.

    A failed send fails the benchmark (its exception is raised here once all have answered)."""
    assert 0 < window <= 4 * ASYNC_WINDOW, "grpc cancels calls when thousands are in flight"
    slots, done = threading.Semaphore(window), threading.Event()
    lat: list[float] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def answered(started: float, f) -> None:
        took = time.perf_counter() - started
        with lock:
            lat.append(took)
            if f.exception() is not None:
                errors.append(f.exception())
            if len(lat) == n:
                done.set()
        slots.release()
    for _ in range(n):
        if not slots.acquire(timeout=RESULT_TIMEOUT_S):
            raise TimeoutError(f"no send answered in {RESULT_TIMEOUT_S} s")
        started = time.perf_counter()
        producer.send_async(message(topic, body)).add_done_callback(
            lambda f, started=started: answered(started, f))
    if n and not done.wait(RESULT_TIMEOUT_S):
        raise TimeoutError(f"{n - len(lat)} sends unanswered after {RESULT_TIMEOUT_S} s")
    if errors:
        raise errors[0]
    return lat


def receive_and_ack(consumer, total: int, *, deadline_s: float = 120.0) -> tuple[int, float]:
    """Receive and ack up to *total* messages; (messages acked, seconds from the first receive to
    the last ack).  Stops early at *deadline_s*, or after ``EMPTY_RECEIVES_TO_STOP`` receives in a
    row came back empty from the consumer's long poll (the backlog is drained)."""
    def ack(m) -> float:
        consumer.ack(m)
        return time.perf_counter()
    with ThreadPoolExecutor(ACK_THREADS) as pool:
        got, empty, acks, t0 = 0, 0, [], time.perf_counter()
        last = t0
        deadline = time.monotonic() + deadline_s
        nxt = consumer.receive_async(RECEIVE_BATCH, INVISIBLE_S)
        while nxt is not None:
            msgs = nxt.result(timeout=RESULT_TIMEOUT_S)
            got += len(msgs)
            empty = 0 if msgs else empty + 1
            more = got < total and empty < EMPTY_RECEIVES_TO_STOP and time.monotonic() < deadline
            nxt = consumer.receive_async(RECEIVE_BATCH, INVISIBLE_S) if more else None
            acks += [pool.submit(ack, m) for m in msgs]
        for f in acks:
            last = max(last, f.result(timeout=RESULT_TIMEOUT_S))   # an ack that failed fails the benchmark
        return got, last - t0


class BackgroundReceiver:
    """Receives on a thread of its own until the ``with`` ends, handing every batch to
    ``on_batch(messages)`` as soon as it arrives, then acking each message on the ack pool.
    A receive or ack that failed is raised when the ``with`` ends."""

    def __init__(self, consumer, on_batch):
        self.consumer, self.on_batch = consumer, on_batch
        self._stop = threading.Event()
        self._errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._loop, name="bench-receiver", daemon=True)

    def _loop(self) -> None:
        with ThreadPoolExecutor(ACK_THREADS) as pool:
            acks = []
            while not self._stop.is_set():
                try:
                    msgs = self.consumer.receive(RECEIVE_BATCH, INVISIBLE_S)
                except Exception as e:             # noqa: BLE001 - handed to the caller at exit
                    self._errors.append(e)
                    return
                self.on_batch(msgs)
                acks = self._failed_out(acks, wait=False) + [pool.submit(self.consumer.ack, m) for m in msgs]
            self._failed_out(acks, wait=True)

    def _failed_out(self, acks: list, *, wait: bool) -> list:
        """The acks still unanswered; the errors of the answered ones go to ``_errors``."""
        pending = []
        for f in acks:
            if not wait and not f.done():
                pending.append(f)
            elif f.exception(timeout=RESULT_TIMEOUT_S) is not None:
                self._errors.append(f.exception())
        return pending

    def __enter__(self) -> BackgroundReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(RESULT_TIMEOUT_S)      # the receive in flight ends with its long poll
        if self._errors and exc[0] is None:
            raise self._errors[0]
