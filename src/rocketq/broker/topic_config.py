"""Topic configuration (RocketMQ ``TopicConfigManager``), persisted as ``config/topics.json``.

File format (what RocketMQ writes and reads)::

    {"topicConfigTable": {"<topic>": {"topicName", "readQueueNums", "writeQueueNums", "perm",
                                      "topicFilterType": "SINGLE_TAG", "topicSysFlag", "order",
                                      "attributes": {}}},
     "dataVersion": {"stateVersion", "timestamp", "counter"}}

``perm`` bits: INHERIT 1, WRITE 2, READ 4 (6 = read-write).  The system topics RocketMQ creates at
start are created here too.  With ``autoCreateTopicEnable`` the default topic ``TBW102`` carries
the INHERIT bit, and a first send to an unknown topic creates it from TBW102's queue counts
(``createTopicInSendMessageMethod``).  Request-reply's ``<cluster>_REPLY_TOPIC`` is one of the system
topics, as in RocketMQ.  Every change bumps the data version and is written
atomically (temp file, fsync, rename, ``.bak``).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.common.data_version import DataVersion
from rocketq.common.sysflag import SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocketq.common.validation import topic_error
from rocketq.store.config_files import read_json, write_json

log = logging.getLogger(__name__)

PERM_INHERIT, PERM_WRITE, PERM_READ = 1, 2, 4
PERM_READ_WRITE = PERM_READ | PERM_WRITE
DEFAULT_TOPIC = "TBW102"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
MAX_QUEUE_NUMS = 1024
REPLY_TOPIC_SUFFIX = "_REPLY_TOPIC"          # MixAll.REPLY_TOPIC_POSTFIX: <cluster>_REPLY_TOPIC


@dataclass
class TopicConfig:
    topic_name: str
    read_queue_nums: int = 8
    write_queue_nums: int = 8
    perm: int = PERM_READ_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"topicName": self.topic_name, "readQueueNums": self.read_queue_nums,
                "writeQueueNums": self.write_queue_nums, "perm": self.perm, "topicFilterType": self.topic_filter_type,
                "topicSysFlag": self.topic_sys_flag, "order": self.order, "attributes": dict(self.attributes)}

    @classmethod
    def from_json(cls, data: dict) -> "TopicConfig":
        return cls(str(data["topicName"]), int(data.get("readQueueNums", 8)), int(data.get("writeQueueNums", 8)),
                   int(data.get("perm", PERM_READ_WRITE)), str(data.get("topicFilterType", "SINGLE_TAG")),
                   int(data.get("topicSysFlag", 0)), bool(data.get("order", False)), dict(data.get("attributes") or {}))

    def is_writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    def is_readable(self) -> bool:
        return bool(self.perm & PERM_READ)


class TopicConfigError(ValueError):
    pass


class TopicConfigManager:
    def __init__(self, path: Path, *, cluster_name: str, broker_name: str, auto_create_topic: bool = True,
                 default_queue_nums: int = 4):
        self.path = Path(path)
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.auto_create_topic = auto_create_topic
        self.listeners: list = []          # called with no arguments after every change (re-register)
        self._lock = threading.RLock()
        self._system_topics(cluster_name, broker_name, default_queue_nums)

    def _system_topics(self, cluster: str, broker: str, default_queue_nums: int) -> None:
        defaults = [TopicConfig(SELF_TEST_TOPIC, 1, 1), TopicConfig(cluster, 16, 16, PERM_READ_WRITE),
                    TopicConfig(broker, 1, 1, PERM_READ_WRITE), TopicConfig(OFFSET_MOVED_EVENT, 1, 1),
                    TopicConfig(SCHEDULE_TOPIC, 18, 18), TopicConfig(TRANS_HALF_TOPIC, 1, 1),
                    TopicConfig(TRANS_OP_HALF_TOPIC, 1, 1),
                    TopicConfig(cluster + REPLY_TOPIC_SUFFIX, 1, 1)]     # request-reply's replies
        if self.auto_create_topic:
            defaults.append(TopicConfig(DEFAULT_TOPIC, default_queue_nums, default_queue_nums,
                                        PERM_READ_WRITE | PERM_INHERIT))
        for tc in defaults:
            self.table[tc.topic_name] = tc
        self.system_topics = frozenset(tc.topic_name for tc in defaults) | {DEFAULT_TOPIC}

    # -- persistence -------------------------------------------------------------------------

    def load(self) -> None:
        data = read_json(self.path)
        if not data:
            return
        with self._lock:
            for name, raw in (data.get("topicConfigTable") or {}).items():
                raw.setdefault("topicName", name)
                self.table[name] = TopicConfig.from_json(raw)
            self.data_version = DataVersion.from_json(data.get("dataVersion"))

    def persist(self) -> None:
        with self._lock:
            payload = self.encode()
        write_json(self.path, payload)
        for listener in self.listeners:
            listener()

    def encode(self) -> dict:
        with self._lock:
            return {"topicConfigTable": {n: tc.to_json() for n, tc in sorted(self.table.items())},
                    "dataVersion": self.data_version.to_json()}

    # -- changes -----------------------------------------------------------------------------

    def enter_epoch(self, epoch: int) -> None:
        """Controller mode: registrations from now on carry *epoch* as their stateVersion, which the
        NameServer compares when two addresses claim one broker id (RocketMQ's ReplicasManager does the
        same on every role change)."""
        with self._lock:
            self.data_version.next(state_version=epoch)

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def update(self, tc: TopicConfig) -> TopicConfig:
        """Create or replace *tc* (UPDATE_AND_CREATE_TOPIC); raises TopicConfigError naming the problem."""
        err = topic_error(tc.topic_name)
        if err:
            raise TopicConfigError(err)
        for what, n in (("readQueueNums", tc.read_queue_nums), ("writeQueueNums", tc.write_queue_nums)):
            if not 0 < n <= MAX_QUEUE_NUMS:
                raise TopicConfigError(f"topic {tc.topic_name!r}: {what} {n} is outside 1..{MAX_QUEUE_NUMS}")
        with self._lock:
            old = self.table.get(tc.topic_name)
            self.table[tc.topic_name] = tc
            self.data_version.next()
        try:
            self.persist()
        except OSError:     # topics.json not written (a full disk): the change did not happen
            with self._lock:
                if old is None:
                    self.table.pop(tc.topic_name, None)
                else:
                    self.table[tc.topic_name] = old
            raise
        if old != tc:
            log.info("topic %s %s: %d read / %d write queues, perm %d%s", tc.topic_name,
                     "created" if old is None else "updated", tc.read_queue_nums, tc.write_queue_nums, tc.perm,
                     ", ordered" if tc.order else "")
        return tc

    def delete(self, topic: str) -> bool:
        """Remove *topic*; raises TopicConfigError for an illegal name or the broker's own system topics."""
        err = topic_error(topic)
        if err:
            raise TopicConfigError(err)
        if topic in self.system_topics:
            raise TopicConfigError(f"topic {topic!r} is a system topic of this broker and cannot be deleted")
        with self._lock:
            gone = self.table.pop(topic, None) is not None
            if gone:
                self.data_version.next()
        if gone:
            self.persist()
            log.info("topic %s deleted", topic)
        return gone

    def create_in_send(self, topic: str, default_topic: str = DEFAULT_TOPIC, queue_nums: int = 4,
                       sys_flag: int = 0) -> TopicConfig | None:
        """The first send to an unknown *topic*: create it from *default_topic* if that allows it."""
        with self._lock:
            existing = self.table.get(topic)
            if existing is not None:
                return existing
            default = self.table.get(default_topic)
            if not self.auto_create_topic or default is None or not default.perm & PERM_INHERIT:
                return None
            nums = max(1, min(queue_nums, default.write_queue_nums))
            tc = TopicConfig(topic, nums, nums, default.perm & ~PERM_INHERIT, topic_sys_flag=sys_flag)
        return self.update(tc)

    def create_system_topic(self, topic: str, *, queue_nums: int = 1) -> TopicConfig:
        """One of the broker's own topics it makes at start-up (the trace topic): read-write, kept
        as it is when it exists already, and never deletable by an admin."""
        tc = self.table.get(topic) or self.update(TopicConfig(topic, queue_nums, queue_nums, PERM_READ_WRITE))
        self.system_topics = self.system_topics | {topic}
        return tc

    def create_retry_or_dlq(self, topic: str, queue_nums: int = 1) -> TopicConfig:
        """``%RETRY%group`` / ``%DLQ%group`` (RocketMQ creates them read-write with 1 queue)."""
        tc = self.table.get(topic)
        return tc if tc is not None else self.update(TopicConfig(topic, queue_nums, queue_nums, PERM_READ_WRITE))
