"""Reading one queue's offset range from a broker as Arrow batches (the topic source's task).

The task pulls ``[start, end)`` with PULL_MESSAGE (up to 4,096 messages or 4 MiB a pull, the
broker's caps) and decodes the response bodies, which hold the records in store format, with
:func:`rocketq.spark.decode.decode_bodies`, ``DECODE_ROWS`` at a time (the bodies are walked in place,
not joined first).  A tag filter is sent to the
broker (it filters by tag hash) and re-checked exactly here.

Two threads of the Python worker share the work (:class:`_Pulls`): a coroutine on the client loop
thread walks the offsets, keeping ``PULL_WINDOW`` pulls in flight and queueing the answers in
order; Spark's task thread takes them, decodes and hands the batches to Spark, and gives the
bodies back to the connection's pool (:class:`rocketq.remoting.receive.BodyPool`) for the next
answers.  So the next batch
is pulled while the current one is decoded and taken by the JVM (before, pulls were only issued
when the task thread asked for an answer, and the connection sat idle during each hand-off).  The
coroutine runs at most ``AHEAD_ROWS`` messages ahead of what the task thread has decoded: a slow
consumer stops the pulls, it does not fill the memory.

Data loss (``failOnDataLoss``, as in Spark's Kafka source): when the broker no longer has the
offsets asked for (expired segments, a recreated queue), the task fails with a message naming the
queue and offsets, or, with ``failOnDataLoss=false``, logs a warning and goes on from what is
there.
"""

from __future__ import annotations

import asyncio
import logging
import queue
from collections import deque
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from rocketq.client.model import MQClientError, PullStatus
from rocketq.remoting.receive import BODIES
from rocketq.spark import broker_io
from rocketq.spark.decode import decode_bodies

log = logging.getLogger(__name__)

MAX_PULL_MESSAGES = 4096          # the broker's cap per pull (rocketq.broker.pull; 1,024 before, 0.3 us a row more)
PULL_WINDOW = 4                   # pulls in flight per task
DECODE_ROWS = 65_536              # rows decoded together, as the store source does: Spark pays its per-batch
                                  # costs (IPC message, vectors, the hand-off) once per this many
AHEAD_ROWS = 2 * DECODE_ROWS      # messages pulled and not yet decoded, at most: the batch being gathered
                                  # and the next one (>= DECODE_ROWS + MAX_PULL_MESSAGES, or the pulls stall)
IDLE_RETRIES = 50                 # NO_NEW_MSG below the max offset: asked again this often (~20 s) before failing
TAKE_TIMEOUT_S = 4 * broker_io.CALL_TIMEOUT_S   # the pulling coroutine answers within this (its pulls time out)


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
    """The task's messages, decoded ``DECODE_ROWS`` at a time while the next ones are pulled."""
    tag_set = pa.array(sorted(task.tags), pa.string()) if task.tags else None
    pulls = _Pulls(task)
    try:
        bodies: list[bytes] = []
        rows = 0
        for body, n in pulls:
            bodies.append(body)
            rows += n
            if rows >= DECODE_ROWS:
                batches = _decoded(bodies, task, tag_set)
                bodies = []
                pulls.done_with(rows)            # the coroutine pulls on while Spark takes these
                rows = 0
                yield from batches
        if bodies:
            yield from _decoded(bodies, task, tag_set)
    finally:
        pulls.close()


_END = object()


class _Pulls:
    """The answers (body, messages asked for) of one task's pulls, in offset order.

    :meth:`_walk` runs on the client loop thread: pulls are issued for the offsets the answers
    before them will end at (a pull of n units normally consumes exactly n, filtered or not); when
    an answer ends elsewhere (the byte cap, data loss), the pulls ahead are dropped and the walk
    goes on from where it really is.  Found bodies go to a queue the task thread iterates; every
    message asked for counts against ``AHEAD_ROWS`` until the task thread says it is done with it
    (:meth:`done_with`), and the walk waits for room before asking for more.
    """

    def __init__(self, task: QueueTask):
        self.task = task
        self._answers: queue.SimpleQueue = queue.SimpleQueue()
        self._free = AHEAD_ROWS            # loop thread only
        self._idle = 0                     # answers in a row that found nothing below the max offset
        self._room: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._future = broker_io.submit(self._run())

    def __iter__(self) -> Iterator[tuple[bytes, int]]:
        while True:
            try:
                item = self._answers.get(timeout=TAKE_TIMEOUT_S)
            except queue.Empty:
                raise TimeoutError(f"{_where(self.task)}: no answer from the pulls in {TAKE_TIMEOUT_S:g} s") from None
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item

    def done_with(self, rows: int) -> None:
        """The task thread has decoded *rows* of the messages it took: room for that many more."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._give, rows)

    def close(self) -> None:
        self._future.cancel()

    def _give(self, rows: int) -> None:
        self._free += rows
        if self._room is not None:
            self._room.set()

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._room = asyncio.Event()
        try:
            await self._walk()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:       # handed to the task thread, which raises it
            self._answers.put(exc)
        else:
            self._answers.put(_END)

    async def _take_room(self, n: int) -> None:
        while self._free < n:
            self._room.clear()
            await self._room.wait()
        self._free -= n

    async def _walk(self) -> None:
        task = self.task
        offset = ahead = task.start
        window: deque = deque()
        try:
            while offset < task.end:
                while len(window) < PULL_WINDOW and ahead < task.end:
                    n = min(MAX_PULL_MESSAGES, task.end - ahead)
                    if self._free < n and window:
                        break                              # room comes back as the task thread decodes
                    await self._take_room(n)
                    window.append((ahead, n, asyncio.ensure_future(_pull_async(task, task.ref, ahead, n))))
                    ahead += n
                off, n, fut = window.popleft()
                try:
                    result, body = await fut
                except MQClientError as exc:
                    result, body = await _pull_rerouted(task, off, n, exc)
                nxt = await self._answered(off, n, result, body)
                if nxt != off + n:                         # the pulls ahead started at the wrong offsets
                    for _, m, f in window:
                        f.cancel()
                        self._free += m
                    window.clear()
                    ahead = nxt if nxt is not None else task.end
                offset = nxt if nxt is not None else task.end
        finally:
            for _, _, f in window:
                f.cancel()

    async def _answered(self, off: int, n: int, result, body: bytes) -> int | None:
        """Where the walk goes on after the answer to the pull of *n* at *off* (None: the task's end);
        a found body is queued for the task thread, whose room it keeps until decoded."""
        status = result.status
        if status == PullStatus.FOUND:
            self._idle = 0
            self._answers.put((body, n))
            return max(result.next_begin_offset, off + 1)
        self._free += n
        if status == PullStatus.NO_MATCHED_MSG:
            return max(result.next_begin_offset, off + 1)
        if status == PullStatus.OFFSET_ILLEGAL or (status == PullStatus.NO_NEW_MSG
                                                   and result.max_offset < self.task.end):
            return _lost(self.task, off, result)
        self._idle += 1              # NO_NEW_MSG below max: the dispatcher is behind; ask again a few times
        if self._idle > IDLE_RETRIES:
            raise DataLossError(f"{_where(self.task)}: the broker reports no messages at offset {off} "
                                f"though its max offset is {result.max_offset}")
        await asyncio.sleep(min(0.5, 0.01 * self._idle))    # the broker's dispatch catches up
        return off


def _decoded(bodies: list[bytes], task: QueueTask, tag_set) -> list[pa.RecordBatch]:
    """The bodies' rows (copied into the batches' own buffers: the bodies go back to the pool)."""
    out = []
    # the gathered pulls hold fewer than DECODE_ROWS + one pull of messages: one batch
    decoded = decode_bodies(bodies, broker=task.ref.broker, max_rows=DECODE_ROWS + MAX_PULL_MESSAGES)
    BODIES.give(bodies)
    for batch in decoded:
        batch = _keep(batch, task.start, task.end, tag_set)
        if batch.num_rows:
            out.append(batch)
    return out


def _pull_async(task: QueueTask, ref: broker_io.QueueRef, offset: int, n: int):
    """The pull's coroutine (pull_raw's own: no layer of ours around it)."""
    return broker_io.api(task.access).pull_raw(ref.addr, ref.mq, task.group, offset, max_nums=n,
                                               expression=_expression(task.tags), suspend_ms=0)


async def _pull_rerouted(task: QueueTask, offset: int, n: int, exc: MQClientError):
    """After a failed pull: when the broker is unreachable, ask the NameServer where the queue is
    now (a slave may serve reads) and pull from there; other errors are raised."""
    ref = task.ref
    if exc.code >= 0 or not task.namesrvs:
        raise broker_io.refused(exc, task.access) from None
    try:
        route = await broker_io.api(task.access).get_route(list(task.namesrvs), ref.topic)
    except MQClientError:
        raise broker_io.refused(exc, task.access) from None
    addr = route.read_addr_of(ref.broker)
    if not addr or addr == ref.addr or ref.mq not in route.read_queues():
        raise exc
    return await _pull_async(task, broker_io.QueueRef(ref.topic, ref.broker, ref.queue_id, addr), offset, n)


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
