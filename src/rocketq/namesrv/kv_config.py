"""The NameServer's KV config: namespace -> key -> value, kept in one JSON file.

Theory of operation
-------------------
Admin tools store small settings here (``ORDER_TOPIC_CONFIG`` is the one RocketMQ itself reads).
The file has RocketMQ's ``kvConfig.json`` shape, ``{"configTable": {namespace: {key: value}}}``,
so a file copied from a Java NameServer loads.  Every change rewrites the whole file atomically
(:func:`rocketq.store.config_files.write_json`: temp file, fsync, rename), so a crash leaves the
old or the new table, never a mix.  Changes are rare admin operations, so the write happens
inline; the in-memory table changes only after the file was written, so a failed write (disk
full) leaves memory and disk in agreement and raises to the caller.

``path=None`` keeps the table in memory only (tests, throwaway servers).
"""

from __future__ import annotations

import logging
from pathlib import Path

from rocketq.store.config_files import read_json, write_json

log = logging.getLogger(__name__)

NAMESPACE_ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class KVConfigManager:
    def __init__(self, path: Path | str | None) -> None:
        self.path = Path(path) if path is not None else None
        self._table: dict[str, dict[str, str]] = {}

    def load(self) -> None:
        """Read the file if it exists (its ``.bak`` if the file is damaged); a missing file is empty."""
        if self.path is None:
            return
        data = read_json(self.path)
        table = (data or {}).get("configTable") or {}
        self._table = {str(ns): {str(k): str(v) for k, v in kv.items()} for ns, kv in table.items()}
        log.info("loaded KV config %s: %d namespaces", self.path, len(self._table))

    def put(self, namespace: str, key: str, value: str) -> None:
        table = {ns: dict(kv) for ns, kv in self._table.items()}
        old = table.setdefault(namespace, {}).get(key)
        table[namespace][key] = value
        self._commit(table)
        log.info("KV config %s: %s = %r (was %r)", namespace, key, value, old)

    def get(self, namespace: str, key: str) -> str | None:
        return self._table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        if key not in self._table.get(namespace, {}):
            return False
        table = {ns: dict(kv) for ns, kv in self._table.items()}
        del table[namespace][key]
        if not table[namespace]:
            del table[namespace]
        self._commit(table)
        log.info("KV config %s: %s deleted", namespace, key)
        return True

    def list_namespace(self, namespace: str) -> dict[str, str] | None:
        """A copy of the namespace's table, or None if it has no keys."""
        kv = self._table.get(namespace)
        return dict(kv) if kv else None

    def _commit(self, table: dict[str, dict[str, str]]) -> None:
        if self.path is not None:
            write_json(self.path, {"configTable": table})
        self._table = table
