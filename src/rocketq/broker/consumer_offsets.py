"""Committed consumer offsets (RocketMQ ``ConsumerOffsetManager``), in ``config/consumerOffset.json``.

Format: ``{"offsetTable": {"<topic>@<group>": {"<queueId>": offset}}, "dataVersion": {...}}``.
Offsets are consume-queue (logical) offsets: the next message the group will read.  Java writes
the queue ids as unquoted integer keys; the reader accepts both.  Commits only mark the table
dirty; ``persist`` (every few seconds and at shutdown) writes it atomically when it changed.

An operator's reset (RocketMQ 5's server-side reset, ``assignResetOffset``) sets the offset and
keeps it pending (in memory, as RocketMQ's ``resetOffsetTable``) until a consumer of the group
reads that queue again (:meth:`take_reset`, the pull answers PULL_OFFSET_MOVED to it); meanwhile
commits of the queue are ignored, so a consumer still at its old position cannot undo the reset.
"""

from __future__ import annotations

import threading
from pathlib import Path

from rocketq.common.data_version import DataVersion
from rocketq.store.config_files import read_json, write_json

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.table: dict[str, dict[int, int]] = {}
        self.data_version = DataVersion()
        self._lock = threading.Lock()
        self._dirty = False
        self.resets: dict[str, dict[int, int]] = {}       # "topic@group" -> queue id -> reset offset pending

    def load(self) -> None:
        data = read_json(self.path) or {}
        with self._lock:
            self.table = {key: {int(q): int(o) for q, o in (queues or {}).items()}
                          for key, queues in (data.get("offsetTable") or {}).items()}
            self.data_version = DataVersion.from_json(data.get("dataVersion"))

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> bool:
        """Store *offset* for the group's queue; a negative offset means "nothing to commit" (as clients
        send).  False when ignored: that, or a reset of the queue is pending."""
        if offset < 0:
            return False
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        with self._lock:
            if self.resets and queue_id in self.resets.get(key, ()):
                return False
            self.table.setdefault(key, {})[queue_id] = offset
            self._dirty = True
        return True

    def assign_reset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """An operator's reset: the offset now, and pending until :meth:`take_reset`."""
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        with self._lock:
            self.resets.setdefault(key, {})[queue_id] = offset
            self.table.setdefault(key, {})[queue_id] = offset
            self._dirty = True

    def take_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The reset offset pending for the queue (and no longer pending), or None."""
        if not self.resets:
            return None
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        with self._lock:
            pending = self.resets.get(key)
            offset = pending.pop(queue_id, None) if pending else None
            if pending is not None and not pending:
                del self.resets[key]
        return offset

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed for this queue."""
        return self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id, -1)

    def offsets(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}))

    def groups_of(self, topic: str) -> list[str]:
        return sorted(k.split(TOPIC_GROUP_SEPARATOR, 1)[1] for k in self.table
                      if k.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic)

    def topics_of(self, group: str) -> list[str]:
        return sorted(k.split(TOPIC_GROUP_SEPARATOR, 1)[0] for k in self.table
                      if k.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group)

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            for key in [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[0] == topic]:
                del self.table[key]
                self._dirty = True

    def encode(self) -> dict:
        with self._lock:
            return {"offsetTable": {k: {str(q): o for q, o in sorted(v.items())} for k, v in sorted(self.table.items())}}

    def replace_all(self, table: dict[str, dict[int, int]]) -> None:
        """A slave takes its master's offsets (SlaveSynchronize)."""
        with self._lock:
            if table != self.table:
                self.table = table
                self._dirty = True

    def remove_group(self, group: str) -> None:
        with self._lock:
            for key in [k for k in self.table if k.split(TOPIC_GROUP_SEPARATOR, 1)[1] == group]:
                del self.table[key]
                self._dirty = True

    def persist(self, *, force: bool = False) -> bool:
        """Write the table if it changed since the last write; True when it wrote."""
        with self._lock:
            if not (self._dirty or force):
                return False
            self.data_version.next()
            payload = {"offsetTable": {k: {str(q): o for q, o in sorted(v.items())} for k, v in sorted(self.table.items())},
                       "dataVersion": self.data_version.to_json()}
            self._dirty = False
        try:
            write_json(self.path, payload)
        except OSError:
            self._dirty = True          # not on disk: the next persist writes it again
            raise
        return True

    def lowest_by_queue(self) -> dict[tuple[str, int], int]:
        """The lowest offset any group committed, per (topic, queue id): what is not read by all yet."""
        out: dict[tuple[str, int], int] = {}
        with self._lock:
            for key, queues in self.table.items():
                topic = key.split(TOPIC_GROUP_SEPARATOR, 1)[0]
                for qid, offset in queues.items():
                    k = (topic, qid)
                    out[k] = min(out.get(k, offset), offset)
        return out
