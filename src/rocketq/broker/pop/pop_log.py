"""The pop log: invisible-time state of pop consumers (gRPC and remoting), kept across broker restarts.

File ``<storePath>/grpc/pop.log``, append-only, one record per change, big-endian::

    off  size  field
      0     4  payload length (from offset 8)
      4     4  CRC-32 (zlib) of the payload
      8     1  kind: 1 POPPED (a message handed out, or its invisible time changed),
                     2 ACKED (acked, revived into the retry topic, or dead-lettered),
                     3 NEXT (the queue's next offset to pop),
                     4 RENEWING (the server renews this message for a client: a push consumer's
                       auto-renew receive; an empty client id ends that)
      9     4  queue id
     13     8  queue offset (POPPED / ACKED / RENEWING: the message's; NEXT: the next offset to pop)
     21     8  receipt-handle version (POPPED / ACKED / RENEWING; 0 for NEXT)
     29     8  POPPED: invisible until, ms since the epoch; RENEWING: first handed out, ms; 0 otherwise
     37     4  delivery attempt, 1 for a first delivery (POPPED; 0 otherwise)
     41   2+g  consumer group, uint16 length + UTF-8
      .   2+t  topic of the queue (the original topic or the group's pop retry topic), same
      .   2+c  RENEWING only: the client id (``x-mq-client-id``), same

A RENEWING record is kept across restarts so that a push consumer still working on a message
when the broker restarts is not handed a second copy of it.  (Files with RENEWING records cannot
be read by rocketq versions from before that kind: they stop with "unknown kind 4".)

Replaying the file in order rebuilds, per (group, topic, queue), the messages in flight (a later
POPPED for the same offset replaces an earlier one, ACKED removes it) and the next offset to pop.
Writes go to the OS at once (a killed process loses nothing; the records of one receive's batch go
in one write, before any of its messages is handed out) and are fsynced once a second; a
record torn by a machine crash at the very end is cut off on the next start.  A record that does
not check out in the middle of the file is corruption, and start-up stops and says where.
The file is rewritten with only the live state at start-up and whenever it grows past a limit.
"""

from __future__ import annotations

import contextlib
import functools
import os
import struct
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

POPPED, ACKED, NEXT, RENEWING = 1, 2, 3, 4
_HEAD = struct.Struct(">II")
_FIXED = struct.Struct(">BiqqqI")
MAX_NAME_BYTES = 1024
MAX_RECORD_BYTES = _FIXED.size + 6 + 3 * MAX_NAME_BYTES


@dataclass(frozen=True, slots=True)
class PopRecord:
    kind: int
    group: str
    topic: str
    queue_id: int
    offset: int
    version: int = 0
    deadline_ms: int = 0          # RENEWING: when the renewal began
    attempt: int = 0
    client: str = ""              # RENEWING only


class PopLogCorrupt(Exception):
    pass


def encode(r: PopRecord) -> bytes:
    names = _names(r.group, r.topic, r.client if r.kind == RENEWING else None)
    payload = _FIXED.pack(r.kind, r.queue_id, r.offset, r.version, r.deadline_ms, r.attempt) + names
    return _HEAD.pack(len(payload), zlib.crc32(payload)) + payload


@functools.lru_cache(maxsize=4096)
def _names(group: str, topic: str, client: str | None) -> bytes:
    """The length-prefixed names of a record (cached: every record of a queue repeats them)."""
    names = [group.encode(), topic.encode()] + ([client.encode()] if client is not None else [])
    if any(len(n) > MAX_NAME_BYTES for n in names):
        raise ValueError(f"group {group[:40]!r}, topic {topic[:40]!r} or client {(client or '')[:40]!r} is longer "
                         f"than {MAX_NAME_BYTES} bytes")
    return b"".join(len(n).to_bytes(2, "big") + n for n in names)


def decode_all(data: bytes, *, path: str = "pop.log") -> tuple[list[PopRecord], int]:
    """The records of a whole file and the length of its valid prefix (a torn last record is left
    out); raises PopLogCorrupt for damage before the last record."""
    records, pos, end = [], 0, len(data)
    while pos < end:
        bad = _check(data, pos)
        if bad is not None:
            if _is_tail(data, pos):
                return records, pos
            raise PopLogCorrupt(f"{path}: record at byte {pos}: {bad}")
        n, _ = _HEAD.unpack_from(data, pos)
        p = pos + _HEAD.size
        kind, qid, offset, version, deadline, attempt = _FIXED.unpack_from(data, p)
        p += _FIXED.size
        names = []
        for _ in range(_name_count(kind)):
            size = int.from_bytes(data[p:p + 2], "big")
            names.append(data[p + 2:p + 2 + size].decode())
            p += 2 + size
        records.append(PopRecord(kind, names[0], names[1], qid, offset, version, deadline, attempt,
                                 names[2] if kind == RENEWING else ""))
        pos += _HEAD.size + n
    return records, pos


def _check(data: bytes, pos: int) -> str | None:
    if len(data) - pos < _HEAD.size:
        return "truncated header"
    n, crc = _HEAD.unpack_from(data, pos)
    if not _FIXED.size + 4 <= n <= MAX_RECORD_BYTES:
        return f"payload length {n} is impossible"
    payload = data[pos + _HEAD.size:pos + _HEAD.size + n]
    if len(payload) < n:
        return "truncated payload"
    if zlib.crc32(payload) != crc:
        return "CRC mismatch"
    if payload[0] not in (POPPED, ACKED, NEXT, RENEWING):
        return f"unknown kind {payload[0]}"
    p = _FIXED.size
    for what in ("group", "topic", "client id")[:_name_count(payload[0])]:
        if p + 2 > n:
            return f"{what} length overruns the record"
        size = int.from_bytes(payload[p:p + 2], "big")
        if p + 2 + size > n:
            return f"{what} overruns the record"
        try:
            payload[p + 2:p + 2 + size].decode()
        except UnicodeDecodeError:
            return f"{what} is not UTF-8"
        p += 2 + size
    if p != n:
        return "the names do not fit the record"
    return None


def _name_count(kind: int) -> int:
    return 3 if kind == RENEWING else 2


def _is_tail(data: bytes, pos: int) -> bool:
    """A bad record is a torn tail when nothing valid follows it (it is the last write)."""
    if len(data) - pos < _HEAD.size:
        return True
    n = _HEAD.unpack_from(data, pos)[0]
    return pos + _HEAD.size + n >= len(data) or not any(data[pos + _HEAD.size + n:])


class PopLog:
    """The file: load, append, rewrite.  Single-threaded (the endpoint's event loop)."""

    def __init__(self, path: Path, *, compact_bytes: int = 64 << 20):
        self.path = Path(path)
        self.compact_bytes = compact_bytes
        self._f = None
        self.size = 0
        self._unsynced = False
        self._sync_lock = threading.Lock()
        self._pending: list[bytes] | None = None

    def load(self) -> list[PopRecord]:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = self.path.read_bytes() if self.path.exists() else b""
        records, valid = decode_all(data, path=str(self.path))
        if valid < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(valid)
        return records

    def rewrite(self, records: list[PopRecord]) -> None:
        """Replace the file with *records* (temp file, fsync, rename), then append after them."""
        self.close()
        tmp = self.path.with_suffix(".tmp")
        blob = b"".join(map(encode, records))
        with open(tmp, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._f = open(self.path, "ab", buffering=0)
        self.size = len(blob)

    def append(self, records: list[PopRecord]) -> None:
        blob = b"".join(map(encode, records))
        if self._pending is not None:
            self._pending.append(blob)
            return
        self._write(blob)

    @contextlib.contextmanager
    def batch(self):
        """Appends made inside the block go to the OS in one write when it ends.  For a run of
        changes with no await in it: nothing is acted on before the block is left."""
        if self._pending is not None:
            yield
            return
        self._pending = []
        try:
            yield
        finally:
            blob, self._pending = b"".join(self._pending), None
            if blob:
                self._write(blob)

    def _write(self, blob: bytes) -> None:
        self._f.write(blob)
        self.size += len(blob)
        self._unsynced = True

    @property
    def wants_compaction(self) -> bool:
        return self.size > self.compact_bytes

    def sync(self) -> None:
        """fsync what was appended (called from a worker thread: the lock keeps close() out)."""
        with self._sync_lock:
            if self._f is not None and self._unsynced:
                self._unsynced = False
                os.fsync(self._f.fileno())

    def close(self) -> None:
        with self._sync_lock:
            if self._f is not None:
                if self._unsynced:
                    os.fsync(self._f.fileno())
                self._f.close()
                self._f = None
