"""Load for failover runs: producers sending unique messages and a consumer reading them, both carrying
on through kills, recording every attempt, acknowledgement and delivery through callbacks (the tests
feed a run checker, ``rocketq bench failover`` counts).

Theory of operation
-------------------
``senders`` tasks share one Producer (retries and its timeout are the client's, as an application
would have them); each send has a key ``<run>-<n>`` as its body, so a delivery names what it is.
:attr:`Load.acks` counts acknowledgements and :meth:`Load.first_ack_after` tells when the first send
started after a moment was acknowledged - the failover time is measured from the kill to that (an
acknowledgement of a send started before the kill may be the killed master's, still in flight).  The consumer is a LitePullConsumer subscribed from the first
offset; it follows the route (a slave serves reads while there is no master, then the new master).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from rocketq.client import (
    ConsumeFrom,
    LitePullConsumer,
    Message,
    MQClientError,
    Producer,
)

log = logging.getLogger(__name__)

SEND_TIMEOUT_S = 3.0
FAILED_SEND_PAUSE_S = 0.02       # after a failed send, before the next (no busy loop while there is no master)
POLL_S = 0.3


class Load:
    def __init__(self, namesrv: str, topic: str, *, run: str = "run", senders: int = 4,
                 on_attempt: Callable[[str, bytes], None] = lambda k, b: None,
                 on_ack: Callable[[str, int, int], None] = lambda k, q, o: None,
                 on_consume: Callable[[str, bytes, int, int], None] = lambda k, b, q, o: None,
                 consume: bool = True):
        self.namesrv, self.topic, self.run, self.n_senders = namesrv, topic, run, senders
        self.on_attempt, self.on_ack, self.on_consume, self.consume = on_attempt, on_ack, on_consume, consume
        self.acks = 0
        self.failures = 0
        self.ack_times: list[float] = []              # monotonic, in order
        self._acks_by_start: list[tuple[float, float]] = []   # (send started, acknowledged)
        self.consumed = 0
        self._n = 0
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._producer: Producer | None = None
        self._consumer: LitePullConsumer | None = None

    async def start(self) -> Load:
        self._producer = await Producer(f"{self.run}_pg", self.namesrv, retries=2, timeout_s=SEND_TIMEOUT_S).start()
        self._tasks = [asyncio.create_task(self._send_loop()) for _ in range(self.n_senders)]
        if self.consume:
            self._consumer = LitePullConsumer(f"{self.run}_cg", self.namesrv, consume_from=ConsumeFrom.FIRST)
            self._consumer.subscribe(self.topic)
            await self._consumer.start()
            self._tasks.append(asyncio.create_task(self._consume_loop()))
        return self

    async def stop_sending(self) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks[:self.n_senders], return_exceptions=True)
        if self._producer is not None:
            await self._producer.shutdown()

    async def close(self) -> None:
        self._stop.set()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._producer is not None:
            await self._producer.shutdown()
        if self._consumer is not None:
            await self._consumer.shutdown()

    def first_ack_after(self, t: float) -> float | None:
        """When the first send *started* after *t* was acknowledged (an ack of a send made before *t*
        may come from the master killed at *t*, its answer still in flight)."""
        return min((acked for started, acked in self._acks_by_start if started > t), default=None)

    def acks_after(self, t: float) -> int:
        """Acknowledged sends started after *t*."""
        return sum(1 for started, _ in self._acks_by_start if started > t)

    async def _send_loop(self) -> None:
        while not self._stop.is_set():
            self._n += 1
            key = f"{self.run}-{self._n}"
            body = key.encode()
            self.on_attempt(key, body)
            started = time.monotonic()
            try:
                r = await self._producer.send(Message(self.topic, body))
                ok = r.status.value == "SEND_OK"
            except (TimeoutError, MQClientError, OSError) as exc:
                log.debug("send %s failed: %s", key, exc)
                ok = False
            if not ok:
                self.failures += 1
                await asyncio.sleep(FAILED_SEND_PAUSE_S)
                continue
            self.acks += 1
            self.ack_times.append(time.monotonic())
            self._acks_by_start.append((started, self.ack_times[-1]))
            self.on_ack(key, r.queue.queue_id, r.queue_offset)

    async def _consume_loop(self) -> None:
        while True:
            try:
                for msg in await self._consumer.poll(POLL_S):
                    self.consumed += 1
                    self.on_consume(msg.body.decode(errors="replace"), msg.body, msg.queue_id, msg.queue_offset)
            except (MQClientError, OSError) as exc:      # the route moving under it: go on
                log.debug("poll failed: %s", exc)
                await asyncio.sleep(POLL_S)
