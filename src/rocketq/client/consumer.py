"""What push and lite-pull consumers share: subscriptions, heartbeats, rebalancing, start offsets.

Rebalance (RocketMQ ``RebalanceImpl`` with ``AllocateMessageQueueAveragely``): for each subscribed
topic, the sorted readable queues are split among the group's sorted client ids, each client
taking a contiguous run of ``len(queues) // len(clients)`` queues (the first ``len % n`` clients one
more).  It runs at start, every 20 s, and at once when a broker sends NOTIFY_CONSUMER_IDS_CHANGED.
In the broadcast model every client takes every queue.  A cluster-model consumer also subscribes
``%RETRY%<group>``, where its failed messages come back.

A queue's first offset is the group's committed offset; without one, ``consume_from`` decides:
LAST (the queue's end; RocketMQ's broker answers 0 for a young queue, so a new group still reads a
new topic from the start), FIRST (its beginning) or TIMESTAMP (the first message stored at or after
``consume_timestamp_ms``).  Retry topics always start at the beginning.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from rocketq.client.instance import ClientInstance
from rocketq.client.model import (
    ConsumeFrom,
    Credentials,
    MessageModel,
    MessageQueue,
    MQClientError,
    PullResult,
    PullStatus,
)
from rocketq.client.offset_store import LocalOffsetStore, RemoteOffsetStore
from rocketq.common import fastjson
from rocketq.common.aio import wait_event
from rocketq.common.javahash import tag_hash
from rocketq.common.sysflag import RETRY_GROUP_TOPIC_PREFIX
from rocketq.filter import TAG, subscription
from rocketq.remoting import RequestCode, ResponseCode

log = logging.getLogger("rocketq.client")

REBALANCE_INTERVAL_S = 20.0
# while a subscribed topic has no route yet (created a moment ago, its registration still on the way to
# the NameServers) the consumer looks again after 1 s, then 2, 4 ... up to the rebalance interval,
# instead of waiting a whole interval at once
ROUTE_WAIT_FIRST_S = 1.0
PERSIST_INTERVAL_S = 5.0
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PULL_ERROR_BACKOFF_S = 1.0


def allocate_average(queues: list[MessageQueue], clients: list[str], me: str) -> list[MessageQueue]:
    if me not in clients or not queues:
        return []
    n, index = len(clients), clients.index(me)
    mod = len(queues) % n
    if len(queues) <= n:
        size = 1
    else:
        size = len(queues) // n + (1 if mod > 0 and index < mod else 0)
    start = index * size if mod > 0 and index < mod else index * size + mod
    return queues[start:start + max(0, min(size, len(queues) - start))]


def parse_expression(expression: str) -> set[str] | None:
    """``"TagA || TagB"`` -> {"TagA", "TagB"}; None for ``*``."""
    expression = (expression or "*").strip()
    if expression in ("*", ""):
        return None
    return {t.strip() for t in expression.split("||") if t.strip()}


def restore_retry_topic(msg) -> None:
    """Messages from ``%RETRY%group`` are shown under the topic they were first sent to."""
    if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        real = msg.properties.get(PROPERTY_RETRY_TOPIC)
        if real:
            msg.topic = real


class ConsumerBase:
    consume_type = "CONSUME_PASSIVELY"

    def __init__(self, group: str, namesrv: str | list[str] = "127.0.0.1:9876", *,
                 model: MessageModel = MessageModel.CLUSTERING, consume_from: ConsumeFrom = ConsumeFrom.LAST,
                 consume_timestamp_ms: int = 0, credentials: Credentials | None = None, ssl_context=None,
                 offsets_dir=None, offset_store=None, pull_batch_size: int = 32, timeout_s: float = 3.0):
        self.group = group
        self.model = model
        self.consume_from = consume_from
        self.consume_timestamp_ms = consume_timestamp_ms
        self.pull_batch_size = pull_batch_size
        self.instance = ClientInstance(namesrv, credentials=credentials, ssl_context=ssl_context, timeout_s=timeout_s)
        self.instance.heartbeat_data = self._heartbeat_data
        self.instance.handlers[RequestCode.NOTIFY_CONSUMER_IDS_CHANGED] = self._on_ids_changed
        self.instance.handlers[RequestCode.RESET_CONSUMER_CLIENT_OFFSET] = self._on_reset_offset
        self.subscriptions: dict[str, str] = {}
        self._sub_versions: dict[str, int] = {}      # topic -> ms of its subscribe (Java's subVersion)
        self.expression_types: dict[str, str] = {}           # topic -> SQL92 for a selector (else a tag expression)
        if offset_store is not None:              # e.g. MemoryOffsetStore: a reader that commits nothing
            self.offsets = offset_store
        elif model == MessageModel.CLUSTERING:
            self.offsets = RemoteOffsetStore(self.instance, group)
        else:
            self.offsets = LocalOffsetStore(self.instance.client_id.split("#")[0].replace("@", "-") + f"-{group}",
                                            group, offsets_dir)
        self.assigned: dict[MessageQueue, str] = {}          # queue -> tag expression
        self._pull_from: dict[MessageQueue, int] = {}         # queue -> brokerId its last pull answer suggested
        self._tasks: list[asyncio.Task] = []
        self._rebalance_now = asyncio.Event()
        self._rebalance_lock = asyncio.Lock()
        self._unrouted: set[str] = set()         # subscribed topics the NameServers had no route for
        self._route_wait_s = ROUTE_WAIT_FIRST_S / 2
        self.running = False
        # the last pull the broker refused (NO_PERMISSION): pulls keep retrying, as an ACL file may
        # change, but a caller that would rather stop (the command line) can see why nothing comes
        self.refusal: MQClientError | None = None

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = TAG) -> None:
        """Read *topic*: messages with the tags of *expression* (``"TagA || TagB"``, ``*`` for all),
        or with ``expression_type="SQL92"`` the messages whose properties *expression* selects
        (``"region = 'eu' AND amount > 100"``; the broker needs ``enablePropertyFilter=true``).
        A selector that does not parse raises :class:`rocketq.filter.FilterError` here, naming the
        position; :meth:`start` asks each broker whether it serves it (CHECK_CLIENT_CONFIG)."""
        subscription(expression or "*", expression_type)          # raises FilterError for a bad one
        self.subscriptions[topic] = expression or "*"
        self.expression_types[topic] = expression_type
        # newer than what this group's heartbeats registered before: a broker keeps the highest
        self._sub_versions[topic] = max(int(time.time() * 1000), self._sub_versions.get(topic, 0) + 1)

    def tags_of(self, topic: str, expression: str) -> set[str] | None:
        """The tags a pull of *topic* keeps (None: all, or a selector the broker applied)."""
        return None if self.expression_types.get(topic, TAG) != TAG else parse_expression(expression)

    async def check_in_brokers(self) -> None:
        """CHECK_CLIENT_CONFIG of every SQL92 subscription at every master of its topic, as Java's
        ``checkClientInBroker`` at start; raises MQClientError with the broker's reason."""
        for topic, expression in self.subscriptions.items():
            kind = self.expression_types.get(topic, TAG)
            if kind == TAG:
                continue
            route = await self.instance.route(topic)
            for b in route.broker_datas if route is not None else ():
                if not b.master:
                    continue
                try:
                    await self.instance.api.check_client_config(b.master, self.group, self.instance.client_id, topic,
                                                                expression, kind)
                except MQClientError as exc:
                    if exc.code != ResponseCode.SYSTEM_ERROR:
                        raise
                    raise MQClientError(exc.code, f"{exc.remark} (the broker serves {kind} subscriptions with "
                                                  "enablePropertyFilter=true)", exc.address) from None

    # -- lifecycle ---------------------------------------------------------------------------

    async def start(self):
        if self.running:
            return self
        if self.model == MessageModel.CLUSTERING and self.subscriptions:
            self.subscriptions.setdefault(f"{RETRY_GROUP_TOPIC_PREFIX}{self.group}", "*")
        for topic in self.subscriptions:
            if await self.instance.route(topic) is None and not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning("topic %s has no route yet; the consumer waits for it", topic)
        await self.check_in_brokers()
        self.running = True
        await self.instance.heartbeat_now()
        await self.rebalance()
        self.instance.start_heartbeats()
        self._tasks += [asyncio.create_task(self._rebalance_loop()), asyncio.create_task(self._persist_loop())]
        return self

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for mq in list(self.assigned):
            await self._queue_removed(mq)
        await self.offsets.persist()
        for addr in sorted(self.instance.broker_addrs()):
            with contextlib.suppress(MQClientError):
                await self.instance.api.unregister_client(addr, self.instance.client_id, consumer_group=self.group)
        await self.instance.close()

    async def __aenter__(self):
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.shutdown()

    def _heartbeat_data(self) -> dict:
        subs = [{"topic": t, "subString": e, "tagsSet": sorted(self.tags_of(t, e) or []),
                 "codeSet": sorted(tag_hash(x) for x in self.tags_of(t, e) or []),
                 "subVersion": self._sub_versions.get(t, 0),
                 "classFilterMode": False, "expressionType": self.expression_types.get(t, TAG)}
                for t, e in self.subscriptions.items()]
        return {"producerDataSet": [], "consumerDataSet": [{
            "groupName": self.group, "consumeType": self.consume_type, "messageModel": self.model.value,
            "consumeFromWhere": self.consume_from.value, "subscriptionDataSet": subs, "unitMode": False}]}

    # -- rebalancing -------------------------------------------------------------------------

    async def _on_ids_changed(self, cmd) -> None:
        self._rebalance_now.set()
        return None

    async def _on_reset_offset(self, cmd) -> None:
        """An operator reset the group's offsets (RESET_CONSUMER_CLIENT_OFFSET): the queues of ours
        it names go on from their new offsets now, what was pulled of them before dropped."""
        if cmd.get_str("group", "") != self.group:
            return None
        try:
            table = fastjson.loads(cmd.body or b"{}").get("offsetTable") or {}
            targets = {MessageQueue(k["topic"], k["brokerName"], int(k["queueId"])): int(v) for k, v in table.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("offset reset from a broker that does not parse: %s", exc)
            return None
        async with self._rebalance_lock:
            for mq, offset in targets.items():
                if mq in self.assigned:
                    log.info("offset of %s reset to %d by the broker", mq, offset)
                    await self.reset_queue(mq, offset)
        return None

    async def reset_queue(self, mq: MessageQueue, offset: int) -> None:
        """Go on with *mq* from *offset*: its puller and what it pulled are dropped, then it starts again."""
        expression = self.assigned[mq]
        await self._queue_removed(mq)
        self.offsets.update(mq, offset)
        self.assigned[mq] = expression
        await self._queue_added(mq, expression)

    async def _rebalance_loop(self) -> None:
        while True:
            await wait_event(self._rebalance_now, self._route_wait_s if self._unrouted else REBALANCE_INTERVAL_S)
            self._rebalance_now.clear()
            try:
                await self.rebalance()
            except MQClientError as exc:
                log.info("rebalance of %s failed, retried later: %s", self.group, exc)

    async def rebalance(self) -> None:
        async with self._rebalance_lock:
            wanted: dict[MessageQueue, str] = {}
            unrouted = set()
            for topic, expression in self.subscriptions.items():
                route = await self.instance.route(topic, refresh=True)
                if route is None:
                    if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                        unrouted.add(topic)
                    continue
                queues = sorted(route.read_queues())
                if self.model == MessageModel.CLUSTERING:
                    clients = await self._client_ids(route)
                    queues = allocate_average(queues, clients, self.instance.client_id)
                for mq in queues:
                    wanted[mq] = expression
            self._route_wait_s = min(self._route_wait_s * 2, REBALANCE_INTERVAL_S) if unrouted else ROUTE_WAIT_FIRST_S / 2
            self._unrouted = unrouted
            for mq in [q for q in self.assigned if q not in wanted]:
                await self._queue_removed(mq)
            for mq, expression in wanted.items():
                if mq not in self.assigned:
                    self.assigned[mq] = expression
                    await self._queue_added(mq, expression)

    async def _client_ids(self, route) -> list[str]:
        for b in route.broker_datas:
            if b.master:
                try:
                    ids = await self.instance.api.consumer_ids(b.master, self.group)
                except MQClientError:
                    continue
                if ids:
                    return sorted(ids)
        return [self.instance.client_id]

    async def _queue_added(self, mq: MessageQueue, expression: str) -> None:
        raise NotImplementedError

    async def _queue_removed(self, mq: MessageQueue) -> None:
        self.assigned.pop(mq, None)
        await self.offsets.persist([mq])
        self.offsets.remove(mq)

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(PERSIST_INTERVAL_S)
            await self.offsets.persist()

    # -- offsets -----------------------------------------------------------------------------

    async def broker_addr(self, mq: MessageQueue) -> str:
        """The master of *mq*'s broker set (a slave while the master is away): locks, send-back."""
        return await self.instance.read_addr(mq)

    async def pull_addr(self, mq: MessageQueue) -> str:
        """Where to pull *mq*: the broker the last answer for it suggested (a slave when this
        consumer reads data the master no longer holds in memory and slaveReadEnable is on)."""
        return await self.instance.pull_addr(mq, self._pull_from.get(mq, 0))

    async def pull_once(self, mq: MessageQueue, offset: int | None, expression: str, tags: set[str] | None,
                        suspend_ms: int) -> tuple[int | None, PullResult | None, list]:
        """One pull from *offset* (the start offset when None): (next offset, result, messages that
        match *tags*, their topics restored).  On an error it logs, forgets the route, waits a
        second and returns (offset, None, [])."""
        try:
            if offset is None:
                offset = await self.start_offset(mq)
            result = await self.instance.api.pull(await self.pull_addr(mq), mq, self.group, offset,
                                                  max_nums=self.pull_batch_size, expression=expression,
                                                  expression_type=self.expression_types.get(mq.topic, TAG),
                                                  suspend_ms=suspend_ms)
        except MQClientError as exc:
            log.info("pull from %s failed, retrying: %s", mq, exc)
            if exc.code == ResponseCode.NO_PERMISSION:
                self.refusal = exc
            self.instance.forget_route(mq.topic)
            await asyncio.sleep(PULL_ERROR_BACKOFF_S)
            return offset, None, []
        self._pull_from[mq] = result.suggest_broker_id
        if result.status == PullStatus.OFFSET_ILLEGAL:
            log.warning("offset %d of %s is illegal; moving to %d", offset, mq, result.next_begin_offset)
            self.offsets.update(mq, result.next_begin_offset)
        msgs = result.messages if tags is None else [m for m in result.messages if m.tags in tags]
        if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):     # a queue's records all carry its topic
            for m in msgs:
                restore_retry_topic(m)
        return result.next_begin_offset, result, msgs

    async def start_offset(self, mq: MessageQueue) -> int:
        stored = await self.offsets.read(mq)
        if stored >= 0:
            return stored
        addr = await self.broker_addr(mq)
        if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or self.consume_from == ConsumeFrom.FIRST:
            return await self.instance.api.min_offset(addr, mq)
        if self.consume_from == ConsumeFrom.TIMESTAMP:
            return await self.instance.api.search_offset(addr, mq, self.consume_timestamp_ms)
        return await self.instance.api.max_offset(addr, mq)
