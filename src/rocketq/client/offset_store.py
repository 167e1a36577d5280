"""Where a consumer keeps its progress.

* :class:`RemoteOffsetStore` (cluster model): offsets live on the brokers; the client keeps the
  latest in memory and commits them every 5 s, when a queue is taken away, and on shutdown
  (UPDATE_CONSUMER_OFFSET to the queue's master).
* :class:`LocalOffsetStore` (broadcast model): every client keeps its own offsets in a JSON file,
  ``~/.rocketq/offsets/<clientKey>/<group>.json``, written atomically.
* :class:`MemoryOffsetStore`: offsets live in this process only and are never committed; a reader
  that is no group (the ``rocketq consume`` default) starts every queue where ``consume_from`` says.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from rocketq.client.model import MessageQueue, MQClientError

log = logging.getLogger("rocketq.client")


class RemoteOffsetStore:
    def __init__(self, instance, group: str):
        self._instance, self._group = instance, group
        self.table: dict[MessageQueue, int] = {}
        self._committed: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int) -> None:
        self.table[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)
        self._committed.pop(mq, None)

    async def read(self, mq: MessageQueue) -> int:
        """The committed offset from the broker, or -1 when the group has none for this queue."""
        return await self._instance.api.query_offset(await self._instance.read_addr(mq), self._group, mq)

    async def persist(self, queues=None) -> None:
        for mq in list(queues if queues is not None else self.table):
            offset = self.table.get(mq)
            if offset is None or self._committed.get(mq) == offset:
                continue
            try:
                await self._instance.api.update_offset(await self._instance.read_addr(mq), self._group, mq, offset)
                self._committed[mq] = offset
            except MQClientError as exc:
                log.info("offset commit for %s failed (kept for the next round): %s", mq, exc)


class MemoryOffsetStore:
    def __init__(self):
        self.table: dict[MessageQueue, int] = {}

    def update(self, mq: MessageQueue, offset: int) -> None:
        self.table[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    async def read(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    async def persist(self, queues=None) -> None:
        pass                                  # nothing leaves the process


class LocalOffsetStore:
    def __init__(self, client_key: str, group: str, directory: Path | None = None):
        root = Path(directory) if directory else Path.home() / ".rocketq" / "offsets"
        self.path = root / client_key / f"{group}.json"
        self.table: dict[MessageQueue, int] = {}
        if self.path.exists():
            try:
                for row in json.loads(self.path.read_text()):
                    self.table[MessageQueue(row["topic"], row["brokerName"], int(row["queueId"]))] = int(row["offset"])
            except (ValueError, KeyError) as exc:
                log.error("ignoring unreadable offsets file %s: %s", self.path, exc)

    def update(self, mq: MessageQueue, offset: int) -> None:
        self.table[mq] = offset

    def remove(self, mq: MessageQueue) -> None:
        pass                                  # broadcast: every queue stays ours

    async def read(self, mq: MessageQueue) -> int:
        return self.table.get(mq, -1)

    async def persist(self, queues=None) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rows = [dict(mq.to_json(), offset=o) for mq, o in sorted(self.table.items())]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(rows, indent=1))
        os.replace(tmp, self.path)
