"""Small helpers shared by the store tests: configs, a fake clock, condition waits, seeds, readers.

Tests wait on conditions with a deadline (``wait_until``), never on a fixed sleep; randomized tests
take their seed from :func:`new_seed` and put it in every assertion message.  Set
``ROCKETQ_TEST_SEED`` to replay one.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from pathlib import Path

import pytest

from rocketq.store import GetStatus, MessageStore, StoreConfig

SEGMENT_BYTES = 64 * 1024
T0_S = 1_800_000_000.0            # a fixed "now" for the fake clock (2027-01-15 08:00:00 UTC)
T0_MS = 1_800_000_000_000


def small_config(path: Path, **kw) -> StoreConfig:
    """Small geometry so a few hundred messages roll segments; the index is off unless asked for."""
    base = {"store_path": path, "commitlog_file_size": SEGMENT_BYTES, "consume_queue_entries": 100,
            "index_slots": 101, "index_max_entries": 200, "message_index_enable": False}
    base.update(kw)
    return StoreConfig(**base)


class FakeClock:
    """A ``time.time``-like clock that only moves when told to (thread-safe)."""

    def __init__(self, t: float = T0_S):
        self._t = t
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._t += seconds

    @property
    def ms(self) -> int:
        return int(self() * 1000)


def wait_until(predicate, timeout_s: float = 10.0, poll_s: float = 0.005) -> bool:
    """True as soon as *predicate()* holds, False if it still does not after *timeout_s*.

    The store's own threads do the work; this only re-checks the condition, on an Event wait so
    the deadline is honoured without a bare sleep.
    """
    deadline = time.monotonic() + timeout_s
    tick = threading.Event()
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return predicate()
        tick.wait(poll_s)


def new_seed() -> int:
    """A fresh seed (or ``ROCKETQ_TEST_SEED`` to replay one); printed so a failure can be replayed."""
    env = os.environ.get("ROCKETQ_TEST_SEED")
    seed = int(env) if env else random.randrange(1 << 32)
    print(f"seed {seed}", file=sys.stderr)
    return seed


def read_queue(store: MessageStore, topic: str, queue_id: int, offset: int = 0, page: int = 64) -> list:
    """Every message of a queue from *offset* on, following next_begin_offset page by page."""
    out = []
    while True:
        got = store.get_messages(topic, queue_id, offset, page)
        if got.status != GetStatus.FOUND:
            return out
        assert got.next_begin_offset > offset, (offset, got)
        out.extend(got.messages)
        offset = got.next_begin_offset


def segment_files(store_path: Path) -> list[Path]:
    return sorted(p for p in (Path(store_path) / "commitlog").iterdir() if p.name.isdigit())


def subprocess_env() -> dict:
    """Environment for a child Python that imports rocketq exactly as this process does."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path):
    """A started store with the small geometry, no index, real clock; shut down after the test."""
    s = MessageStore(small_config(tmp_path / "store")).start()
    yield s
    s.shutdown()
