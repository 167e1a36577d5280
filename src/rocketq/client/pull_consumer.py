"""LitePullConsumer: the application polls (RocketMQ's ``DefaultLitePullConsumer``).

Queues come from ``subscribe(topic, expression)`` (rebalanced within the group like a push
consumer) or ``assign(queues)`` (fixed; no group coordination).  Background tasks pull every
queue into one bounded buffer (``buffer_batches`` pull results); :meth:`poll` returns what is
buffered, up to ``max_messages``.  Offsets advance as messages are polled and are committed every
5 s (``auto_commit``) or by :meth:`commit`.  :meth:`seek` moves a queue; messages already buffered
for it are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from rocketq.client.consumer import ConsumerBase
from rocketq.client.model import MessageQueue, MQClientError, PullStatus

log = logging.getLogger("rocketq.client")

PULL_SUSPEND_MS = 5_000


class LitePullConsumer(ConsumerBase):
    consume_type = "CONSUME_ACTIVELY"

    def __init__(self, group: str, namesrv: str | list[str] = "127.0.0.1:9876", *, auto_commit: bool = True,
                 buffer_batches: int = 64, **kwargs):
        super().__init__(group, namesrv, **kwargs)
        self.auto_commit = auto_commit
        self._buffer: asyncio.Queue = asyncio.Queue(maxsize=buffer_batches)
        self._pullers: dict[MessageQueue, asyncio.Task] = {}
        self._generation: dict[MessageQueue, int] = {}
        self._seek_to: dict[MessageQueue, int] = {}
        self._assigned_manually = False
        self._carry: list = []            # the rest of a batch a poll did not take (max_messages)

    async def assign(self, queues: list[MessageQueue], expression: str = "*") -> None:
        """Read exactly these queues (no rebalancing)."""
        self._assigned_manually = True
        for mq in [q for q in self.assigned if q not in queues]:
            await self._queue_removed(mq)
        for mq in queues:
            if mq not in self.assigned:
                self.assigned[mq] = expression
                if self.running:
                    await self._queue_added(mq, expression)

    async def start(self):
        if self._assigned_manually and not self.subscriptions:
            self.running = True
            for mq, expression in self.assigned.items():
                await self._queue_added(mq, expression)
            self._tasks.append(asyncio.create_task(self._persist_loop()))
            return self
        return await super().start()

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(5.0)
            if self.auto_commit:
                await self.offsets.persist()

    async def rebalance(self) -> None:
        if not self._assigned_manually:
            await super().rebalance()

    async def _queue_added(self, mq: MessageQueue, expression: str) -> None:
        self._generation[mq] = self._generation.get(mq, 0) + 1
        self._pullers[mq] = asyncio.create_task(self._pull_loop(mq, expression, self._generation[mq]))

    async def _queue_removed(self, mq: MessageQueue) -> None:
        task = self._pullers.pop(mq, None)
        self._generation[mq] = self._generation.get(mq, 0) + 1
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await super()._queue_removed(mq)

    async def seek(self, mq: MessageQueue, offset: int) -> None:
        """Continue *mq* from *offset* (buffered messages of it are dropped)."""
        if mq not in self.assigned:
            raise MQClientError(-1, f"{mq} is not assigned to this consumer")
        expression = self.assigned[mq]
        task = self._pullers.pop(mq, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        self._seek_to[mq] = offset
        self.offsets.update(mq, offset)
        await self._queue_added(mq, expression)

    async def reset_queue(self, mq: MessageQueue, offset: int) -> None:
        await self.seek(mq, offset)

    async def commit(self) -> None:
        await self.offsets.persist()

    async def poll(self, timeout_s: float = 1.0, max_messages: int = 1024) -> list:
        """Messages pulled since the last poll (waits up to *timeout_s* for the first)."""
        out: list = []
        batches, self._carry = self._carry, []
        if not batches:
            try:
                batches.append(await asyncio.wait_for(self._buffer.get(), timeout_s))
            except TimeoutError:
                return out
        held = sum(len(b[2]) for b in batches)
        while held < max_messages and not self._buffer.empty():
            batches.append(self._buffer.get_nowait())
            held += len(batches[-1][2])
        for i, (mq, generation, msgs, next_offset) in enumerate(batches):
            if self._generation.get(mq) != generation or mq not in self.assigned:
                continue                                  # seeked or taken away meanwhile
            room = max_messages - len(out)
            if room <= 0:
                self._carry.extend(batches[i:])
                break
            if len(msgs) > room:                          # take part; the rest waits for the next poll
                out.extend(msgs[:room])
                self.offsets.update(mq, msgs[room].queue_offset)
                self._carry.append((mq, generation, msgs[room:], next_offset))
                self._carry.extend(batches[i + 1:])
                break
            out.extend(msgs)
            self.offsets.update(mq, next_offset)
        return out

    async def _pull_loop(self, mq: MessageQueue, expression: str, generation: int) -> None:
        tags = self.tags_of(mq.topic, expression)
        offset = self._seek_to.pop(mq, None)
        while True:
            offset, result, msgs = await self.pull_once(mq, offset, expression, tags, PULL_SUSPEND_MS)
            if result is not None and (msgs or result.status in (PullStatus.FOUND, PullStatus.OFFSET_ILLEGAL)):
                await self._buffer.put((mq, generation, msgs, offset))

    async def shutdown(self) -> None:
        for mq in list(self._pullers):
            task = self._pullers.pop(mq)
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        await super().shutdown()
