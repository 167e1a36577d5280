"""A checker for runs with failures: what producers had acknowledged against what consumers got.

Theory of operation
-------------------
A test records, in one :class:`Ledger`, every send it attempted (:meth:`Ledger.attempt`), the ones the
broker acknowledged with their place (:meth:`Ledger.acked`: broker, queue, queue offset), every
message a consumer received (:meth:`Ledger.consumed`) and notes about what it did to the cluster
(:meth:`Ledger.note`: "SIGKILL broker-a master", "restarted ...").  Every message carries a key of
the test's choosing (its body, or a property) that the ledger knows it by.

:meth:`Ledger.problems` then judges the run the way RocketMQ promises delivery:

* **lost**: a message acknowledged (SEND_OK) and never consumed.  At-least-once allows duplicates,
  not losses.
* **invented**: a message consumed that no producer attempted, or whose body differs from the one
  sent under its key.  A send that failed (timeout, broker killed) may or may not have been stored,
  so consuming it is fine; consuming it twice too.
* **misplaced**: an acknowledged message consumed at a different (broker, queue, offset) than the
  acknowledgement named, while no retry could have stored a second copy (only checked for keys sent
  exactly once).
* **out of order** (only for the topics named ``orderly``): within one (topic, broker, queue) the
  first deliveries of the keys must come in increasing queue offset, and the acknowledgements of
  one sharding key must come in the order it was sent.  Redeliveries (a consumer that restarts from
  its last committed offset) are allowed; a message delivered before one stored earlier in the same
  queue is not.

:meth:`Ledger.assert_ok` raises an AssertionError listing the problems (at most ``MAX_SHOWN`` of
each kind), the run's event log (the last ``LOG_TAIL_LINES``) and the tails of the process logs the
test registered with :meth:`Ledger.log_file`, so a failure explains itself from the CI output alone.

The ledger is plain Python with no I/O besides reading those log files, so any test (the cluster
tests, the controller failover tests) can use it, from one event loop or several threads (a lock
guards the tables).
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

MAX_SHOWN = 10              # examples listed per kind of problem
LOG_TAIL_LINES = 200        # event log lines shown on failure
FILE_TAIL_BYTES = 4000      # of each registered process log, shown on failure


@dataclass(frozen=True)
class Place:
    topic: str
    broker: str
    queue_id: int
    queue_offset: int

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker}#{self.queue_id}:{self.queue_offset}"


@dataclass
class _Sent:
    digest: str
    attempts: int = 0
    shard: str | None = None
    acked: list[Place] = field(default_factory=list)


def _digest(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=8).hexdigest()


class Ledger:
    def __init__(self, name: str = "run", *, seed: int | None = None):
        self.name, self.seed = name, seed
        self._lock = threading.Lock()
        self._t0 = time.monotonic()
        self._sent: dict[str, _Sent] = {}
        self._ack_order: dict[str, list[tuple[str, Place]]] = {}       # shard key -> acks in send order
        self._consumed: list[tuple[str, str, Place]] = []             # (key, body digest, place) as received
        self._events: list[str] = []
        self._files: list[Path] = []

    # -- recording ----------------------------------------------------------------------------

    def note(self, text: str) -> None:
        with self._lock:
            self._events.append(f"{time.monotonic() - self._t0:8.3f}s {text}")

    def log_file(self, path: Path | str) -> None:
        """A process log to show the tail of when the run fails."""
        with self._lock:
            self._files.append(Path(path))

    def attempt(self, key: str, body: bytes, *, shard: str | None = None) -> None:
        """A send of *key* is about to be made (before the outcome is known)."""
        d = _digest(body)
        with self._lock:
            s = self._sent.get(key)
            if s is None:
                s = self._sent[key] = _Sent(d, shard=shard)
            elif s.digest != d:
                raise ValueError(f"key {key!r} sent again with another body: the test must use unique keys")
            s.attempts += 1

    def acked(self, key: str, place: Place) -> None:
        """The broker acknowledged *key* (SEND_OK) at *place*."""
        with self._lock:
            s = self._sent.get(key)
            if s is None:
                raise ValueError(f"acked {key!r} without attempt()")
            s.acked.append(place)
            if s.shard is not None:
                self._ack_order.setdefault(s.shard, []).append((key, place))

    def consumed(self, key: str, body: bytes, place: Place) -> None:
        with self._lock:
            self._consumed.append((key, _digest(body), place))

    # -- views ----------------------------------------------------------------------------------

    @property
    def acked_keys(self) -> set[str]:
        with self._lock:
            return {k for k, s in self._sent.items() if s.acked}

    @property
    def consumed_keys(self) -> set[str]:
        with self._lock:
            return {k for k, _, _ in self._consumed}

    def missing(self) -> set[str]:
        """Acknowledged keys not consumed yet (tests wait until this is empty, then check)."""
        return self.acked_keys - self.consumed_keys

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {"attempted": len(self._sent), "acked": sum(1 for s in self._sent.values() if s.acked),
                    "consumed": len(self._consumed), "distinct consumed": len({k for k, _, _ in self._consumed})}

    # -- judging --------------------------------------------------------------------------------

    def problems(self, *, orderly: set[str] | frozenset[str] = frozenset()) -> dict[str, list[str]]:
        with self._lock:
            out = {"lost": self._lost(), "invented": self._invented(), "misplaced": self._misplaced(),
                   "out of order": self._disorder(orderly)}
        return {k: v for k, v in out.items() if v}

    def _lost(self) -> list[str]:
        got = {k for k, _, _ in self._consumed}
        return [f"{k} acked at {s.acked[0]}" for k, s in sorted(self._sent.items()) if s.acked and k not in got]

    def _invented(self) -> list[str]:
        out = []
        for key, digest, place in self._consumed:
            s = self._sent.get(key)
            if s is None:
                out.append(f"{key} at {place}: never sent")
            elif s.digest != digest:
                out.append(f"{key} at {place}: body differs from the one sent")
        return out

    def _misplaced(self) -> list[str]:
        out = []
        for key, _, place in self._consumed:
            s = self._sent.get(key)
            if s is not None and s.attempts == 1 and len(s.acked) == 1 and s.acked[0] != place:
                out.append(f"{key} acked at {s.acked[0]}, consumed at {place}")
        return out

    def _disorder(self, orderly) -> list[str]:
        out = []
        first: dict[str, Place] = {}
        for key, _, place in self._consumed:
            first.setdefault(key, place)
        per_queue: dict[tuple[str, str, int], list[tuple[str, Place]]] = {}
        seen: set[str] = set()
        for key, _, place in self._consumed:
            if place.topic in orderly and key not in seen:
                seen.add(key)
                per_queue.setdefault((place.topic, place.broker, place.queue_id), []).append((key, place))
        for firsts in per_queue.values():
            for (k1, p1), (k2, p2) in zip(firsts, firsts[1:]):
                if p2.queue_offset < p1.queue_offset:
                    out.append(f"{k2} ({p2}) first delivered after {k1} ({p1})")
        for shard, acks in self._ack_order.items():
            for (k1, p1), (k2, p2) in zip(acks, acks[1:]):
                if p1.topic in orderly and (p1.topic, p1.broker, p1.queue_id) == (p2.topic, p2.broker, p2.queue_id) \
                        and p2.queue_offset < p1.queue_offset:
                    out.append(f"shard {shard}: {k2} sent after {k1} but stored before it ({p2} < {p1})")
        return out

    def report(self, problems: dict[str, list[str]] | None = None) -> str:
        problems = self.problems() if problems is None else problems
        seed = f" (seed {self.seed})" if self.seed is not None else ""
        lines = [f"run {self.name}{seed}", f"counts: {self.counts()}"]
        for kind, items in problems.items():
            lines.append(f"{kind}: {len(items)}")
            lines += [f"  {item}" for item in items[:MAX_SHOWN]]
        with self._lock:
            events, files = self._events[-LOG_TAIL_LINES:], list(self._files)
        lines.append(f"events (last {len(events)}):")
        lines += [f"  {e}" for e in events]
        for path in files:
            try:
                data = path.read_bytes()[-FILE_TAIL_BYTES:].decode(errors="replace")
            except OSError as exc:
                data = f"(unreadable: {exc})"
            lines.append(f"--- tail of {path} ---")
            lines.append(data)
        return "\n".join(lines)

    def assert_ok(self, *, orderly: set[str] | frozenset[str] = frozenset()) -> None:
        problems = self.problems(orderly=orderly)
        if problems:
            raise AssertionError(self.report(problems))
