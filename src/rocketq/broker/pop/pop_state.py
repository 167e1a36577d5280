"""Which messages each pop consumer group has in flight, until when, and the receipt handles.

State per (group, queue topic, queue id): the next offset to pop and the messages handed out and
not yet acked, each with a receipt-handle version, its invisible deadline and delivery attempt.
Messages of a push consumer's auto-renew receive also have a :class:`Renewal` naming the client,
logged too, so that a restarted broker goes on renewing them while that client is alive.
The group's committed consumer offset (shared with remoting consumers) is the lowest offset still
in flight, or the next offset to pop when nothing is.  Every change is written to the
:class:`~rocketq.broker.pop.pop_log.PopLog` before it is acted on, so a restarted broker knows
exactly what was in flight and brings it back when its invisible time is over.

Receipt handle (opaque to clients, who only echo it)::

    "<n|r>:<queue id>:<queue offset>:<version>:<invisible until, ms>"

``n`` names the topic's own queue, ``r`` the group's pop retry topic.  A handle is valid while its
version is the current one for that message and its deadline has not passed;
ChangeInvisibleDuration issues a new version, so the old handle stops working.

Nothing here does I/O except through the log, and time comes from an injected clock.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from rocketq.broker.pop.pop_log import ACKED, NEXT, POPPED, RENEWING, PopLog, PopRecord


class QueueKey(NamedTuple):
    group: str
    topic: str
    queue_id: int


@dataclass(slots=True)
class InFlight:
    offset: int
    version: int
    deadline_ms: int
    attempt: int


@dataclass(slots=True)
class QueueState:
    next_offset: int
    inflight: dict[int, InFlight] = field(default_factory=dict)

    def commit_offset(self) -> int:
        return min(self.inflight) if self.inflight else self.next_offset


@dataclass(slots=True)
class Renewal:
    """The server renews a message in flight for this client (its auto-renew receive)."""
    client_id: str
    since_ms: int                 # first handed out: renewal ends after the group's consume timeout
    version: int                  # of the InFlight it renews (a nack issues a new version and ends it)


class Handle(NamedTuple):
    retry: bool
    queue_id: int
    offset: int
    version: int
    deadline_ms: int

    def encode(self) -> str:
        return f"{'r' if self.retry else 'n'}:{self.queue_id}:{self.offset}:{self.version}:{self.deadline_ms}"

    @classmethod
    def parse(cls, text: str) -> Handle | None:
        parts = text.split(":")
        if len(parts) != 5 or parts[0] not in ("n", "r"):
            return None
        try:
            qid, offset, version, deadline = (int(p) for p in parts[1:])
        except ValueError:
            return None
        if min(qid, offset, version, deadline) < 0:
            return None
        return cls(parts[0] == "r", qid, offset, version, deadline)


class PopState:
    def __init__(self, log: PopLog, *, clock_ms: Callable[[], int]):
        self._log = log
        self._clock_ms = clock_ms
        self.queues: dict[QueueKey, QueueState] = {}
        self._version = 0
        self._deadlines: list[tuple[int, int, QueueKey, int]] = []     # (deadline, version, key, offset)
        self.renewing: dict[tuple[QueueKey, int], Renewal] = {}          # (key, offset) -> renewal

    # -- start-up ----------------------------------------------------------------------------

    def load(self) -> None:
        """Replay the log, then rewrite it holding only the live state."""
        renewing: dict[tuple[QueueKey, int], Renewal] = {}
        for r in self._log.load():
            key = QueueKey(r.group, r.topic, r.queue_id)
            self._version = max(self._version, r.version)
            q = self.queues.get(key)
            if r.kind == RENEWING:
                if r.client:
                    renewing[(key, r.offset)] = Renewal(r.client, r.deadline_ms, r.version)
                else:
                    renewing.pop((key, r.offset), None)
                continue
            if r.kind == NEXT:
                if q is None:
                    self.queues[key] = QueueState(r.offset)
                else:
                    q.next_offset = max(q.next_offset, r.offset)
                continue
            if q is None:
                q = self.queues[key] = QueueState(r.offset + 1)
            if r.kind == POPPED:
                q.inflight[r.offset] = InFlight(r.offset, r.version, r.deadline_ms, r.attempt)
                q.next_offset = max(q.next_offset, r.offset + 1)
            elif r.kind == ACKED:
                current = q.inflight.get(r.offset)
                if current is not None and current.version <= r.version:
                    del q.inflight[r.offset]
        for key, q in self.queues.items():
            for e in q.inflight.values():
                heapq.heappush(self._deadlines, (e.deadline_ms, e.version, key, e.offset))
        for (key, offset), r in renewing.items():
            q = self.queues.get(key)
            e = q.inflight.get(offset) if q else None
            if e is not None and e.version == r.version:         # still the copy handed out then
                self.renewing[(key, offset)] = r
        self.compact()

    def compact(self) -> None:
        records = []
        for key, q in self.queues.items():
            records.append(PopRecord(NEXT, key.group, key.topic, key.queue_id, q.next_offset))
            records.extend(PopRecord(POPPED, key.group, key.topic, key.queue_id, e.offset, e.version, e.deadline_ms,
                                     e.attempt) for e in q.inflight.values())
        records.extend(_renewing_record(key, offset, r) for (key, offset), r in self.renewing.items())
        self._log.rewrite(records)

    # -- queries -----------------------------------------------------------------------------

    def now_ms(self) -> int:
        return self._clock_ms()

    def queue(self, key: QueueKey, initial_offset: Callable[[], int]) -> QueueState:
        q = self.queues.get(key)
        if q is None:
            q = self.queues[key] = QueueState(initial_offset())
        return q

    def find(self, key: QueueKey, handle: Handle) -> InFlight | None:
        """The message in flight that *handle* names, or None when it is acked, re-issued or expired."""
        q = self.queues.get(key)
        e = q.inflight.get(handle.offset) if q else None
        if e is None or e.version != handle.version or e.deadline_ms <= self._clock_ms():
            return None
        return e

    def due(self) -> list[tuple[QueueKey, InFlight]]:
        """Messages whose invisible time is over (each reported once per version)."""
        now = self._clock_ms()
        out = []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, version, key, offset = heapq.heappop(self._deadlines)
            q = self.queues.get(key)
            e = q.inflight.get(offset) if q else None
            if e is not None and e.version == version and e.deadline_ms <= now:    # not renewed meanwhile
                out.append((key, e))
        return out

    def defer(self, key: QueueKey, e: InFlight, delay_ms: int) -> None:
        """Report *e* from :meth:`due` again after *delay_ms* (its handling failed)."""
        heapq.heappush(self._deadlines, (self._clock_ms() + delay_ms, e.version, key, e.offset))

    def next_deadline_ms(self) -> int | None:
        return self._deadlines[0][0] if self._deadlines else None

    # -- changes (each logged first) -----------------------------------------------------------

    def batched(self):
        """A block whose log records are written together at its end (no await inside)."""
        return self._log.batch()

    def pop(self, key: QueueKey, offset: int, *, invisible_ms: int, attempt: int, now_ms: int | None = None) -> InFlight:
        self._version += 1
        e = InFlight(offset, self._version, (self._clock_ms() if now_ms is None else now_ms) + invisible_ms, attempt)
        self._log.append([PopRecord(POPPED, key.group, key.topic, key.queue_id, offset, e.version, e.deadline_ms,
                                    attempt)])
        q = self.queues[key]
        q.inflight[offset] = e
        q.next_offset = max(q.next_offset, offset + 1)
        heapq.heappush(self._deadlines, (e.deadline_ms, e.version, key, offset))
        return e

    def advance(self, key: QueueKey, next_offset: int) -> None:
        """Offsets below *next_offset* were looked at (delivered or filtered out)."""
        q = self.queues[key]
        if next_offset > q.next_offset:
            q.next_offset = next_offset
            self._log.append([PopRecord(NEXT, key.group, key.topic, key.queue_id, next_offset)])

    def renew(self, key: QueueKey, e: InFlight, invisible_ms: int) -> None:
        """Extend *e*'s invisible time in place (the server renewing an auto-renew receive): the
        version stays, so the receipt handle the client holds stays valid."""
        e.deadline_ms = self._clock_ms() + invisible_ms
        self._log.append([PopRecord(POPPED, key.group, key.topic, key.queue_id, e.offset, e.version, e.deadline_ms,
                                    e.attempt)])
        heapq.heappush(self._deadlines, (e.deadline_ms, e.version, key, e.offset))

    def change(self, key: QueueKey, e: InFlight, invisible_ms: int) -> InFlight:
        """A new version of *e* (a client's own invisible time): its renewal, if any, ends."""
        self.renewing.pop((key, e.offset), None)          # the log needs nothing: the version no longer matches
        return self.pop(key, e.offset, invisible_ms=invisible_ms, attempt=e.attempt)

    def ack(self, key: QueueKey, e: InFlight) -> None:
        self._log.append([PopRecord(ACKED, key.group, key.topic, key.queue_id, e.offset, e.version)])
        self.renewing.pop((key, e.offset), None)
        q = self.queues[key]
        if q.inflight.get(e.offset) is e:
            del q.inflight[e.offset]

    def reset(self, key: QueueKey, next_offset: int) -> None:
        """An operator moved the group's offset: pop from *next_offset* on, nothing in flight.  The
        log is rewritten (a NEXT record only ever moves a queue forward on replay)."""
        q = self.queues.get(key)
        if q is None:
            return
        for offset in list(q.inflight):
            self.renewing.pop((key, offset), None)
        q.inflight.clear()
        q.next_offset = next_offset
        self.compact()

    def own(self, key: QueueKey, e: InFlight, client_id: str, since_ms: int) -> None:
        """From now on the server renews *e* for *client_id* (until :meth:`disown`, a nack or an ack)."""
        r = self.renewing[(key, e.offset)] = Renewal(client_id, since_ms, e.version)
        self._log.append([_renewing_record(key, e.offset, r)])

    def disown(self, key: QueueKey, offset: int) -> None:
        if self.renewing.pop((key, offset), None) is not None:
            self._log.append([_renewing_record(key, offset, Renewal("", 0, 0))])


def _renewing_record(key: QueueKey, offset: int, r: Renewal) -> PopRecord:
    return PopRecord(RENEWING, key.group, key.topic, key.queue_id, offset, r.version, r.since_ms, 0, r.client_id)
