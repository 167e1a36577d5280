"""Broker runtime statistics (RocketMQ ``BrokerStatsManager`` / ``StoreStatsService``, the parts
``mqadmin brokerStatus`` shows): message counts put and got, today's totals, and TPS over the
last 10 s, 60 s and 600 s.

Counting is a few integer additions on the request path; a once-a-second task takes a snapshot
into a bounded ring, from which the rates are computed when someone asks.
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass

WINDOWS_S = (10, 60, 600)


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
        self.put_by_topic: collections.Counter[str] = collections.Counter()
        self._ring: collections.deque[_Snapshot] = collections.deque(maxlen=max(WINDOWS_S) + 1)
        self._today = self._day()
        self._morning = (0, 0)              # put / got totals at the start of today
        self._yesterday_morning = (0, 0)

    def put(self, topic: str, count: int, size: int) -> None:
        self.put_messages += count
        self.put_bytes += size
        self.put_by_topic[topic] += count

    def pulled(self, count: int) -> None:
        if count:
            self.got_messages += count
            self.pulls_found += 1
        else:
            self.pulls_missed += 1

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
