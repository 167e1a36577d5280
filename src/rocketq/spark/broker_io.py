"""Talking to rocketq from Spark processes: routes and offsets on the driver, pulls on executors.

Everything runs on rocketq's client loop thread (:func:`rocketq.client.sync.run`) with one
:class:`~rocketq.client.api.MQClientAPI` per process (Spark reuses its Python workers, so
connections outlive a task).  Nothing here is pickled: sources keep only options and plain data.

Offsets are ``{topic: {broker: {queue_id: offset}}}`` with string queue ids and every level
sorted, so the JSON Spark stores in its checkpoint compares equal for equal offsets.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from dataclasses import dataclass

from rocketq.client.api import MQClientAPI
from rocketq.client.model import MessageQueue, MQClientError
from rocketq.client.sync import run, submit
from rocketq.remoting.codes import ResponseCode
from rocketq.spark.options import OptionError

Offsets = dict                     # {topic: {broker: {"qid": offset}}}
SYSTEM_TOPIC = re.compile(r"^(rmq_sys_|RMQ_SYS_|SCHEDULE_TOPIC|TBW102|%RETRY%|%DLQ%|SELF_TEST_TOPIC|OFFSET_MOVED_EVENT|"
                          r"BenchmarkTest|TRANS_CHECK_MAX_TIME_TOPIC|DefaultCluster|broker-|rocketq-)")
CALL_TIMEOUT_S = 30.0

_API: MQClientAPI | None = None
_API_LOCK = threading.Lock()


def api() -> MQClientAPI:
    global _API
    with _API_LOCK:
        if _API is None:
            _API = MQClientAPI(timeout_s=CALL_TIMEOUT_S)
        return _API


__all__ = ["Catalog", "QueueRef", "api", "call", "submit", "canonical", "flatten", "nest", "parse_offsets_json"]


def call(coro):
    """Run *coro* on the client loop thread and wait for it."""
    return run(coro, CALL_TIMEOUT_S * 2)


@dataclass(frozen=True)
class QueueRef:
    topic: str
    broker: str
    queue_id: int
    addr: str

    @property
    def mq(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)


def canonical(offsets: dict) -> Offsets:
    """Sorted, string-keyed copy (the form Spark must always see)."""
    return {t: {b: {str(q): int(o) for q, o in sorted(qs.items(), key=lambda kv: int(kv[0]))}
                for b, qs in sorted(bs.items())} for t, bs in sorted(offsets.items())}


def flatten(offsets: Offsets) -> dict[tuple[str, str, int], int]:
    return {(t, b, int(q)): o for t, bs in offsets.items() for b, qs in bs.items() for q, o in qs.items()}


def nest(flat: dict[tuple[str, str, int], int]) -> Offsets:
    out: dict = {}
    for (t, b, q), o in flat.items():
        out.setdefault(t, {}).setdefault(b, {})[str(q)] = o
    return canonical(out)


class Catalog:
    """Driver-side view of the cluster: which queues the topics have and their offsets."""

    def __init__(self, namesrvs: list[str]):
        self.namesrvs = namesrvs

    def _ask(self, coro, what: str):
        try:
            return call(coro)
        except MQClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise
            if exc.code < 0:
                raise ConnectionError(f"{what}: cannot reach rocketq at {','.join(self.namesrvs)}: {exc}") from exc
            raise

    def resolve_topics(self, topics: list[str], pattern: str | None) -> list[str]:
        if pattern is None:
            return topics
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option 'topicPattern' is not a valid regular expression: {exc}") from None
        listed = self._ask(api().topic_list(self.namesrvs), "listing topics")
        return [t for t in listed if regex.fullmatch(t) and not SYSTEM_TOPIC.match(t)]

    def queues(self, topics: list[str], *, missing_ok: bool = False) -> list[QueueRef]:
        out = []
        for topic in topics:
            try:
                route = self._ask(api().get_route(self.namesrvs, topic), f"route of topic {topic!r}")
            except MQClientError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    if missing_ok:
                        continue
                    raise OptionError(f"topic {topic!r} does not exist on the NameServer "
                                      f"{','.join(self.namesrvs)}") from None
                raise
            for mq in route.read_queues():
                addr = route.read_addr_of(mq.broker_name)
                if addr:
                    out.append(QueueRef(topic, mq.broker_name, mq.queue_id, addr))
        return sorted(out, key=lambda q: (q.topic, q.broker, q.queue_id))

    def bounds(self, queues: list[QueueRef]) -> dict[tuple[str, str, int], tuple[int, int]]:
        """(min offset, max offset) of every queue, asked concurrently."""

        async def both(q: QueueRef):
            return await asyncio.gather(api().min_offset(q.addr, q.mq), api().max_offset(q.addr, q.mq))

        async def every():
            return await asyncio.gather(*(both(q) for q in queues))

        found = self._ask(every(), "queue offsets") if queues else []
        return {(q.topic, q.broker, q.queue_id): (lo, hi) for q, (lo, hi) in zip(queues, found)}

    def search(self, queues: list[QueueRef], timestamp_ms: int) -> dict[tuple[str, str, int], int]:

        async def every():
            return await asyncio.gather(*(api().search_offset(q.addr, q.mq, timestamp_ms) for q in queues))

        found = self._ask(every(), "offsets by timestamp") if queues else []
        return {(q.topic, q.broker, q.queue_id): o for q, o in zip(queues, found)}

    def commit(self, group: str, queues: list[QueueRef], offsets: dict[tuple[str, str, int], int]) -> None:
        todo = [(q, offsets[(q.topic, q.broker, q.queue_id)]) for q in queues
                if (q.topic, q.broker, q.queue_id) in offsets]

        async def every():
            await asyncio.gather(*(api().update_offset(q.addr, group, q.mq, o) for q, o in todo))

        if todo:
            self._ask(every(), f"committing offsets of group {group!r}")


def parse_offsets_json(text: str, option: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option {option!r} is neither earliest, latest nor JSON: {exc}") from None
    if not isinstance(value, dict) or not all(isinstance(b, dict) and all(isinstance(q, dict) for q in b.values())
                                              for b in value.values()):
        raise OptionError(f"option {option!r} must be JSON like "
                          '{"Topic": {"broker-a": {"0": 42, "1": -2}}} (-2 earliest, -1 latest)')
    return value
