"""What the dispatcher feeds each walked run to (RocketMQ's ``CommitLogDispatcher`` implementations).

A run (:class:`rocketq._native.DispatchRun`) holds, per topic and queue, the consume-queue units of
its records and the index entries of their keys; see :mod:`rocketq.store.dispatcher` for how runs
are walked and what happens when a sink fails.
"""

from __future__ import annotations

from typing import Callable, Protocol

from rocketq.store.consume_queue import CQ_UNIT_SIZE


class Sink(Protocol):
    def dispatch(self, run) -> None: ...


class ConsumeQueueSink:
    """Writes each run of 20-byte units into its topic/queue's consume queue.

    With the bit-map prefilter (*bitmaps*, :mod:`rocketq.store.filter_bitmap`; None when it is off,
    the default), the queue runs of topics with SQL92 filters get their ext units first, a batch at a
    time: RocketMQ's ``CommitLogDispatcherCalcBitMap`` before ``CommitLogDispatcherBuildConsumeQueue``."""

    def __init__(self, queue_for: Callable[[str, int], object],
                 on_arrival: Callable[[str, int, int], None] | None = None,
                 on_written: Callable[[object], None] | None = None, bitmaps=None):
        self._queue_for = queue_for
        self.on_arrival = on_arrival
        self.on_written = on_written        # told after units are written (marks the queue dirty)
        self.bitmaps = bitmaps

    def dispatch(self, run) -> None:
        bitmaps, queue_for, on_written, on_arrival = self.bitmaps, self._queue_for, self.on_written, self.on_arrival
        filters = bitmaps.snapshot(run.end_offset) if bitmaps is not None else None
        for topic, queue_id, first, units, phy_end in run.queue_runs():
            cq = queue_for(topic, queue_id)
            if filters and topic in filters:
                first, units = bitmaps.attach(cq, first, units, filters[topic])
            cq.put_bytes(units, first, phy_end)
            if on_written is not None:
                on_written(cq)
            if on_arrival is not None:
                on_arrival(topic, queue_id, first + len(units) // CQ_UNIT_SIZE)


class IndexSink:
    """Feeds the run's ``topic#key`` entries (every KEYS word and the UNIQ_KEY) to the index service."""

    def __init__(self, index_service):
        self._index = index_service

    def dispatch(self, run) -> None:
        if run.index_entries:
            self._index.put_run(run)
