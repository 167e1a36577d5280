"""Typed results of store operations (RocketMQ ``PutMessageStatus`` / ``GetMessageStatus``).

Statuses are ``str`` enums, so ``result.status == "PUT_OK"`` reads naturally and the names are
RocketMQ's, which the broker maps one-to-one onto response codes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


from rocketq.common.msgid import HostAddress, offset_msg_id


class PutStatus(str, Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"

    def __str__(self) -> str:
        return self.value


# The record is in the log (maybe not yet durable/replicated) for these statuses.
STORED_STATUSES = frozenset({PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT,
                             PutStatus.FLUSH_SLAVE_TIMEOUT, PutStatus.SLAVE_NOT_AVAILABLE})


class PutError(Exception):
    """A message the store refuses; ``status`` says which kind, the text says what and where."""

    def __init__(self, status: PutStatus, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(slots=True)
class PutMessageResult:
    status: PutStatus
    msg_id: str | None = None
    physical_offset: int = -1
    queue_offset: int = -1
    queue_id: int = -1
    wrote_bytes: int = 0
    store_timestamp: int = 0
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == PutStatus.PUT_OK


class BatchPutResult:
    """Results of one ``put_messages`` call; items are built on access (the batch path is hot)."""

    __slots__ = ("status", "error", "_batch", "first_offset", "store_timestamp", "_count", "_store_host")

    def __init__(self, status: PutStatus, *, error: str | None = None, batch=None, first_offset: int = -1,
                 store_timestamp: int = 0, store_host: HostAddress | None = None, count: int = 0):
        self.status = status
        self.error = error
        self._batch = batch                  # the appended RecordBatch, None when nothing was stored
        self.first_offset = first_offset
        self.store_timestamp = store_timestamp
        self._count = len(batch) if batch is not None else count
        self._store_host = store_host

    @property
    def ok(self) -> bool:
        return self.status == PutStatus.PUT_OK

    @property
    def end_offset(self) -> int:
        """Where the batch ends in the log (what a replica must reach), -1 when nothing was stored."""
        return self.first_offset + self._batch.total_bytes if self._batch is not None else -1

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> PutMessageResult:
        b = self._batch
        if not -self._count <= i < self._count:
            raise IndexError(i)
        if b is None:
            return PutMessageResult(self.status, None, -1, -1, -1, 0, 0, self.error)
        i %= self._count
        sizes = b.sizes
        phy = self.first_offset + sum(sizes[:i])
        return PutMessageResult(self.status, offset_msg_id(self._store_host, phy), phy, b.queue_offset(i),
                                b.queue_ids[i], sizes[i], self.store_timestamp, self.error)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def msg_ids(self) -> list[str]:
        """All offset message ids (of offset -1 for a batch that was not stored)."""
        return self.joined_msg_ids().split(",") if self._count else []

    def joined_msg_ids(self) -> str:
        """The offset message ids joined with ',', as a batch send response carries them."""
        if self._batch is None:
            return ",".join([offset_msg_id(self._store_host, -1)] * self._count) if self._store_host else ""
        return self._batch.joined_msg_ids(self._store_host.packed, self.first_offset)


class GetStatus(str, Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"

    def __str__(self) -> str:
        return self.value


@dataclass(slots=True)
class GetMessageResult:
    """What ``get_messages`` found: decoded messages plus the offsets a consumer needs next."""

    status: GetStatus
    messages: list = field(default_factory=list)
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    max_phy_pulled: int = -1        # CommitLog offset of the last record returned (-1: none)

    def __iter__(self):
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, i):
        return self.messages[i]

    @property
    def raw(self) -> bytes:
        """The records concatenated in store format, as a PULL_MESSAGE response body carries them."""
        blob = getattr(self.messages, "blob", None)      # a RecordRun read in one piece
        return blob if blob is not None else b"".join(m.raw for m in self.messages)
