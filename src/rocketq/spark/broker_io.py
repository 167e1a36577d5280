"""Talking to rocketq from Spark processes: routes and offsets on the driver, pulls on executors.

Everything runs on rocketq's client loop thread (:func:`rocketq.client.sync.run`) with one
:class:`~rocketq.client.api.MQClientAPI` per process and access settings (Spark reuses its Python
workers, so connections outlive a task; at most ``MAX_APIS`` settings are kept, the oldest closed).
Its connections read large answers straight into their own buffers
(:class:`~rocketq.remoting.receive.BufferedRemotingClient`): a pulled body reaches the decoder as
the ``bytearray`` the socket filled, not copied twice after it.  Nothing here is pickled: sources
keep only options and plain data (:class:`AccessSpec` included, resolved into credentials and an
SSL context in the process that connects).

A refusal by a secured server becomes a :class:`PermissionError` whose one line says what to set
(:func:`rocketq.client.access.explain`, with the connector's option names).

Offsets are ``{topic: {broker: {queue_id: offset}}}`` with string queue ids and every level
sorted, so the JSON Spark stores in its checkpoint compares equal for equal offsets.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from dataclasses import dataclass

from rocketq.client.access import explain
from rocketq.client.api import MQClientAPI
from rocketq.client.model import MessageQueue, MQClientError
from rocketq.client.sync import run, submit
from rocketq.remoting.codes import ResponseCode
from rocketq.remoting.receive import BufferedRemotingClient
from rocketq.spark.options import AccessSpec, OptionError

Offsets = dict                     # {topic: {broker: {"qid": offset}}}
SYSTEM_TOPIC = re.compile(r"^(rmq_sys_|RMQ_SYS_|SCHEDULE_TOPIC|TBW102|%RETRY%|%DLQ%|SELF_TEST_TOPIC|OFFSET_MOVED_EVENT|"
                          r"BenchmarkTest|TRANS_CHECK_MAX_TIME_TOPIC|DefaultCluster|broker-|rocketq-)")
CALL_TIMEOUT_S = 30.0
MAX_APIS = 8                       # access settings a process keeps clients for (queries of several users)
ACCESS_RECHECK_S = 10.0            # how long a resolved profile / environment is trusted (a rotated secret)
NO_ACCESS = AccessSpec()

_RESOLVED: dict[AccessSpec, tuple[float, object]] = {}     # spec -> (when, ClientAccess)
_APIS: dict[object, MQClientAPI] = {}                       # ClientAccess -> its client
_API_LOCK = threading.Lock()


class _API(MQClientAPI):
    remoting_client = BufferedRemotingClient


def api(spec: AccessSpec = NO_ACCESS) -> MQClientAPI:
    """This process's client for *spec* (resolved here: this process's environment and profile file)."""
    access = access_of(spec)
    with _API_LOCK:
        client = _APIS.get(access)
        if client is None:
            client = _APIS[access] = _API(timeout_s=CALL_TIMEOUT_S, **client_kwargs(access))
            while len(_APIS) > MAX_APIS:
                submit(_APIS.pop(next(iter(_APIS))).close())
        return client


def access_of(spec: AccessSpec):
    """*spec* resolved in this process (a ClientAccess), re-read every ``ACCESS_RECHECK_S``."""
    now = time.monotonic()
    with _API_LOCK:
        hit = _RESOLVED.get(spec)
        if hit is not None and now - hit[0] < ACCESS_RECHECK_S:
            return hit[1]
    access = spec.resolve()
    with _API_LOCK:
        _RESOLVED[spec] = (now, access)
        while len(_RESOLVED) > MAX_APIS:
            _RESOLVED.pop(next(iter(_RESOLVED)))
    return access


def client_kwargs(access) -> dict:
    from rocketq.client.access import AccessError
    try:
        return access.client_kwargs()
    except AccessError as exc:
        raise OptionError(str(exc)) from None


def refused(exc: MQClientError, spec: AccessSpec) -> Exception:
    """A NO_PERMISSION answer as a PermissionError, a connection that failed as a ConnectionError,
    each saying what to set; other errors unchanged."""
    if exc.code == ResponseCode.NO_PERMISSION:
        return PermissionError(explain(exc, access_of(spec)))
    if exc.code < 0:
        return ConnectionError(explain(exc, access_of(spec)))
    return exc


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

    def __init__(self, namesrvs: list[str], access: AccessSpec = NO_ACCESS):
        self.namesrvs = namesrvs
        self.access = access

    @property
    def api(self) -> MQClientAPI:
        return api(self.access)

    def _ask(self, coro, what: str):
        try:
            return call(coro)
        except MQClientError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise
            if exc.code < 0:
                raise ConnectionError(f"{what}: cannot reach rocketq at {','.join(self.namesrvs)}: "
                                      f"{explain(exc, access_of(self.access))}") from None
            raise refused(exc, self.access) from None

    def resolve_topics(self, topics: list[str], pattern: str | None) -> list[str]:
        if pattern is None:
            return topics
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise OptionError(f"option 'topicPattern' is not a valid regular expression: {exc}") from None
        listed = self._ask(self.api.topic_list(self.namesrvs), "listing topics")
        return [t for t in listed if regex.fullmatch(t) and not SYSTEM_TOPIC.match(t)]

    def queues(self, topics: list[str], *, missing_ok: bool = False) -> list[QueueRef]:
        out = []
        for topic in topics:
            try:
                route = self._ask(self.api.get_route(self.namesrvs, topic), f"route of topic {topic!r}")
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
            return await asyncio.gather(self.api.min_offset(q.addr, q.mq), self.api.max_offset(q.addr, q.mq))

        async def every():
            return await asyncio.gather(*(both(q) for q in queues))

        found = self._ask(every(), "queue offsets") if queues else []
        return {(q.topic, q.broker, q.queue_id): (lo, hi) for q, (lo, hi) in zip(queues, found)}

    def search(self, queues: list[QueueRef], timestamp_ms: int) -> dict[tuple[str, str, int], int]:

        async def every():
            return await asyncio.gather(*(self.api.search_offset(q.addr, q.mq, timestamp_ms) for q in queues))

        found = self._ask(every(), "offsets by timestamp") if queues else []
        return {(q.topic, q.broker, q.queue_id): o for q, o in zip(queues, found)}

    def commit(self, group: str, queues: list[QueueRef], offsets: dict[tuple[str, str, int], int]) -> None:
        todo = [(q, offsets[(q.topic, q.broker, q.queue_id)]) for q in queues
                if (q.topic, q.broker, q.queue_id) in offsets]

        async def every():
            await asyncio.gather(*(self.api.update_offset(q.addr, group, q.mq, o) for q, o in todo))

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
