"""PopConsumer: RocketMQ 5's pop consumption over remoting, the broker keeping what is in flight.

Unlike the push and lite-pull consumers, which own queues and commit offsets, a pop consumer asks
the broker for messages (POP_MESSAGE) and the broker hands each one out for an invisible time:
acked in time (:meth:`PopConsumer.ack`) it is done, else it comes back from the group's pop retry
topic with ``reconsume_times`` one higher, up to the group's max retries, then to ``%DLQ%group``.
Any number of pop consumers of a group share every queue, and so do gRPC consumers of the group.

Each :class:`PoppedMessage` carries the ``extra_info`` the broker's answer lets the client build
(RocketMQ's ``ExtraInfoUtil.buildExtraInfo``)::

    ckOffset popTime invisibleTime reviveQid mark brokerName queueId queueOffset

``mark`` 1 means the message came from the pop retry topic ``%RETRY%<group>_<topic>``; an ack or
a change of invisible time names that topic then, as RocketMQ's clients do.
"""

from __future__ import annotations

import base64
import itertools
from dataclasses import dataclass

from rocketq.client.api import MQClientAPI
from rocketq.client.instance import ClientInstance
from rocketq.client.model import Credentials, MQClientError
from rocketq.filter import TAG, subscription
from rocketq.remoting import ResponseCode
from rocketq.store.record import StoredMessage

RETRY_PREFIX = "%RETRY%"


@dataclass
class PoppedMessage:
    message: StoredMessage          # the record (its topic is the pop retry topic for a retried message)
    topic: str                      # the topic popped
    extra_info: str
    addr: str                       # the broker that handed it out

    body = property(lambda self: self.message.body)
    properties = property(lambda self: self.message.properties)
    tags = property(lambda self: self.message.tags)
    reconsume_times = property(lambda self: self.message.reconsume_times)
    queue_id = property(lambda self: self.message.queue_id)
    queue_offset = property(lambda self: self.message.queue_offset)

    @property
    def ack_topic(self) -> str:
        """The topic an ack names: the pop retry topic for a retried message (mark 1)."""
        return self.message.topic if self.extra_info.split(" ")[4] != "0" else self.topic


def extra_infos(r, records: list[StoredMessage], broker_name: str) -> list[str]:
    """Each record's extraInfo from a POP_MESSAGE answer's header (``processPopResponse``)."""
    f = r.ext_fields
    pop_time, invisible, revive = f.get("popTime"), f.get("invisibleTime"), f.get("reviveQid")
    starts = {}
    for part in str(f.get("startOffsetInfo") or "").split(";"):
        mark, _, rest = part.partition(" ")
        qid, _, start = rest.partition(" ")
        if start:
            starts[(mark, qid)] = start
    out = []
    for m in records:
        mark = "1" if m.topic.startswith(RETRY_PREFIX) else "0"
        ck = starts.get((mark, str(m.queue_id)), str(m.queue_offset))
        out.append(f"{ck} {pop_time} {invisible} {revive} {mark} {broker_name} {m.queue_id} {m.queue_offset}")
    return out


class PopConsumer:
    def __init__(self, group: str, namesrv: str | list[str] = "127.0.0.1:9876", *,
                 credentials: Credentials | None = None, ssl_context=None, timeout_s: float = 3.0):
        self.group = group
        self.instance = ClientInstance(namesrv, credentials=credentials, ssl_context=ssl_context, timeout_s=timeout_s)
        self.subscriptions: dict[str, tuple[str, str]] = {}      # topic -> (expression, type)
        self._turn = itertools.count()

    @property
    def api(self) -> MQClientAPI:
        return self.instance.api

    def subscribe(self, topic: str, expression: str = "*", *, expression_type: str = TAG) -> None:
        subscription(expression or "*", expression_type)        # a bad selector fails here, naming the position
        self.subscriptions[topic] = (expression or "*", expression_type)

    async def __aenter__(self) -> PopConsumer:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self.instance.close()

    async def _brokers(self, topic: str) -> list[tuple[str, str]]:
        route = await self.instance.route(topic)
        if route is None:
            raise MQClientError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} has no route")
        return [(b.broker_name, b.master) for b in route.broker_datas if b.master]

    async def receive(self, topic: str, max_messages: int = 32, *, invisible_s: float = 30.0,
                      wait_s: float = 0.0) -> list[PoppedMessage]:
        """Up to *max_messages* (at most 32) of *topic* from one of its brokers, taking turns; with
        *wait_s* the broker holds the request until a message arrives or the time is over."""
        expression, kind = self.subscriptions.get(topic, ("*", TAG))
        brokers = await self._brokers(topic)
        for i in range(len(brokers)):
            name, addr = brokers[(next(self._turn) + i) % len(brokers)]
            last = i == len(brokers) - 1
            r, records = await self.api.pop(addr, self.group, topic, max_nums=max_messages,
                                            invisible_ms=int(invisible_s * 1000),
                                            poll_ms=int(wait_s * 1000) if last else 0,
                                            expression=expression, expression_type=kind)
            if records:
                return [PoppedMessage(m, topic, x, addr) for m, x in zip(records, extra_infos(r, records, name))]
        return []

    async def ack(self, msg: PoppedMessage) -> bool:
        """Ack *msg*; False when the broker no longer had this copy in flight."""
        return await self.api.ack(msg.addr, self.group, msg.ack_topic, msg.queue_id, msg.queue_offset, msg.extra_info)

    async def ack_all(self, msgs: list[PoppedMessage]) -> None:
        """One BATCH_ACK_MESSAGE per broker for *msgs*, grouped per queue and pop as RocketMQ's client does."""
        by_addr: dict[str, dict[tuple, dict]] = {}
        for m in msgs:
            ck, pop_time, invisible, revive, mark, broker, qid, offset = m.extra_info.split(" ")
            acks = by_addr.setdefault(m.addr, {})
            a = acks.setdefault((mark, qid, ck, pop_time), {
                "c": self.group, "t": m.topic, "r": mark, "so": int(ck), "q": int(qid), "rq": int(revive),
                "pt": int(pop_time), "it": int(invisible), "bits": set(), "broker": broker})
            a["bits"].add(int(offset) - int(ck))
        for addr, acks in by_addr.items():
            entries = [{**{k: v for k, v in a.items() if k not in ("bits", "broker")}, "b": _bitset(a["bits"])}
                       for a in acks.values()]
            await self.api.batch_ack(addr, next(iter(acks.values()))["broker"], entries)

    async def change_invisible_duration(self, msg: PoppedMessage, invisible_s: float) -> None:
        """Hand *msg* back after *invisible_s* (0: now); *msg* then carries the new copy's extra_info."""
        f = await self.api.change_invisible_time(msg.addr, self.group, msg.ack_topic, msg.queue_id, msg.queue_offset,
                                                 msg.extra_info, int(invisible_s * 1000))
        parts = msg.extra_info.split(" ")
        parts[1:4] = [str(f.get("popTime")), str(f.get("invisibleTime")), str(f.get("reviveQid"))]
        msg.extra_info = " ".join(parts)


def _bitset(bits: set[int]) -> str:
    """A java.util.BitSet's toByteArray (little-endian), base64 as fastjson writes a byte[]."""
    raw = bytearray((max(bits) // 8 + 1) if bits else 0)
    for b in bits:
        raw[b // 8] |= 1 << (b % 8)
    return base64.b64encode(bytes(raw)).decode()
