"""The ``checkpoint`` file: how far each part of the store is known to be on disk.

One 4 KiB page, big-endian int64 fields.  The first five are RocketMQ's (4.x has the first
three; 5.x adds two for HA), so RocketMQ's tools read a rocketq checkpoint; the next two are
rocketq's own and sit where RocketMQ reads nothing::

    @0   physicMsgTimestamp   store time of the last CommitLog record flushed
    @8   logicsMsgTimestamp   store time of the last record whose consume-queue unit is flushed
    @16  indexMsgTimestamp    end time of the last index file flushed
    @24  masterFlushedOffset  (HA, 5.x)
    @32  confirmPhyOffset     (HA, 5.x)
    @40  physicFlushedOffset  rocketq: CommitLog bytes known flushed; corruption below it is fatal
    @48  logicsFlushedOffset  rocketq: CommitLog offset up to which consume queues and index are
                              flushed; recovery re-dispatches from here

Values only ever move forward while the store runs; the file is rewritten in place and
fdatasync'ed by the flush thread.  A torn checkpoint write can only make recovery start earlier.
The page's blocks are reserved when the file is created, so rewriting it never needs free space:
a store on a full disk still records its progress and shuts down cleanly.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

CHECKPOINT_SIZE = 4096
_FIELDS = struct.Struct(">7q")


@dataclass
class Checkpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0
    physic_flushed_offset: int = 0
    logics_flushed_offset: int = 0

    def min_timestamp(self) -> int:
        """RocketMQ's recovery time bound: the older of log and queues, minus 3 s of slack."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - 3000)

    def encode(self) -> bytes:
        page = bytearray(CHECKPOINT_SIZE)
        _FIELDS.pack_into(page, 0, self.physic_msg_timestamp, self.logics_msg_timestamp,
                          self.index_msg_timestamp, self.master_flushed_offset, self.confirm_phy_offset,
                          self.physic_flushed_offset, self.logics_flushed_offset)
        return bytes(page)

    @classmethod
    def decode(cls, data: bytes) -> "Checkpoint":
        if len(data) < _FIELDS.size:
            data = data + bytes(_FIELDS.size - len(data))
        return cls(*_FIELDS.unpack_from(data, 0))


class CheckpointFile:
    def __init__(self, path: Path):
        self.path = Path(path)
        existed = self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self.value = Checkpoint.decode(os.pread(self._fd, CHECKPOINT_SIZE, 0)) if existed else Checkpoint()
            if os.fstat(self._fd).st_size < CHECKPOINT_SIZE:
                os.posix_fallocate(self._fd, 0, CHECKPOINT_SIZE)
        except OSError as exc:
            os.close(self._fd)
            if not existed:
                self.path.unlink(missing_ok=True)
            raise OSError(exc.errno, f"cannot reserve the {CHECKPOINT_SIZE}-byte checkpoint {self.path}: "
                                     f"{exc.strerror}") from exc
        self.existed = existed

    def flush(self) -> None:
        os.pwrite(self._fd, self.value.encode(), 0)
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            os.close(self._fd)
            self._fd = -1
