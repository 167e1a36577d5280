"""Pop consumption, the broker's (RocketMQ 5's POP): one state for gRPC receives and remoting POP_MESSAGE.

:class:`PopService` owns the pop log (``<storePath>/grpc/pop.log``, the path it had when only the
gRPC endpoint popped), the state replayed from it and the :class:`~rocketq.broker.pop.popping.Popper`;
its housekeeping task brings back messages whose invisible time is over (into the group's pop
retry topic, or the dead-letter topic), compacts the log when it grows and fsyncs it once a second.
The gRPC endpoint adds what is its own (renewing push consumers' messages while their client is
alive) on top of the same state.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from rocketq.broker.pop.pop_log import PopLog
from rocketq.broker.pop.pop_state import PopState
from rocketq.broker.pop.popping import Popper

log = logging.getLogger(__name__)

HOUSEKEEPING_MAX_SLEEP_S = 0.2
POP_LOG_SYNC_INTERVAL_S = 1.0


def now_ms() -> int:
    return int(time.time() * 1000)


class PopService:
    def __init__(self, broker):
        self._broker = broker
        self.log: PopLog | None = None
        self.state: PopState | None = None
        self.popper: Popper | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> PopService:
        """Replay the pop log (raises naming the offset of a corrupt record) and start housekeeping."""
        store = self._broker.store
        self.log = PopLog(Path(store.config.store_path) / "grpc" / "pop.log")
        try:
            self.state = PopState(self.log, clock_ms=now_ms)
            self.state.load()
        except BaseException:
            self.log.close()
            raise
        self.popper = Popper(self._broker, self.state, clock_ms=now_ms)
        store.arrival_listeners.append(self.popper.on_arrival)
        self._task = asyncio.create_task(self._housekeeping())
        return self

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.popper is not None and self.popper.on_arrival in self._broker.store.arrival_listeners:
            self._broker.store.arrival_listeners.remove(self.popper.on_arrival)
        if self.log is not None:
            self.log.close()
            self.log = None

    async def _housekeeping(self) -> None:
        last_sync = time.monotonic()
        while True:
            nxt = self.state.next_deadline_ms()
            sleep = HOUSEKEEPING_MAX_SLEEP_S if nxt is None else min(HOUSEKEEPING_MAX_SLEEP_S,
                                                                     max(0.005, (nxt - now_ms()) / 1000))
            await asyncio.sleep(sleep)
            try:
                async with self.popper.lock:
                    await self.popper.revive_due()
                    if self.log.wants_compaction:
                        self.state.compact()
                if time.monotonic() - last_sync >= POP_LOG_SYNC_INTERVAL_S:
                    last_sync = time.monotonic()
                    await asyncio.to_thread(self.log.sync)
            except Exception:
                log.exception("pop housekeeping failed; trying again")
