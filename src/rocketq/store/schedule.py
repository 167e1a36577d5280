"""Delay levels (RocketMQ ``ScheduleMessageService``).

A message put with ``delay_level = n`` is stored in ``SCHEDULE_TOPIC_XXXX`` queue ``n - 1`` with its
real topic and queue in ``REAL_TOPIC`` / ``REAL_QID``; its consume-queue tags code is the delivery
time.  This service walks each level's queue in order and, once a unit's delivery time has come,
puts the message again under its real topic with ``DELAY`` removed.  Queues of one level are
ordered by delivery time (same delay, increasing store time), so each level waits only on its
head.  Progress per level is ``config/delayOffset.json``, written at most once a second and at
shutdown; after a crash a few messages may be delivered twice, never lost (at-least-once).
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from rocketq.common.sysflag import (
    PROPERTY_DELAY,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    SCHEDULE_TOPIC,
)
from rocketq.store.config_files import read_json, write_json
from rocketq.store.consume_queue import BLANK_SIZE
from rocketq.store.record import StoredMessage

log = logging.getLogger(__name__)

UNITS_PER_POLL = 256
PERSIST_INTERVAL_S = 1.0


class ScheduleService:
    def __init__(self, store, path: Path, delay_levels_ms: list[int], *, poll_interval_ms: int, clock=time.time):
        self._store = store
        self._path = path
        self._levels = delay_levels_ms
        self._poll_s = poll_interval_ms / 1000
        self._clock = clock
        self.offsets: dict[int, int] = {}
        self._version = 0
        self._dirty = False
        self._last_persist = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rocketq-schedule", daemon=True)
        self._failing = False        # a re-put or persist failed (a full disk): logged once, retried each poll

    def load(self) -> None:
        data = read_json(self._path) or {}
        self.offsets = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}
        self._version = int((data.get("dataVersion") or {}).get("counter", 0) or 0)

    def start(self) -> None:
        """Start delivering (again, after a shutdown: a demoted master that is promoted once more)."""
        if self.running:
            return
        if self._thread.ident is not None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="rocketq-schedule", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._poll_s):
            try:
                self.deliver_due()
                if self._dirty and time.monotonic() - self._last_persist >= PERSIST_INTERVAL_S:
                    self.persist()
            except Exception:
                if not self._failing:
                    log.exception("delay-level delivery failed; retrying every poll")
                self._failing = True

    def deliver_due(self) -> int:
        """Re-put every message whose time has come; returns how many were delivered."""
        delivered = 0
        now_ms = int(self._clock() * 1000)
        for level in range(1, len(self._levels) + 1):
            cq = self._store.consume_queue(SCHEDULE_TOPIC, level - 1)
            if cq is None:
                continue
            offset = max(self.offsets.get(level, 0), cq.min_offset())
            while True:
                units = cq.get_units(offset, UNITS_PER_POLL)
                if len(units) == 0:
                    break
                progressed = 0
                for phy, size, due in units.tolist():
                    if size != BLANK_SIZE:
                        if due > now_ms:
                            break
                        if not self._deliver(phy, size):
                            break
                        delivered += 1
                    progressed += 1
                offset += progressed
                if progressed < len(units):
                    break
            if offset != self.offsets.get(level, 0):
                self.offsets[level] = offset
                self._dirty = True
        return delivered

    def _deliver(self, phy: int, size: int) -> bool:
        raw = self._store.commitlog.read(phy, size)
        if raw is None:
            return True     # expired with its segment; nothing to deliver
        msg = due_message(StoredMessage(raw), phy)
        if msg is None:
            return True
        result = self._store.put_message(msg)
        if not result.ok and not self._failing:
            log.warning("re-putting delayed message at offset %d failed: %s (%s); retrying every poll",
                        phy, result.status, result.error)
        if result.ok and self._failing:
            log.warning("delay-level delivery works again")
        self._failing = not result.ok
        return result.ok

    def encode(self) -> dict:
        """The ``delayOffset.json`` document (also what a master sends a slave, GET_ALL_DELAY_OFFSET)."""
        return {"offsetTable": {str(k): v for k, v in sorted(self.offsets.items())},
                "dataVersion": {"stateVersion": 0, "timestamp": int(time.time() * 1000), "counter": self._version}}

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def replace_offsets(self, offset_table: dict) -> None:
        """A slave takes its master's progress (RocketMQ ``syncDelayOffset``), so that on promotion it
        does not deliver again what the master already delivered.  Refused while delivering."""
        if self.running:
            raise RuntimeError("delay offsets are copied only while this store does not deliver (a slave)")
        offsets = {int(k): int(v) for k, v in offset_table.items()}
        if offsets != self.offsets:
            self.offsets = offsets
            self.persist()

    def persist(self) -> None:
        self._version += 1
        write_json(self._path, self.encode())
        self._dirty = False
        self._last_persist = time.monotonic()

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        try:
            if self._dirty:
                self.persist()
        except OSError as exc:      # a full disk: the older progress stays; at-least-once, nothing lost
            log.error("delay-level progress not saved at shutdown (%s); messages delivered since the last save "
                      "will be delivered again after the restart", exc)


def due_message(m: StoredMessage, phy: int):
    """The message a delayed record at *phy* becomes when its level is due: its real topic and
    queue back, the delay property gone; None (logged) when the record has no real topic."""
    props = dict(m.properties)
    topic = props.get(PROPERTY_REAL_TOPIC)
    if topic is None:
        log.error("delayed message at offset %d has no REAL_TOPIC; skipped", phy)
        return None
    props.pop(PROPERTY_DELAY, None)
    return m.to_message(topic=topic, properties=props, queue_id=int(props.get(PROPERTY_REAL_QUEUE_ID, "0") or 0))
