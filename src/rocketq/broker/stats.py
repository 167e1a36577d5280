"""Broker runtime statistics (RocketMQ ``BrokerStatsManager`` / ``StoreStatsService``, the parts
``mqadmin brokerStatus`` shows): message counts put and got, today's totals, and TPS over the
last 10 s, 60 s and 600 s; and the request-side figures the Prometheus metrics export
(:mod:`rocketq.broker.metrics`): messages and bytes in per topic and message type with the message
size histogram, messages and bytes out per topic and group, the last offset each group pulled per
queue, messages sent to a DLQ, and the RPC latency histogram per request and response code.

Counting is plain integer additions, once per request (a batch counts once, as RocketMQ records
one message-size observation per put: written bytes / messages), into rows of small dicts keyed
by tuples; nothing here builds a Prometheus object.  The collector reads these ints when
``/metrics`` is scraped.  Each table holds at most ``MAX_SERIES`` keys (names come from clients):
a new key past that is counted under ``OVERFLOW_LABEL``, which is checked only when a key is new.
A once-a-second task takes a snapshot into a bounded ring, from which the rates are computed.
"""

from __future__ import annotations

import collections
import time
from bisect import bisect_left
from dataclasses import dataclass

WINDOWS_S = (10, 60, 600)
# RocketMQ's buckets (BrokerMetricsManager / RemotingMetricsManager views); a value equal to a
# bound falls in that bound's bucket (Prometheus' "le")
MESSAGE_SIZE_BUCKETS_BYTES = (1 << 10, 4 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20)
RPC_LATENCY_BUCKETS_MS = (1, 3, 5, 7, 10, 100, 1000, 2000, 3000)
_RPC_LATENCY_BUCKETS_NS = tuple(ms * 1_000_000 for ms in RPC_LATENCY_BUCKETS_MS)   # ints: no float per request
MAX_SERIES = 10_000                  # keys per table (topics x types, topics x groups, pulled queues ...)
OVERFLOW_LABEL = "_overflow_"         # where counts of keys past MAX_SERIES go


def _row(table: dict, key: tuple, width: int) -> list:
    """The row of *key*, made on first use: [count, bytes or ms, *histogram buckets]."""
    if len(table) >= MAX_SERIES:
        key = (OVERFLOW_LABEL,) * len(key)
        row = table.get(key)
        if row is not None:
            return row
    row = table[key] = [0] * width
    return row


@dataclass
class _Snapshot:
    at: float
    put: int
    got: int
    found: int
    miss: int


class BrokerStats:
    def __init__(self, clock=time.monotonic, wall=time.time):
        self._clock, self._wall = clock, wall
        self.boot_timestamp_ms = int(wall() * 1000)
        self.put_messages = 0
        self.put_bytes = 0
        self.got_messages = 0
        self.pulls_found = 0
        self.pulls_missed = 0
        # (topic, message type) -> [messages, bytes, requests per size bucket..., over the last]
        self.puts: dict[tuple[str, str], list[int]] = {}
        # (topic, group) -> [messages, bytes]
        self.gets: dict[tuple[str, str], list[int]] = {}
        # (group, topic, queue id) -> the next offset the group asked for (RocketMQ's pull offset)
        self.pull_offsets: dict[tuple[str, str, int], int] = {}
        # (group, original topic) -> messages sent to %DLQ%group
        self.dead_lettered: dict[tuple[str, str], list[int]] = {}
        # (request code, response code) -> [requests, total ns, requests per latency bucket..., over]
        self.rpcs: dict[tuple[int, int], list] = {}
        self._ring: collections.deque[_Snapshot] = collections.deque(maxlen=max(WINDOWS_S) + 1)
        self._today = self._day()
        self._morning = (0, 0)              # put / got totals at the start of today
        self._yesterday_morning = (0, 0)

    def put(self, topic: str, count: int, size: int, kind: str = "normal") -> None:
        """*count* messages of *size* bytes in all stored under *topic*; *kind*: RocketMQ's message
        type label (normal, fifo, delay, transaction)."""
        self.put_messages += count
        self.put_bytes += size
        row = self.puts.get((topic, kind))
        if row is None:
            row = _row(self.puts, (topic, kind), 3 + len(MESSAGE_SIZE_BUCKETS_BYTES))
        row[0] += count
        row[1] += size
        row[2 + bisect_left(MESSAGE_SIZE_BUCKETS_BYTES, size // count if count else 0)] += 1

    def pulled(self, count: int, size: int = 0, *, group: str = "", topic: str = "", queue_id: int = -1,
               next_offset: int = -1) -> None:
        """One pull answered with *count* messages (*size* bytes) for *group*; the group asks next
        from *next_offset* (what in-flight and ready counts are measured against)."""
        if count:
            self.got_messages += count
            self.pulls_found += 1
            row = self.gets.get((topic, group)) or _row(self.gets, (topic, group), 2)
            row[0] += count
            row[1] += size
        else:
            self.pulls_missed += 1
        if next_offset >= 0:
            key = (group, topic, queue_id)
            if key in self.pull_offsets or len(self.pull_offsets) < MAX_SERIES:
                self.pull_offsets[key] = next_offset

    def sent_to_dlq(self, group: str, topic: str) -> None:
        (self.dead_lettered.get((group, topic)) or _row(self.dead_lettered, (group, topic), 1))[0] += 1

    def rpc(self, request_code: int, response_code: int, elapsed_ns: int) -> None:
        """One request answered after *elapsed_ns* (RocketMQ's rocketmq_rpc_latency, in ms)."""
        row = self.rpcs.get((request_code, response_code))
        if row is None:
            row = _row(self.rpcs, (request_code, response_code), 3 + len(RPC_LATENCY_BUCKETS_MS))
        row[0] += 1
        row[1] += elapsed_ns
        row[2 + bisect_left(_RPC_LATENCY_BUCKETS_NS, elapsed_ns)] += 1

    def sample(self) -> None:
        """Called once a second."""
        day = self._day()
        if day != self._today:
            self._yesterday_morning, self._morning = self._morning, (self.put_messages, self.got_messages)
            self._today = day
        self._ring.append(_Snapshot(self._clock(), self.put_messages, self.got_messages,
                                    self.pulls_found, self.pulls_missed))

    def _day(self) -> int:
        return int(self._wall() // 86400)

    def _rate(self, field: str, window_s: int) -> float:
        if len(self._ring) < 2:
            return 0.0
        last = self._ring[-1]
        first = self._ring[max(0, len(self._ring) - 1 - window_s)]
        span = last.at - first.at
        return (getattr(last, field) - getattr(first, field)) / span if span > 0 else 0.0

    def _rates(self, field: str) -> str:
        return " ".join(f"{self._rate(field, w):.2f}" for w in WINDOWS_S)

    def runtime_table(self) -> dict[str, str]:
        """The KVTable of GET_BROKER_RUNTIME_INFO, with RocketMQ's key names (values are strings)."""
        now_ms = int(self._wall() * 1000)
        return {
            "msgPutTotalTodayNow": str(self.put_messages), "msgGetTotalTodayNow": str(self.got_messages),
            "msgPutTotalTodayMorning": str(self._morning[0]), "msgGetTotalTodayMorning": str(self._morning[1]),
            "msgPutTotalYesterdayMorning": str(self._yesterday_morning[0]),
            "msgGetTotalYesterdayMorning": str(self._yesterday_morning[1]),
            "putTps": self._rates("put"), "getTransferedTps": self._rates("got"),
            "getFoundTps": self._rates("found"), "getMissTps": self._rates("miss"),
            "bootTimestamp": str(self.boot_timestamp_ms),
            "runtime": _runtime_text((now_ms - self.boot_timestamp_ms) // 1000),
        }


def _runtime_text(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {secs} seconds ]"
