"""A fixed pool of segment-sized anonymous buffers (RocketMQ ``TransientStorePool``).

With the pool enabled, producers write into a buffer borrowed for the segment, and a commit
thread writes the bytes to the file with ``pwrite`` later (see :mod:`rocketq.store.flush` and
:meth:`MappedFile.commit <rocketq.store.mapped_file.MappedFile.commit>`).  Writes never touch the
page cache directly, so a flush storm cannot stall the put path, and the buffers are reused
memory: after their first segment, appending to them takes no page faults.  The pool is bounded:
when every buffer is lent, new segments are written straight to the mapping.
"""

from __future__ import annotations

import threading


class TransientStorePool:
    def __init__(self, size: int, buffer_bytes: int):
        self.buffer_bytes = buffer_bytes
        self._free = [bytearray(buffer_bytes) for _ in range(size)]
        self._lock = threading.Lock()

    def borrow(self) -> bytearray | None:
        with self._lock:
            return self._free.pop() if self._free else None

    def give_back(self, buf: bytearray) -> None:
        with self._lock:
            self._free.append(buf)

    def available(self) -> int:
        return len(self._free)
