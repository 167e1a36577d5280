"""Popping messages for consumer groups (RocketMQ's pop consumption), over the shared store.

Used by gRPC receives (:mod:`rocketq.grpc_endpoint.consumer_service`) and remoting POP_MESSAGE
(:mod:`rocketq.broker.pop.remoting`) alike: both see one state, so a message popped over one
protocol is in flight for the other too.  :meth:`Popper.pop` returns :class:`Popped` entries (the
stored message and its in-flight record); each protocol makes its own receipt handle from them.
All messages of one pop share one invisible deadline (the pop's time plus its invisible time),
which is what a remoting client's ``extraInfo`` carries back.

A receive pops from every readable queue of the topic for the group, and first from the group's
pop retry topic ``%RETRY%<group>_<topic>`` (RocketMQ's ``KeyBuilder.buildPopRetryTopicV1``).
Each message handed out is in flight (see :mod:`rocketq.broker.pop.pop_state`) until it is
acked or its invisible time is over.  Then:

* normal group: a copy goes to the pop retry topic with ``reconsumeTimes`` = the attempt just
  made, so it is delivered again with ``delivery_attempt + 1``; once the attempt reaches the
  group's max delivery attempts (``retryMaxTimes + 1``, 17 by default) the copy goes to
  ``%DLQ%<group>`` instead;
* FIFO group (``consumeMessageOrderly``): a queue with a message in flight is not popped at all,
  so the next message of a message group (FIFO sends keep a group on one queue) is handed out
  only after the previous one was acked or dead-lettered; an expired message is handed out again
  from its place with the next attempt number, or dead-lettered at the max.

Messages of an auto-renew receive (push consumers) are renewed in place before they would become
visible, while their client is alive (see :meth:`Sessions.alive`) and within the group's
``consumeTimeoutMinute`` (RocketMQ proxy's ``DefaultReceiptHandleManager``); a nack stops that.
Once the client is gone they come back within ``clear_invisible_ms`` (the proxy's
``invisibleTimeMillisWhenClear``, 1 s) instead of after the rest of their invisible time.

A tag filter is applied by the store at the consume-queue level, an SQL92 filter on each message's
properties as it is read; a pop round reads each queue on past what the filter drops until the batch is full, within a budget of consume-queue units per round
(:data:`MAX_SCAN_UNITS_PER_ROUND`); a receive whose round ran out of budget starts another one at
once (others take the lock in between) until its long-polling time is over.

The group's consumer offset in ``consumerOffset.json`` follows the lowest offset in flight, so
remoting tools see the group's progress and lag.  All state changes run on the event loop under
one lock; the pop log makes them durable.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import NamedTuple

from rocketq.broker.topic_config import TopicConfigError
from rocketq.common.sysflag import PROPERTY_UNIQ_KEY
from rocketq.filter import Subscription
from rocketq.broker.pop.pop_state import Handle, InFlight, PopState, QueueKey
from rocketq.store.results import GetStatus

log = logging.getLogger(__name__)

PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
MAX_WAITERS_PER_TOPIC = 10_000
REVIVE_RETRY_MS = 1_000
# Reading a backlog for a receive (RocketMQ's pop reads up to maxFilterMessageSize, 16,000 bytes =
# 800 consume-queue units, per queue and pop, and the broker's long polling pops again):
MAX_SCAN_UNITS_PER_ROUND = 50_000   # units one pop round passes over (all queues), holding the lock; then the
#                                     receive lets others in and scans on in a new round, up to its polling time
FILTER_READ_MAX_UNITS = 4_096      # units one store read looks at under a tag filter (~80 KB of consume queue)
FILTER_READ_GROWTH = 4             # each read under a filter looks at this many times more units than the last
_READ_ON = (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE, GetStatus.MESSAGE_WAS_REMOVING)   # what is read past


class PopError(Exception):
    """What the pop state refuses: *kind* is "malformed" (a handle that does not parse), "expired"
    (its invisible time is over), "unknown" (acked, or replaced by a change of invisible time) or
    "store" (the retry or dead-letter topic could not be written)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


class Popped(NamedTuple):
    """A message handed out: its queue (the topic's or the group's pop retry topic), the stored
    record, and its in-flight entry (offset, version, deadline, attempt)."""
    key: QueueKey
    retry: bool
    message: object
    entry: InFlight

    def handle(self) -> str:
        """The gRPC receipt handle (see :class:`~rocketq.broker.pop.pop_state.Handle`)."""
        e = self.entry
        return Handle(self.retry, self.key.queue_id, e.offset, e.version, e.deadline_ms).encode()


def _passes(sub: Subscription, m) -> bool:
    try:
        return sub.matches(m.properties)
    except (UnicodeDecodeError, ValueError):       # properties that are not text pass no filter
        return False


def pop_retry_topic(group: str, topic: str) -> str:
    return f"%RETRY%{group}_{topic}"


def dlq_topic(group: str) -> str:
    return f"%DLQ%{group}"


class Popper:
    def __init__(self, broker, state: PopState, *, clock_ms):
        self._broker = broker
        self.state = state
        self._clock_ms = clock_ms
        self.lock = asyncio.Lock()
        self._rotation = 0
        self._renew_for: str | None = None
        self._now_ms = 0                     # the time of the pop in progress (one deadline for all it hands out)
        self._scan_left = MAX_SCAN_UNITS_PER_ROUND
        self.cut_short = False               # the last pop round stopped at its scan budget, not at the queues' ends
        self._loop = asyncio.get_running_loop()
        self._waiters: dict[str, set[asyncio.Future]] = {}
        self.renewals = 0                    # auto-renew messages renewed (for tests and stats)
        self.cleared = 0                     # ... given back early because their client was gone

    # -- waking long polls --------------------------------------------------------------------

    def watch(self, topics: list[str]) -> asyncio.Future:
        fut = self._loop.create_future()
        for t in topics:
            waiters = self._waiters.setdefault(t, set())
            if len(waiters) < MAX_WAITERS_PER_TOPIC:
                waiters.add(fut)
        self._broker.store.dispatcher.catch_up()    # sends answered before this watch: in the queues now
        return fut

    @property
    def waiting(self) -> bool:
        """A receive waits for an arrival (the dispatcher then wakes it at once, not coalesced)."""
        return bool(self._waiters)

    def unwatch(self, topics: list[str], fut: asyncio.Future) -> None:
        for t in topics:
            waiters = self._waiters.get(t)
            if waiters is not None:
                waiters.discard(fut)
                if not waiters:
                    del self._waiters[t]

    def wake(self, topic: str) -> None:
        for fut in self._waiters.pop(topic, ()):
            if not fut.done():
                fut.set_result(True)

    def on_arrival(self, topic: str, _queue_id: int, _next_offset: int) -> None:
        """Store arrival listener (dispatcher thread)."""
        if topic in self._waiters:
            self._loop.call_soon_threadsafe(self.wake, topic)

    # -- popping ------------------------------------------------------------------------------

    def max_attempts(self, group: str) -> int:
        cfg = self._broker.groups.get(group)
        return (cfg.retry_max_times if cfg else 16) + 1

    def is_fifo(self, group: str) -> bool:
        cfg = self._broker.groups.get(group)
        return bool(cfg and cfg.consume_message_orderly)

    async def receive(self, group: str, topic: str, queue_ids: list[int], *, batch: int, invisible_ms: int,
                      sub: Subscription | None, wait_s: float, renew_for: str | None = None) -> list[Popped]:
        """:meth:`pop` under :attr:`lock`, waiting up to *wait_s* for messages (long polling):
        woken by arrivals in the topic or its pop retry topic, and by invisible times running out."""
        loop = asyncio.get_running_loop()
        give_up = loop.time() + wait_s
        watched = [topic, pop_retry_topic(group, topic)]
        while True:
            fut = self.watch(watched)
            try:
                async with self.lock:
                    got = await self.pop(group, topic, queue_ids, batch=batch, invisible_ms=invisible_ms, sub=sub,
                                         renew_for=renew_for)
                    more = self.cut_short               # a backlog not yet read through (filtered out)
                left = give_up - loop.time()
                if got or left <= 0:
                    return got
                if more:
                    await asyncio.sleep(0)              # let acks and other receives have the lock, then read on
                    continue
                await asyncio.wait({fut}, timeout=min(left, self._next_expiry_s()))
            finally:
                self.unwatch(watched, fut)

    def _next_expiry_s(self) -> float:
        nxt = self.state.next_deadline_ms()
        return 1.0 if nxt is None else max(0.01, min(1.0, nxt / 1000 - time.time() + 0.01))

    async def pop(self, group: str, topic: str, queue_ids: list[int], *, batch: int, invisible_ms: int,
                  sub: Subscription | None, renew_for: str | None = None) -> list[Popped]:
        """Up to *batch* messages, retry topic first; the caller holds :attr:`lock`."""
        out: list[Popped] = []
        self._now_ms = self._clock_ms()
        retry = pop_retry_topic(group, topic)
        sources = []
        if self._broker.topics.get(retry) is not None:
            sources += [(QueueKey(group, retry, q), True) for q in range(self._broker.topics.get(retry).read_queue_nums)]
        self._rotation += 1
        n = len(queue_ids)
        sources += [(QueueKey(group, topic, queue_ids[(self._rotation + i) % n]), False) for i in range(n)]
        fifo = self.is_fifo(group)
        self._renew_for = renew_for          # read by _popped; pops never overlap (the caller holds the lock)
        self._scan_left, self.cut_short = MAX_SCAN_UNITS_PER_ROUND, False
        try:
            for key, is_retry in sources:
                if len(out) >= batch:
                    break
                out += await self._pop_queue(key, is_retry, batch - len(out), invisible_ms, sub, fifo)
        finally:
            self._renew_for = None
        return out

    def _initial_offset(self, key: QueueKey) -> int:
        committed = self._broker.offsets.query(key.group, key.topic, key.queue_id)
        if committed >= 0:
            return committed
        store = self._broker.store
        return 0 if store.min_offset(key.topic, key.queue_id) <= 0 else store.max_offset(key.topic, key.queue_id)

    async def _pop_queue(self, key: QueueKey, is_retry: bool, want: int, invisible_ms: int,
                         sub: Subscription | None, fifo: bool) -> list[Popped]:
        self._broker.offsets.take_reset(key.group, key.topic, key.queue_id)   # applied to the state already
        q = self.state.queue(key, lambda: self._initial_offset(key))
        out = []
        if fifo and q.inflight:
            now = self._clock_ms()
            if any(e.deadline_ms > now for e in q.inflight.values()):
                return out                       # the queue waits for its messages in flight
            for e in sorted(q.inflight.values(), key=lambda e: e.offset):
                m = self.read(key, e.offset)
                if m is None or e.attempt >= self.max_attempts(key.group):
                    if m is not None:
                        await self.dead_letter(key, e, m)
                    else:
                        self.finish(key, e)
                    continue
                if len(out) < want:
                    e2 = self.state.pop(key, e.offset, invisible_ms=invisible_ms, attempt=e.attempt + 1,
                                        now_ms=self._now_ms)
                    out.append(self._popped(key, is_retry, m, e2))
            if q.inflight:
                return out
        with self.state.batched():                      # one write to the pop log for the round
            out += self._scan(key, q, is_retry, want - len(out), invisible_ms, sub)
        self._commit(key)
        return out

    def _scan(self, key: QueueKey, q, is_retry: bool, want: int, invisible_ms: int,
              sub: Subscription | None) -> list[Popped]:
        """Read *key*'s queue on from its pop offset until *want* messages matched, the queue ends,
        or the round's scan budget is spent (then :attr:`cut_short` is set).  Under a tag filter
        the store skips other tags at the consume-queue level; each read looks at more units
        than the last (dense matches stay cheap, a backlog of other tags is crossed in few
        reads).  An SQL92 filter is evaluated on each message read (with the bit-map prefilter, only
        the messages whose bits may match are read).  The pop offset advances past
        everything looked at, taken or filtered out."""
        filtering = sub is not None and not sub.is_all
        codes = sub.codes if filtering else None
        bitmaps = getattr(self._broker.store, "filter_bitmaps", None) if filtering and sub.sql is not None else None
        prefilter = bitmaps.prefilter(key.group, key.topic, sub.expression) if bitmaps is not None else None
        out: list[Popped] = []
        count = want
        while len(out) < want:
            if self._scan_left <= 0:
                self.cut_short = True
                break
            count = min(count, self._scan_left)
            start = q.next_offset
            res = self._broker.store.get_messages(key.topic, key.queue_id, start, count, tag_codes=codes,
                                                  prefilter=prefilter)
            if res.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
                q.next_offset = res.next_begin_offset         # the queue was cut or reset under us
                break
            if res.status not in _READ_ON or res.next_begin_offset <= start:
                break                                         # the end of the queue (or nothing there yet)
            self._scan_left -= res.next_begin_offset - start
            next_offset = res.next_begin_offset
            for m in res.messages:
                if filtering and not _passes(sub, m):
                    continue                                  # a tags-code collision, or the selector says no
                if len(out) == want:
                    next_offset = m.queue_offset              # the rest of this read waits for the next pop
                    break
                e = self.state.pop(key, m.queue_offset, invisible_ms=invisible_ms, attempt=m.reconsume_times + 1,
                                   now_ms=self._now_ms)
                out.append(self._popped(key, is_retry, m, e))
            self.state.advance(key, next_offset)
            count = min(count * FILTER_READ_GROWTH, FILTER_READ_MAX_UNITS) if filtering else want - len(out)
        return out

    def _popped(self, key: QueueKey, is_retry: bool, m, e: InFlight) -> Popped:
        if self._renew_for:
            self.state.own(key, e, self._renew_for, self._now_ms)
        return Popped(key, is_retry, m, e)

    def read(self, key: QueueKey, offset: int):
        res = self._broker.store.get_messages(key.topic, key.queue_id, offset, 1)
        if res.messages and res.messages[0].queue_offset == offset:
            return res.messages[0]
        return None

    # -- acks and their relatives ----------------------------------------------------------------

    def key_of(self, group: str, topic: str, handle: Handle) -> QueueKey:
        return QueueKey(group, pop_retry_topic(group, topic) if handle.retry else topic, handle.queue_id)

    def in_flight(self, group: str, topic: str, receipt_handle: str, *,
                  repeat_ok: bool = False) -> tuple[QueueKey, InFlight] | None:
        """The message in flight *receipt_handle* names.  With *repeat_ok* (an ack), a handle that
        names none any more but has not expired yet gives None: acked already, or replaced by
        ChangeInvisibleDuration - RocketMQ's broker takes such an ack as done (it only writes
        another ack record), and its proxy refuses only an expired handle."""
        handle = Handle.parse(receipt_handle)
        if handle is None:
            raise PopError("malformed", f"receipt handle {receipt_handle[:80]!r} is malformed")
        key = self.key_of(group, topic, handle)
        e = self.state.find(key, handle)
        if e is not None:
            return key, e
        if handle.deadline_ms <= self._clock_ms():
            raise PopError("expired", f"receipt handle {receipt_handle!r} of group {group!r} topic "
                                                       f"{topic!r} has expired")
        if repeat_ok:
            return None
        raise PopError("unknown", f"receipt handle {receipt_handle!r} of group {group!r} topic "
                                                   f"{topic!r} names no message in flight (acked, or replaced by "
                                                   "ChangeInvisibleDuration)")

    def change(self, key: QueueKey, e: InFlight, invisible_ms: int) -> InFlight:
        """The client set the invisible time itself (a push consumer's nack): that ends its renewal."""
        return self.state.change(key, e, invisible_ms)

    def renew_due(self, alive, *, invisible_ms: int, ahead_ms: int, clear_ms: int) -> int:
        """Renew auto-renew messages about to become visible while their client is *alive* and
        within the group's consume timeout; a message whose client is gone comes back within
        *clear_ms* (RocketMQ proxy's ``clearGroup`` with ``invisibleTimeMillisWhenClear``).
        Returns how many were renewed."""
        now = self._clock_ms()
        renewed = 0
        verdicts: dict[str, bool] = {}
        for (key, offset), r in list(self.state.renewing.items()):
            q = self.state.queues.get(key)
            e = q.inflight.get(offset) if q else None
            if e is None or e.version != r.version or e.deadline_ms <= now:
                self.state.disown(key, offset)
                continue
            live = verdicts.get(r.client_id)
            if live is None:
                live = verdicts[r.client_id] = alive(r.client_id)
            if not live:
                if e.deadline_ms > now + clear_ms:
                    self.state.renew(key, e, clear_ms)       # in place: a late ack of the handle still works
                self.state.disown(key, offset)
                self.cleared += 1
                continue
            if e.deadline_ms - now > ahead_ms:
                continue
            cfg = self._broker.groups.get(key.group)
            if now - r.since_ms > (cfg.consume_timeout_minute if cfg else 15) * 60_000:
                self.state.disown(key, offset)               # consumed too long: let it come back
                continue
            self.state.renew(key, e, invisible_ms)
            renewed += 1
        self.renewals += renewed
        return renewed

    def finish(self, key: QueueKey, e: InFlight) -> None:
        self.state.ack(key, e)
        self._commit(key)
        if self.is_fifo(key.group):
            self.wake(key.topic)

    def _commit(self, key: QueueKey) -> None:
        q = self.state.queues.get(key)
        if q is not None:
            offsets, offset = self._broker.offsets, q.commit_offset()
            if offsets.query(key.group, key.topic, key.queue_id) != offset:     # unchanged: leave the file alone
                offsets.commit(key.group, key.topic, key.queue_id, offset)

    async def dead_letter(self, key: QueueKey, e: InFlight, m) -> None:
        props = dict(m.properties)
        origin = props.get(PROPERTY_RETRY_TOPIC, m.topic)
        props.setdefault(PROPERTY_DLQ_ORIGIN_TOPIC, origin)
        props.setdefault(PROPERTY_DLQ_ORIGIN_MESSAGE_ID, props.get(PROPERTY_UNIQ_KEY, m.msg_id))
        props.pop("DELAY", None)
        tc = self._broker.topics.create_retry_or_dlq(dlq_topic(key.group), 1)
        await self._put(m.to_message(topic=tc.topic_name, properties=props, queue_id=0, reconsume_times=e.attempt))
        self.finish(key, e)

    async def revive(self, key: QueueKey, e: InFlight) -> None:
        """A normal group's message whose invisible time is over: to the retry topic or the DLQ."""
        m = self.read(key, e.offset)
        if m is None:
            self.finish(key, e)
            return
        if e.attempt >= self.max_attempts(key.group):
            await self.dead_letter(key, e, m)
            return
        props = dict(m.properties)
        origin = props.setdefault(PROPERTY_RETRY_TOPIC, m.topic)
        props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, props.get(PROPERTY_UNIQ_KEY, m.msg_id))
        props.pop("DELAY", None)
        try:
            tc = self._broker.topics.create_retry_or_dlq(pop_retry_topic(key.group, origin), 1)
        except TopicConfigError as exc:
            log.error("no retry topic for group %s topic %s (%s); dead-lettering", key.group, origin, exc)
            await self.dead_letter(key, e, m)
            return
        await self._put(m.to_message(topic=tc.topic_name, properties=props,
                                     queue_id=random.randrange(tc.write_queue_nums), reconsume_times=e.attempt))
        self.finish(key, e)

    async def _put(self, msg) -> None:
        r = await self._broker.store.put_message_async(msg)
        if r.physical_offset < 0:
            raise PopError("store", f"storing into {msg.topic!r} failed: {r.status} {r.error or ''}")
        self._broker.replication.notify()

    async def revive_due(self) -> int:
        """Handle every message whose invisible time is over; returns how many."""
        due = self.state.due()
        for key, e in due:
            if self.is_fifo(key.group):
                self.wake(key.topic)              # its queue may be popped again now
                continue
            try:
                await self.revive(key, e)
            except PopError as exc:
                log.warning("reviving %s offset %d failed (trying again shortly): %s", key, e.offset, exc.message)
                self.state.defer(key, e, REVIVE_RETRY_MS)
        return len(due)
