"""Bounded time series for the console's charts: cluster throughput and each watched group's lag.

A task samples every ``SAMPLE_INTERVAL_S``: the put and get totals of every broker (one
GET_BROKER_RUNTIME_INFO each; the rates are differences between samples) and the lag per queue of
the groups someone looked at in the last ``WATCH_S`` (at most ``MAX_WATCHED_GROUPS``; a page view
watches a group, so the sampler never walks every group of a large cluster).  Each series keeps
the last ``MAX_POINTS`` points.  A failed sample (a broker down) is skipped, not fatal.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time

log = logging.getLogger(__name__)

SAMPLE_INTERVAL_S = 2.0
MAX_POINTS = 300                   # 10 minutes at one point per 2 s
MAX_WATCHED_GROUPS = 32
WATCH_S = 600.0


class History:
    def __init__(self, data, *, interval_s: float = SAMPLE_INTERVAL_S, clock=time.time, credentials=None):
        self._data, self._interval_s, self._clock = data, interval_s, clock
        self._creds = credentials          # with ACL on: the broker's own admin keys (the samples need them)
        self.throughput: collections.deque = collections.deque(maxlen=MAX_POINTS)   # (t_ms, put/s, get/s)
        self.lag: dict[str, collections.deque] = {}             # group -> (t_ms, {queue label: lag})
        self._watched: dict[str, float] = {}
        self._last_totals: tuple[float, int, int] | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    def watch(self, group: str) -> None:
        """Sample *group*'s lag from now on (for ``WATCH_S``)."""
        self._watched[group] = self._clock()
        while len(self._watched) > MAX_WATCHED_GROUPS:
            oldest = min(self._watched, key=self._watched.get)
            del self._watched[oldest]
            self.lag.pop(oldest, None)

    async def _run(self) -> None:
        while True:
            try:
                await self.sample()
            except Exception as exc:        # a broker down, a NameServer restarting: try again next round
                log.debug("console sample skipped: %s", exc)
            await asyncio.sleep(self._interval_s)

    async def sample(self) -> None:
        now = self._clock()
        put, got = await self._data.totals(self._creds)
        if self._last_totals is not None:
            then, put0, got0 = self._last_totals
            span = max(now - then, 1e-3)
            self.throughput.append((int(now * 1000), max(0, put - put0) / span, max(0, got - got0) / span))
        self._last_totals = (now, put, got)
        for group in [g for g, seen in self._watched.items() if now - seen > WATCH_S]:
            del self._watched[group]
            self.lag.pop(group, None)
        for group in list(self._watched):
            lags = await self._data.lag_by_queue(group, self._creds)
            self.lag.setdefault(group, collections.deque(maxlen=MAX_POINTS)).append((int(now * 1000), lags))

    def throughput_json(self) -> dict:
        return {"t": [p[0] for p in self.throughput], "put": [round(p[1], 2) for p in self.throughput],
                "get": [round(p[2], 2) for p in self.throughput]}

    def lag_json(self, group: str) -> dict:
        points = list(self.lag.get(group, ()))
        queues = sorted({q for _, lags in points for q in lags})
        return {"t": [p[0] for p in points], "series": {q: [p[1].get(q, 0) for p in points] for q in queues}}
