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

    __slots__ = ("status", "error", "_appended", "_count", "_store_host")

    def __init__(self, status: PutStatus, *, error: str | None = None, appended=None,
                 store_host: HostAddress | None = None, count: int = 0):
        self.status = status
        self.error = error
        self._appended = appended            # a CommitLog Appended, None when nothing was stored
        self._count = len(appended.queue_offsets) if appended is not None else count
        self._store_host = store_host

    @property
    def ok(self) -> bool:
        return self.status == PutStatus.PUT_OK

    @property
    def store_timestamp(self) -> int:
        return self._appended.store_timestamp if self._appended is not None else 0

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i: int) -> PutMessageResult:
        a = self._appended
        if a is None:
            if not -self._count <= i < self._count:
                raise IndexError(i)
            return PutMessageResult(self.status, None, -1, -1, -1, 0, 0, self.error)
        phy = a.offsets[i]
        return PutMessageResult(self.status, offset_msg_id(self._store_host, phy), phy, a.queue_offsets[i],
                                a.batch.queue_ids[i], a.sizes[i], a.store_timestamp, self.error)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    @property
    def msg_ids(self) -> list[str]:
        """All offset message ids (of offset -1 for a batch that was not stored)."""
        return self.joined_msg_ids().split(",") if self._count else []

    def joined_msg_ids(self) -> str:
        """The offset message ids joined with ',', as a batch send response carries them."""
        a = self._appended
        if a is None:
            return ",".join([offset_msg_id(self._store_host, -1)] * self._count) if self._store_host else ""
        return a.batch.joined_msg_ids(self._store_host.packed, a.first_offset)


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
