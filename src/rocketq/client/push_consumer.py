"""PushConsumer: messages pushed to a listener, pulled underneath with long polling.

Per assigned queue a task pulls (32 at a time, held by the broker up to 15 s when there is
nothing) into a :class:`ProcessQueue`, pausing while 1,000 messages of that queue are
unconsumed (flow control).  The listener gets one message at a time (a list of one, as Java's
``consumeMessageBatchMaxSize`` = 1), from a plain function run in a worker thread or a coroutine:

* concurrent (default): up to ``consume_concurrency`` messages at once; RECONSUME_LATER or an
  exception sends the message back (CONSUMER_SEND_MSG_BACK) to ``%RETRY%group``, from where it
  comes again after the retry delay, with ``reconsume_times + 1``; after ``max_reconsume_times``
  the broker dead-letters it to ``%DLQ%group``;
* orderly (``orderly=True``): the queue is locked on the broker (LOCK_BATCH_MQ, renewed every
  20 s) and its messages go to the listener one after another in queue order; SUSPEND or an
  exception retries the same message after a second, and after ``max_reconsume_times`` it is sent
  to the dead-letter queue so the queue moves on.

The committed offset is the lowest offset still being consumed, so nothing is skipped after a
crash (at-least-once: a restart may redeliver what was consumed since the last commit).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable

from rocketq.client.consumer import PULL_ERROR_BACKOFF_S, ConsumerBase
from rocketq.client.model import ConsumeResult, MessageModel, MessageQueue, MQClientError, PullStatus

log = logging.getLogger("rocketq.client")

PULL_SUSPEND_MS = 15_000
QUEUE_CACHE_MAX = 1000
SEND_BACK_RETRY_S = 5.0
SUSPEND_S = 1.0
LOCK_RENEW_S = 20.0


class ProcessQueue:
    """Messages of one queue pulled but not yet consumed, by queue offset."""

    def __init__(self) -> None:
        self.msgs: dict[int, object] = {}
        self.max_offset = -1
        self.dropped = False
        self.locked = False
        self.reconsumes: dict[int, int] = {}

    def add(self, msgs: list) -> None:
        for m in msgs:
            self.msgs[m.queue_offset] = m
            self.max_offset = max(self.max_offset, m.queue_offset)

    def remove(self, msgs: list) -> int:
        """Forget consumed *msgs*; the offset safe to commit (the lowest still pending, or the next)."""
        for m in msgs:
            self.msgs.pop(m.queue_offset, None)
        return min(self.msgs) if self.msgs else self.max_offset + 1

    def __len__(self) -> int:
        return len(self.msgs)


class PushConsumer(ConsumerBase):
    def __init__(self, group: str, namesrv: str | list[str] = "127.0.0.1:9876", *,
                 listener: Callable | None = None, orderly: bool = False, consume_concurrency: int = 20,
                 max_reconsume_times: int = 16, **kwargs):
        super().__init__(group, namesrv, **kwargs)
        self.listener = listener
        self.orderly = orderly
        self.max_reconsume_times = max_reconsume_times
        self._slots = asyncio.Semaphore(consume_concurrency)
        self._queues: dict[MessageQueue, tuple[ProcessQueue, asyncio.Task]] = {}
        self._inflight: set[asyncio.Task] = set()

    def register_listener(self, listener: Callable, *, orderly: bool | None = None) -> None:
        self.listener = listener
        if orderly is not None:
            self.orderly = orderly

    async def start(self):
        if self.listener is None:
            raise MQClientError(-1, "PushConsumer needs a listener before start()")
        await super().start()
        if self.orderly and self.model == MessageModel.CLUSTERING:
            self._tasks.append(asyncio.create_task(self._lock_loop()))
        return self

    async def shutdown(self) -> None:
        await super().shutdown()
        if self._inflight:
            await asyncio.gather(*self._inflight, return_exceptions=True)

    # -- queues ------------------------------------------------------------------------------

    async def _queue_added(self, mq: MessageQueue, expression: str) -> None:
        pq = ProcessQueue()
        self._queues[mq] = (pq, asyncio.create_task(self._pull_loop(mq, pq, expression)))

    async def _queue_removed(self, mq: MessageQueue) -> None:
        entry = self._queues.pop(mq, None)
        if entry is not None:
            pq, task = entry
            pq.dropped = True
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if pq.locked:
                with contextlib.suppress(MQClientError):
                    await self.instance.api.unlock_batch(await self.broker_addr(mq), self.group,
                                                         self.instance.client_id, [mq])
        await super()._queue_removed(mq)

    async def _lock_loop(self) -> None:
        while True:
            await self._lock_all()
            await asyncio.sleep(LOCK_RENEW_S)

    async def _lock_all(self) -> None:
        by_addr: dict[str, list[MessageQueue]] = {}
        for mq in self._queues:
            with contextlib.suppress(MQClientError):
                by_addr.setdefault(await self.broker_addr(mq), []).append(mq)
        for addr, mqs in by_addr.items():
            try:
                locked = await self.instance.api.lock_batch(addr, self.group, self.instance.client_id, mqs)
            except MQClientError as exc:
                log.info("locking queues on %s failed: %s", addr, exc)
                locked = set()
            for mq in mqs:
                if mq in self._queues:
                    self._queues[mq][0].locked = mq in locked
            # a queue rebalancing removed (and unlocked) while this renewal was on the wire was locked
            # again by it; give it back, or the member it went to waits out the broker's lease (Apache
            # RocketMQ's Java client has this race: docs/compatibility.md)
            stale = [mq for mq in mqs if mq in locked and mq not in self._queues]
            if stale:
                with contextlib.suppress(MQClientError):
                    await self.instance.api.unlock_batch(addr, self.group, self.instance.client_id, stale)

    # -- pulling -----------------------------------------------------------------------------

    async def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue, expression: str) -> None:
        tags = self.tags_of(mq.topic, expression)
        offset = None
        while not pq.dropped:
            if self.orderly and self.model == MessageModel.CLUSTERING and not pq.locked:
                await self._lock_all()
                if not pq.locked:
                    await asyncio.sleep(PULL_ERROR_BACKOFF_S)
                    continue
            if len(pq) >= QUEUE_CACHE_MAX:
                await asyncio.sleep(0.05)
                continue
            offset, result, msgs = await self.pull_once(mq, offset, expression, tags, PULL_SUSPEND_MS)
            if result is None:
                continue
            if msgs:
                pq.add(msgs)
                self._dispatch(mq, pq, msgs)
            elif result.status == PullStatus.FOUND and not pq.msgs:
                self.offsets.update(mq, offset)          # everything filtered out: move on

    def _dispatch(self, mq: MessageQueue, pq: ProcessQueue, msgs: list) -> None:
        if self.orderly:
            if not any(t for t in self._inflight if t.get_name() == str(mq) and not t.done()):
                task = asyncio.create_task(self._consume_orderly(mq, pq), name=str(mq))
                self._track(task)
            return
        for m in msgs:
            self._track(asyncio.create_task(self._consume_one(mq, pq, m)))

    def _track(self, task: asyncio.Task) -> None:
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _call_listener(self, msgs: list) -> ConsumeResult:
        try:
            if inspect.iscoroutinefunction(self.listener):
                result = await self.listener(msgs)
            else:
                result = await asyncio.to_thread(self.listener, msgs)
        except Exception:
            log.exception("message listener of %s failed", self.group)
            return ConsumeResult.RECONSUME_LATER if not self.orderly else ConsumeResult.SUSPEND_CURRENT_QUEUE_A_MOMENT
        return result if isinstance(result, ConsumeResult) else ConsumeResult.CONSUME_SUCCESS

    # -- concurrent --------------------------------------------------------------------------

    async def _consume_one(self, mq: MessageQueue, pq: ProcessQueue, msg) -> None:
        async with self._slots:
            if pq.dropped:
                return
            result = await self._call_listener([msg])
        while result != ConsumeResult.CONSUME_SUCCESS and not pq.dropped:
            try:
                await self.instance.api.send_back(await self.broker_addr(mq), msg, self.group,
                                                  max_reconsume_times=self.max_reconsume_times)
                break
            except MQClientError as exc:          # could not hand it back: consume it again here later
                log.warning("send-back of %s failed, consuming it again in %.0f s: %s", msg.msg_id,
                            SEND_BACK_RETRY_S, exc)
                await asyncio.sleep(SEND_BACK_RETRY_S)
                async with self._slots:
                    result = await self._call_listener([msg])
        if not pq.dropped:
            self.offsets.update(mq, pq.remove([msg]))

    # -- orderly -----------------------------------------------------------------------------

    async def _consume_orderly(self, mq: MessageQueue, pq: ProcessQueue) -> None:
        while pq.msgs and not pq.dropped:
            msg = pq.msgs[min(pq.msgs)]
            result = await self._call_listener([msg])
            if result == ConsumeResult.CONSUME_SUCCESS:
                pq.reconsumes.pop(msg.queue_offset, None)
                self.offsets.update(mq, pq.remove([msg]))
                continue
            tries = pq.reconsumes[msg.queue_offset] = pq.reconsumes.get(msg.queue_offset, 0) + 1
            if tries > self.max_reconsume_times:
                try:                                  # give up on it: dead-letter queue, move on
                    await self.instance.api.send_back(await self.broker_addr(mq), msg, self.group, delay_level=-1)
                    self.offsets.update(mq, pq.remove([msg]))
                    continue
                except MQClientError as exc:
                    log.warning("could not dead-letter %s: %s", msg.msg_id, exc)
            await asyncio.sleep(SUSPEND_S)
