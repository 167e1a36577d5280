"""Producing test messages into the shared server, and reading a Spark sink back."""

from __future__ import annotations

import asyncio
import threading
import time

from relay import FrameRelay

from rocketq.client.admin import Admin
from rocketq.client.model import MessageQueue, MQClientError
from rocketq.client.sync import Producer
from rocketq.common.message import Message


def produce(namesrv: str, topic: str, count: int, *, start: int = 0, batch: int = 100, tags=None) -> dict[str, bytes]:
    """Send *count* messages (bodies ``<topic>-<n>``, keys ``key-<n>``); returns {UNIQ_KEY msg id: body}.
    Returns once the broker's queues hold them (a send is acknowledged before its consume-queue units are
    written, as in RocketMQ, and the readers plan from the queues' max offsets)."""
    before = queued(namesrv, topic)
    with Producer("spark-test-producer", namesrv) as p:
        sent = send(p, topic, count, start=start, batch=batch, tags=tags)
    deadline = time.monotonic() + 30
    while queued(namesrv, topic) < before + count:
        assert time.monotonic() < deadline, f"{topic}: the broker's queues did not reach {before + count} in 30 s"
        time.sleep(0.05)
    return sent


def queued(namesrv: str, topic: str) -> int:
    """Messages the broker's consume queues of *topic* hold (the sum of their max offsets; 0 for no topic)."""
    async def total() -> int:
        async with Admin(namesrv) as admin:
            try:
                route = await admin.route(topic)
            except MQClientError:
                return 0
            n = 0
            for q in route.queue_datas:
                addr = route.master_of(q.broker_name)
                for qid in range(q.read_queue_nums):
                    n += await admin.api.max_offset(addr, MessageQueue(topic, q.broker_name, qid))
            return n
    return asyncio.run(total())


def send(p: Producer, topic: str, count: int, *, start: int = 0, batch: int = 100, tags=None) -> dict[str, bytes]:
    sent: dict[str, bytes] = {}
    for i in range(start, start + count, batch):
        msgs = [Message(topic, f"{topic}-{j}".encode(), tags=tags(j) if tags else None, keys=f"key-{j}")
                for j in range(i, min(start + count, i + batch))]
        result = p.send_batch(msgs)
        assert result.status.name == "SEND_OK"
        for m in msgs:
            sent[m.properties["UNIQ_KEY"]] = m.body
    return sent


class BackgroundProducer(threading.Thread):
    """Keeps sending batches of *batch* messages every *pause_s* until *total* are sent."""

    def __init__(self, namesrv: str, topic: str, total: int, *, batch: int = 50, pause_s: float = 0.05):
        super().__init__(daemon=True)
        self.namesrv, self.topic, self.total, self.batch, self.pause_s = namesrv, topic, total, batch, pause_s
        self.sent: dict[str, bytes] = {}
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Producer("spark-test-background", self.namesrv) as p:
                for start in range(0, self.total, self.batch):
                    self.sent.update(send(p, self.topic, min(self.batch, self.total - start), start=start,
                                          batch=self.batch))
                    time.sleep(self.pause_s)     # pacing of the producer, not a wait for a condition
        except BaseException as exc:             # surfaced by the test
            self.error = exc


def wait_until(predicate, timeout_s: float, what: str, poll_s: float = 0.2):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


class CountingRelay(FrameRelay):
    """A :class:`relay.FrameRelay` in front of a broker that counts the request frames its clients send."""

    def __init__(self, target: str):
        super().__init__(target, name="counting relay")

    @property
    def requests(self) -> int:
        return self.forwarded
