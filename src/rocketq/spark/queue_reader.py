"""Reading one queue's offset range from a broker as Arrow batches (the topic source's task).

The task pulls ``[start, end)`` with PULL_MESSAGE (up to 1,024 messages or 4 MiB a pull, the
broker's caps) and decodes each response body, which holds the records in store format, with
:func:`rocketq.spark.decode.decode`.  A tag filter is sent to the broker (it filters by tag hash)
and re-checked exactly here.

Data loss (``failOnDataLoss``, as in Spark's Kafka source): when the broker no longer has the
offsets asked for (expired segments, a recreated queue), the task fails with a message naming the
queue and offsets, or, with ``failOnDataLoss=false``, logs a warning and goes on from what is
there.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from rocketq.client.model import MQClientError, PullStatus
from rocketq.spark import broker_io
from rocketq.spark.decode import decode
from rocketq.store.scan import split_records

log = logging.getLogger(__name__)

MAX_PULL_MESSAGES = 1024          # the broker's cap per pull (and the Java client's pullBatchSize limit)
PULL_WINDOW = 4                   # pulls in flight per task
DECODE_ROWS = 65_536              # rows decoded together, as the store source does: Spark pays its per-batch
                                  # costs (IPC message, vectors, the hand-off) once per this many
IDLE_RETRIES = 50                 # NO_NEW_MSG below the max offset: asked again this often (~20 s) before failing


class DataLossError(RuntimeError):
    """Offsets a query needed are gone from the broker."""


@dataclass(frozen=True)
class QueueTask:
    ref: broker_io.QueueRef
    start: int
    end: int
    group: str
    tags: tuple[str, ...] = ()           # empty: every tag
    fail_on_data_loss: bool = True
    namesrvs: tuple[str, ...] = ()
    access: broker_io.AccessSpec = broker_io.NO_ACCESS     # credentials and TLS (the secret hides its repr)


def _expression(tags: tuple[str, ...]) -> str:
    return " || ".join(tags) if tags else "*"


def read_queue(task: QueueTask) -> Iterator[pa.RecordBatch]:
    """The task's messages, decoded ``DECODE_ROWS`` at a time, with up to ``PULL_WINDOW`` pulls in flight.

    Pulls ahead are issued for the offsets the answers before them will end at (a pull of n
    units normally consumes exactly n, filtered or not); when an answer ends elsewhere (the byte
    cap, data loss), the pulls ahead are dropped and the walk goes on from where it really is.
    """
    tag_set = pa.array(sorted(task.tags), pa.string()) if task.tags else None
    bodies: list[bytes] = []
    pending_rows = 0
    offset, idle = task.start, 0
    window: deque = deque()
    ahead = offset
    while offset < task.end:
        while len(window) < PULL_WINDOW and ahead < task.end:
            n = min(MAX_PULL_MESSAGES, task.end - ahead)
            window.append((ahead, n, broker_io.submit(_pull_async(task, task.ref, ahead, n))))
            ahead += n
        off, n, fut = window.popleft()
        try:
            result, body = fut.result(broker_io.CALL_TIMEOUT_S * 2)
        except MQClientError as exc:
            result, body = _pull_rerouted(task, off, n, exc)
        status = result.status
        nxt = None
        if status == PullStatus.FOUND:
            idle = 0
            bodies.append(body)
            pending_rows += n
            nxt = max(result.next_begin_offset, off + 1)
        elif status == PullStatus.NO_MATCHED_MSG:
            nxt = max(result.next_begin_offset, off + 1)
        elif status == PullStatus.OFFSET_ILLEGAL or (status == PullStatus.NO_NEW_MSG and result.max_offset < task.end):
            nxt = _lost(task, off, result)
        else:                     # NO_NEW_MSG below max: the dispatcher is behind; ask again a few times
            idle += 1
            if idle > IDLE_RETRIES:
                raise DataLossError(f"{_where(task)}: the broker reports no messages at offset {off} "
                                    f"though its max offset is {result.max_offset}")
            time.sleep(min(0.5, 0.01 * idle))               # give the broker's dispatch time to catch up
            nxt = off
        if nxt != off + n:                                   # the pulls ahead started at the wrong offsets
            for _, _, f in window:
                f.cancel()
            window.clear()
            ahead = nxt if nxt is not None else task.end
        offset = nxt if nxt is not None else task.end
        if bodies and (pending_rows >= DECODE_ROWS or offset >= task.end or not window):
            yield from _decoded(b"".join(bodies), task, tag_set)
            bodies, pending_rows = [], 0


def _decoded(body: bytes, task: QueueTask, tag_set) -> Iterator[pa.RecordBatch]:
    pos, sizes, _ = split_records(body)
    for batch in decode(body, 0, pos, sizes, broker=task.ref.broker, store_columns=False):
        batch = _keep(batch, task.start, task.end, tag_set)
        if batch.num_rows:
            yield batch


async def _pull_async(task: QueueTask, ref: broker_io.QueueRef, offset: int, n: int):
    return await broker_io.api(task.access).pull_raw(ref.addr, ref.mq, task.group, offset, max_nums=n,
                                          expression=_expression(task.tags), suspend_ms=0)


def _pull_rerouted(task: QueueTask, offset: int, n: int, exc: MQClientError):
    """After a failed pull: when the broker is unreachable, ask the NameServer where the queue is
    now (a slave may serve reads) and pull from there; other errors are raised."""
    ref = task.ref
    if exc.code >= 0 or not task.namesrvs:
        raise broker_io.refused(exc, task.access) from None
    moved = [q for q in broker_io.Catalog(list(task.namesrvs), task.access).queues([ref.topic], missing_ok=True)
             if (q.broker, q.queue_id) == (ref.broker, ref.queue_id) and q.addr != ref.addr]
    if not moved:
        raise exc
    return broker_io.call(_pull_async(task, moved[0], offset, n))


def _keep(batch: pa.RecordBatch, lo: int, hi: int, tag_set) -> pa.RecordBatch:
    qoff = batch.column("queue_offset")
    mask = pc.and_(pc.greater_equal(qoff, lo), pc.less(qoff, hi))
    if tag_set is not None:
        mask = pc.and_(mask, pc.fill_null(pc.is_in(batch.column("tags"), value_set=tag_set), False))
    if pc.all(mask).as_py():
        return batch
    return batch.filter(mask)


def _where(task: QueueTask) -> str:
    r = task.ref
    return f"topic {r.topic} broker {r.broker} queue {r.queue_id} (at {r.addr})"


def _lost(task: QueueTask, offset: int, result) -> int | None:
    """Where to go on after offsets are missing, or None to end the task; raises when told to fail."""
    lo, hi = result.min_offset, result.max_offset
    text = (f"{_where(task)}: offsets {offset}..{task.end - 1} were asked for but the broker holds "
            f"{lo}..{hi - 1} (messages expired or the queue was recreated)")
    if task.fail_on_data_loss:
        raise DataLossError(text + "; set failOnDataLoss=false to skip what is missing")
    log.warning("%s; skipping to what is there", text)
    if offset < lo < task.end:
        return lo
    return None
