"""The client's data: message queues, routes, send and pull results, errors.

Messages to send are :class:`rocketq.common.message.Message` (topic, body, tags, keys,
properties, delay_level); messages received are :class:`rocketq.store.record.StoredMessage`
(every field of the stored record: queue id and offset, store time, reconsume times, ...).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rocketq.common import fastjson

PERM_WRITE, PERM_READ = 2, 4
MASTER_ID = 0


class MQClientError(Exception):
    """A request failed; ``code`` is the response code (or -1 for a local error)."""

    def __init__(self, code: int, remark: str | None, address: str = ""):
        self.code, self.remark, self.address = code, remark or "", address
        where = f" from {address}" if address else ""
        super().__init__(f"code {code}{where}: {self.remark}" if code >= 0 else f"{self.remark}{where}")


@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict:
        return {"topic": self.topic, "brokerName": self.broker_name, "queueId": self.queue_id}

    def __str__(self) -> str:
        return f"{self.topic}@{self.broker_name}#{self.queue_id}"


@dataclass
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int


@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    addrs: dict[int, str]

    @property
    def master(self) -> str | None:
        return self.addrs.get(MASTER_ID)


@dataclass
class TopicRoute:
    topic: str
    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)

    @classmethod
    def parse(cls, topic: str, body: bytes) -> TopicRoute:
        data = fastjson.loads(body)
        qds = [QueueData(q["brokerName"], int(q["readQueueNums"]), int(q["writeQueueNums"]), int(q["perm"]))
               for q in data.get("queueDatas") or ()]
        bds = [BrokerData(b.get("cluster", ""), b["brokerName"],
                          {int(k): v for k, v in (b.get("brokerAddrs") or {}).items()})
               for b in data.get("brokerDatas") or ()]
        return cls(topic, qds, bds)

    def master_of(self, broker_name: str) -> str | None:
        for b in self.broker_datas:
            if b.broker_name == broker_name:
                return b.master
        return None

    def read_addr_of(self, broker_name: str) -> str | None:
        """Where to read *broker_name*'s queues: its master, or a slave when the master is gone."""
        for b in self.broker_datas:
            if b.broker_name == broker_name and b.addrs:
                return b.master or b.addrs[min(b.addrs)]
        return None

    def write_queues(self, topic: str | None = None) -> list[MessageQueue]:
        """Writable queues of brokers with a master (computed once per route and topic)."""
        topic = topic or self.topic
        cache = self.__dict__.setdefault("_write_queues", {})
        queues = cache.get(topic)
        if queues is None:
            queues = cache[topic] = [
                MessageQueue(topic, q.broker_name, i) for q in sorted(self.queue_datas, key=lambda q: q.broker_name)
                if q.perm & PERM_WRITE and self.master_of(q.broker_name) for i in range(q.write_queue_nums)]
        return queues

    def read_queues(self) -> list[MessageQueue]:
        return [MessageQueue(self.topic, q.broker_name, i) for q in sorted(self.queue_datas, key=lambda q: q.broker_name)
                if q.perm & PERM_READ for i in range(q.read_queue_nums)]


class SendStatus(enum.Enum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass
class SendResult:
    status: SendStatus
    msg_id: str                   # the client's unique id (UNIQ_KEY); for a batch, comma-joined
    offset_msg_id: str            # the broker's offset id (store host + commitlog offset)
    queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    recall_handle: str | None = None     # a message due later (TIMER_* / DELAY): what Producer.recall takes


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list = field(default_factory=list)      # StoredMessage
    suggest_broker_id: int = 0                        # suggestWhichBrokerId: where to pull this queue next


class ConsumeResult(enum.Enum):
    """What a listener returns (concurrent: SUCCESS / RECONSUME_LATER; orderly also SUSPEND)."""
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


class TransactionState(enum.Enum):
    COMMIT = 8
    ROLLBACK = 12
    UNKNOWN = 0


class ConsumeFrom(enum.Enum):
    LAST = "CONSUME_FROM_LAST_OFFSET"
    FIRST = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


@dataclass(frozen=True)
class Credentials:
    """ACL 1.0 access key and secret (requests are signed with them when given).  The secret is
    left out of the repr, so a logged or printed client never shows it."""
    access_key: str
    secret_key: str = field(repr=False)
