"""Producers: :class:`Producer` (sync-style awaited sends, one-way, batches, ordered by sharding key)
and :class:`TransactionProducer` (half message, local transaction, check-back).

Queue choice follows RocketMQ's ``DefaultMQProducer``: round robin over the topic's writable
queues; a failed send is retried (``retries``, default 2) on a queue of *another* broker when
there is one; a sharding key (or a selector) pins a message to one queue, so messages with the
same key keep their order, and such sends are not moved to another queue.  A broker that answers
SYSTEM_BUSY (its fast failure) is retried after a growing pause, for up to the send timeout.  With
``send_latency_fault_enable`` (RocketMQ's ``sendLatencyFaultEnable``) a broker that failed or answered
slowly is avoided for a while (:mod:`rocketq.client.fault`), not only by the next retry.  A topic the
NameServers do not know yet is sent through the ``TBW102`` default route, so the broker creates
it on the first send (when ``autoCreateTopicEnable`` is on).
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import itertools
import logging
import time
from collections.abc import Callable

from rocketq.client.fault import LatencyFaults
from rocketq.client.instance import DEFAULT_TOPIC, ClientInstance
from rocketq.client.model import Credentials, MessageQueue, MQClientError, SendResult, TransactionState
from rocketq.common.javahash import java_hash
from rocketq.common.message import Message
from rocketq.common.msgid import decode_offset_msg_id
from rocketq.common.sysflag import PROPERTY_TRANSACTION_PREPARED, PROPERTY_UNIQ_KEY
from rocketq.common.validation import topic_error
from rocketq.client.ids import unique_key, unique_keys
from rocketq.client.request_reply import (PROPERTY_CORRELATION_ID, PROPERTY_REPLY_TO_CLIENT, PROPERTY_TTL,
                                          ReplyWaiter, RequestTimeout)
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode
from rocketq.store.record import StoredMessage

log = logging.getLogger("rocketq.client")

MAX_BODY_BYTES = 4 * 1024 * 1024
PROPERTY_PRODUCER_GROUP = "PGROUP"
RETRYABLE = {-1, ResponseCode.SYSTEM_ERROR, ResponseCode.SYSTEM_BUSY, ResponseCode.SERVICE_NOT_AVAILABLE,
             ResponseCode.TOPIC_NOT_EXIST, ResponseCode.NO_PERMISSION, ResponseCode.NOT_IN_CURRENT_UNIT}
Selector = Callable[[list[MessageQueue], Message, object], MessageQueue]


def check_message(msg: Message) -> None:
    err = topic_error(msg.topic)
    if err:
        raise MQClientError(-1, f"message topic: {err}")
    if not msg.body:
        raise MQClientError(-1, f"message to {msg.topic}: the body is empty")
    if len(msg.body) > MAX_BODY_BYTES:
        raise MQClientError(-1, f"message to {msg.topic}: body of {len(msg.body)} bytes exceeds {MAX_BODY_BYTES}")


class Producer:
    def __init__(self, group: str = "DEFAULT_PRODUCER", namesrv: str | list[str] = "127.0.0.1:9876", *,
                 retries: int = 2, timeout_s: float = 3.0, credentials: Credentials | None = None,
                 ssl_context=None, default_topic_queue_nums: int = 4, send_latency_fault_enable: bool = False):
        self.group = group
        self.faults = LatencyFaults() if send_latency_fault_enable else None
        self.retries = retries
        self.timeout_s = timeout_s
        self.default_topic_queue_nums = default_topic_queue_nums
        self.instance = ClientInstance(namesrv, credentials=credentials, ssl_context=ssl_context, timeout_s=timeout_s)
        self.instance.heartbeat_data = self._heartbeat_data
        self._rr = itertools.count()
        self._greeted: set[str] = set()
        self._started = False
        self._replies: ReplyWaiter | None = None         # made by the first request()

    async def start(self) -> Producer:
        if not self._started:
            self.instance.start_heartbeats()
            self._started = True
        return self

    async def shutdown(self) -> None:
        if not self._started:
            return
        self._started = False
        for addr in sorted(self._greeted):
            try:
                await self.instance.api.unregister_client(addr, self.instance.client_id, producer_group=self.group)
            except MQClientError:
                pass
        await self.instance.close()

    async def __aenter__(self) -> Producer:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.shutdown()

    def _heartbeat_data(self) -> dict:
        return {"producerDataSet": [{"groupName": self.group}], "consumerDataSet": []}

    # -- queues ------------------------------------------------------------------------------

    async def queues(self, topic: str) -> list[MessageQueue]:
        """Writable queues of *topic* (from the default route when the topic is new)."""
        route = await self.instance.route(topic)
        if route is not None:
            if route.write_queues():
                return route.write_queues()
            # a known topic whose brokers have no master now (a failover under way): not the default
            # route, whose cached masters may be the dead ones; the next send asks the NameServers again
            self.instance.forget_route(topic)
            raise MQClientError(-1, f"no broker of topic {topic} has a writable master now")
        default = await self.instance.route(DEFAULT_TOPIC)
        if default is None:
            raise MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"no route for topic {topic} and no default topic "
                                f"{DEFAULT_TOPIC} (is autoCreateTopicEnable off?)")
        by_broker: dict[str, list[MessageQueue]] = {}
        for q in default.write_queues(topic):
            by_broker.setdefault(q.broker_name, []).append(q)
        return [q for qs in by_broker.values() for q in qs[:self.default_topic_queue_nums]]

    def _known_queues(self, topic: str) -> list[MessageQueue] | None:
        """*topic*'s writable queues from its fresh cached route, without a coroutine; else None (ask :meth:`queues`)."""
        route = self.instance.cached_route(topic)
        return route.write_queues() or None if route is not None else None

    def _known_addr(self, mq: MessageQueue) -> str | None:
        """*mq*'s master from the fresh cached route of its topic, once greeted; else None (ask :meth:`_broker_addr`)."""
        route = self.instance.cached_route(mq.topic)
        addr = route.master_of(mq.broker_name) if route is not None else None
        return addr if addr in self._greeted else None

    async def _broker_addr(self, mq: MessageQueue) -> str:
        for topic in (mq.topic, DEFAULT_TOPIC):
            route = await self.instance.route(topic)
            addr = route.master_of(mq.broker_name) if route else None
            if addr:
                if addr not in self._greeted:      # the broker learns our connection (check-back needs it)
                    self._greeted.add(addr)
                    await self.instance.api.heartbeat(addr, dict(self._heartbeat_data(),
                                                                 clientID=self.instance.client_id))
                return addr
        raise MQClientError(-1, f"no address for broker {mq.broker_name} of topic {mq.topic}")

    def _pick(self, queues: list[MessageQueue], avoid: str | None) -> MessageQueue:
        start = next(self._rr)
        n = len(queues)
        if self.faults is not None:         # first a queue of a broker not marked faulty (MQFaultStrategy)
            for i in range(n):
                q = queues[(start + i) % n]
                if q.broker_name != avoid and self.faults.available(q.broker_name):
                    return q
        for i in range(n):
            q = queues[(start + i) % n]
            if q.broker_name != avoid:
                return q
        return queues[start % n]

    # -- sending -----------------------------------------------------------------------------

    def _prepare(self, msg: Message) -> Message:
        check_message(msg)
        if PROPERTY_UNIQ_KEY not in msg.properties:
            msg.properties = dict(msg.properties, **{PROPERTY_UNIQ_KEY: unique_key()})
        return msg

    async def send(self, msg: Message, *, queue: MessageQueue | None = None, sharding_key: str | None = None,
                   selector: Selector | None = None, arg: object = None) -> SendResult:
        """Send and wait for the broker's answer; retried on another broker unless the queue is pinned."""
        self._prepare(msg)
        return await self._send_with_retries(msg, None, queue, sharding_key, selector, arg)

    async def send_batch(self, msgs: list[Message], *, queue: MessageQueue | None = None) -> SendResult:
        """Send messages of one topic as one SEND_BATCH_MESSAGE (stored together, one answer)."""
        if not msgs:
            raise MQClientError(-1, "send_batch needs at least one message")
        topics = {m.topic for m in msgs}
        if len(topics) != 1 or any(m.delay_level for m in msgs):
            raise MQClientError(-1, "a batch holds messages of one topic and without delay levels")
        check_message(msgs[0])
        sizes = list(map(len, (m.body for m in msgs)))
        if not all(sizes) or max(sizes) > MAX_BODY_BYTES:
            check_message(msgs[next(i for i, n in enumerate(sizes) if not 0 < n <= MAX_BODY_BYTES)])
        keyless = [m for m in msgs if PROPERTY_UNIQ_KEY not in m.properties]
        for m, key in zip(keyless, unique_keys(len(keyless))):
            m.properties = {**m.properties, PROPERTY_UNIQ_KEY: key}
        return await self._send_with_retries(msgs[0], msgs, queue, None, None, None)

    async def send_encoded_batch(self, topic: str, body: bytes, *, queue: MessageQueue | None = None) -> SendResult:
        """Send a SEND_BATCH_MESSAGE body the caller encoded (records as :func:`encode_batch` writes
        them, each with its own properties and UNIQ_KEY); retried like :meth:`send_batch`."""
        if not body:
            raise MQClientError(-1, "send_encoded_batch needs at least one message")
        return await self._send_with_retries(Message(topic, b""), None, queue, None, None, None, encoded=body)

    async def request(self, msg: Message, timeout_s: float = 3.0) -> Message:
        """Send *msg* and wait up to *timeout_s* for its reply (a responder's
        :func:`~rocketq.client.request_reply.create_reply_message`, sent to the broker); raises
        :class:`~rocketq.client.request_reply.RequestTimeout` when none comes in time."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._replies is None:
            self._replies = ReplyWaiter(self.instance)
        await asyncio.wait_for(self._replies.reach_reply_brokers(), timeout_s)
        correlation = unique_key()
        msg.properties = {**msg.properties, PROPERTY_CORRELATION_ID: correlation,
                          PROPERTY_REPLY_TO_CLIENT: self.instance.client_id, PROPERTY_TTL: str(int(timeout_s * 1000))}
        reply = self._replies.expect(correlation)
        try:
            await asyncio.wait_for(self.send(msg), max(0.001, deadline - loop.time()))
            return await asyncio.wait_for(reply, max(0.001, deadline - loop.time()))
        except asyncio.TimeoutError:
            raise RequestTimeout(-1, f"request to {msg.topic} timed out after {timeout_s:g} s waiting for its reply "
                                     f"(correlation id {correlation})") from None
        finally:
            self._replies.forget(correlation)

    async def recall(self, topic: str, recall_handle: str) -> str:
        """Take back a message due later (sent with ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` /
        ``TIMER_DELAY_MS``; its SendResult's ``recall_handle``) before it is delivered; returns its id.
        The handle names the broker that holds it."""
        try:
            broker = base64.b64decode(recall_handle.encode(), altchars=b"-_", validate=True).decode().split(" ")[2]
        except (ValueError, IndexError, UnicodeError):
            raise MQClientError(-1, f"recall handle {recall_handle[:60]!r} is not a v1 recall handle") from None
        addr = await self._broker_addr(MessageQueue(topic, broker, 0))
        return await self.instance.api.recall(addr, topic, recall_handle, self.group)

    async def send_oneway(self, msg: Message, *, queue: MessageQueue | None = None) -> None:
        self._prepare(msg)
        mq = queue or self._pick(await self.queues(msg.topic), None)
        await self.instance.api.send_oneway(await self._broker_addr(mq), mq, msg, self.group)

    async def _send_with_retries(self, msg, batch, queue, sharding_key, selector, arg, *,
                                 encoded: bytes | None = None) -> SendResult:
        pinned = queue is not None or sharding_key is not None or selector is not None
        attempts = 1 if pinned else 1 + self.retries
        avoid: str | None = None
        last: MQClientError | None = None
        attempt, busy_tries, busy_waited = 0, 0, 0.0
        while attempt < attempts:
            queues = (self._known_queues(msg.topic) or await self.queues(msg.topic)) if queue is None else [queue]
            if not queues:
                raise MQClientError(-1, f"topic {msg.topic} has no writable queue")
            if queue is not None:
                mq = queue
            elif selector is not None:
                mq = selector(queues, msg, arg)
            elif sharding_key is not None:
                mq = queues[abs(java_hash(sharding_key)) % len(queues)]
            else:
                mq = self._pick(queues, avoid)
            began = time.monotonic()
            try:
                addr = self._known_addr(mq) or await self._broker_addr(mq)
                result = await self.instance.api.send(addr, mq, msg, self.group, batch=batch, encoded=encoded,
                                                      timeout_s=self.timeout_s)
                if self.faults is not None:
                    self.faults.update(mq.broker_name, (time.monotonic() - began) * 1000)
                return result
            except MQClientError as exc:
                last = exc
                if self.faults is not None and exc.code != ResponseCode.SYSTEM_BUSY:
                    self.faults.update(mq.broker_name, (time.monotonic() - began) * 1000, failed=True)
                if exc.code not in RETRYABLE:
                    raise
                if exc.code == ResponseCode.SYSTEM_BUSY and busy_waited < self.timeout_s:
                    # the broker sheds load (fast failure): back off and try again, within the send timeout
                    pause = min(0.01 * 2 ** min(busy_tries, 6), self.timeout_s - busy_waited)   # 10 ms .. 640 ms
                    busy_tries += 1
                    busy_waited += pause
                    await asyncio.sleep(pause)
                    continue
                log.info("send to %s failed (attempt %d of %d): %s", mq, attempt + 1, attempts, exc)
                avoid = mq.broker_name
                self.instance.forget_route(msg.topic)
                self.instance.forget_route(DEFAULT_TOPIC)     # its masters may be as stale
                attempt += 1
        raise last


class TransactionProducer(Producer):
    """``execute(msg, arg)`` runs the local transaction after the half message is stored and returns
    a :class:`TransactionState`; ``check(msg)`` answers the broker's check-back for half messages
    left UNKNOWN.  Both may be plain functions or coroutines."""

    def __init__(self, group: str, namesrv: str | list[str] = "127.0.0.1:9876", *,
                 execute: Callable, check: Callable, **kwargs):
        super().__init__(group, namesrv, **kwargs)
        self._execute, self._check = execute, check
        self.instance.handlers[RequestCode.CHECK_TRANSACTION_STATE] = self._on_check

    async def send_in_transaction(self, msg: Message, arg: object = None) -> tuple[SendResult, TransactionState]:
        msg.properties = dict(msg.properties, **{PROPERTY_TRANSACTION_PREPARED: "true",
                                                 PROPERTY_PRODUCER_GROUP: self.group})
        result = await self.send(msg)
        try:
            state = await _maybe_await(self._execute(msg, arg))
        except Exception:
            log.exception("local transaction of %s failed; it stays UNKNOWN until checked", result.msg_id)
            state = TransactionState.UNKNOWN
        addr = await self._broker_addr(result.queue)
        await self.instance.api.end_transaction(addr, self._end_header(result.offset_msg_id, result.queue_offset,
                                                                       result.msg_id, state, from_check=False))
        return result, state

    def _end_header(self, offset_msg_id: str, queue_offset: int, msg_id: str, state: TransactionState, *,
                    from_check: bool) -> dict:
        _, commitlog_offset = decode_offset_msg_id(offset_msg_id)
        return {"producerGroup": self.group, "tranStateTableOffset": queue_offset, "commitLogOffset": commitlog_offset,
                "commitOrRollback": state.value, "fromTransactionCheck": from_check, "msgId": msg_id,
                "transactionId": msg_id}

    async def _on_check(self, cmd: RemotingCommand) -> None:
        msg = StoredMessage(cmd.body)
        try:
            state = await _maybe_await(self._check(msg))
        except Exception:
            log.exception("transaction check of %s failed; answering UNKNOWN", msg.uniq_key)
            state = TransactionState.UNKNOWN
        header = self._end_header(cmd.get_str("offsetMsgId", msg.msg_id), cmd.get_int("tranStateTableOffset", 0),
                                  msg.uniq_key or msg.msg_id, state, from_check=True)
        header["commitLogOffset"] = cmd.get_int("commitLogOffset", msg.physical_offset)
        addr = f"{msg.store_host}"
        asyncio.ensure_future(self._answer_check(addr, header))
        return None

    async def _answer_check(self, addr: str, header: dict) -> None:
        try:
            await self.instance.api.end_transaction(addr, header)
        except MQClientError as exc:
            log.warning("could not answer a transaction check to %s: %s", addr, exc)


async def _maybe_await(value):
    return await value if inspect.isawaitable(value) else value
