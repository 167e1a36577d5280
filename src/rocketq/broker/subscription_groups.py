"""Consumer group configuration (RocketMQ ``SubscriptionGroupManager``), in ``config/subscriptionGroup.json``.

Format: ``{"subscriptionGroupTable": {"<group>": {...}}, "forbiddenTable": {}, "dataVersion": {...}}``
with RocketMQ's field names.  A group that heartbeats is created with the defaults
(``autoCreateSubscriptionGroup``); ``retryMaxTimes`` (16) is where the dead-letter threshold comes from.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.common.data_version import DataVersion
from rocketq.common.validation import name_refusal
from rocketq.store.config_files import read_json, write_json

log = logging.getLogger(__name__)


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: dict = field(default_factory=dict)

    _JSON = {"groupName": "group_name", "consumeEnable": "consume_enable",
             "consumeFromMinEnable": "consume_from_min_enable", "consumeBroadcastEnable": "consume_broadcast_enable",
             "consumeMessageOrderly": "consume_message_orderly", "retryQueueNums": "retry_queue_nums",
             "retryMaxTimes": "retry_max_times", "brokerId": "broker_id",
             "whichBrokerWhenConsumeSlowly": "which_broker_when_consume_slowly",
             "notifyConsumerIdsChangedEnable": "notify_consumer_ids_changed_enable",
             "groupSysFlag": "group_sys_flag", "consumeTimeoutMinute": "consume_timeout_minute",
             "attributes": "attributes"}

    def to_json(self) -> dict:
        return {k: getattr(self, v) for k, v in self._JSON.items()}

    @classmethod
    def from_json(cls, data: dict) -> "SubscriptionGroupConfig":
        return cls(**{v: data[k] for k, v in cls._JSON.items() if k in data})


class SubscriptionGroupManager:
    def __init__(self, path: Path, *, auto_create: bool = True):
        self.path = Path(path)
        self.auto_create = auto_create
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()
        self._lock = threading.Lock()

    def load(self) -> None:
        data = read_json(self.path) or {}
        with self._lock:
            for name, raw in (data.get("subscriptionGroupTable") or {}).items():
                raw.setdefault("groupName", name)
                self.table[name] = SubscriptionGroupConfig.from_json(raw)
            self.data_version = DataVersion.from_json(data.get("dataVersion"))

    def get(self, group: str, *, create: bool = False) -> SubscriptionGroupConfig | None:
        cfg = self.table.get(group)
        if cfg is None and create and self.auto_create:
            cfg = self.update(SubscriptionGroupConfig(group))
        return cfg

    def update(self, cfg: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        """Create or replace *cfg*; raises ValueError for a group name RocketMQ would refuse."""
        why = name_refusal("group", cfg.group_name)
        if why is not None:
            raise ValueError(why)
        with self._lock:
            old = self.table.get(cfg.group_name)
            self.table[cfg.group_name] = cfg
            self.data_version.next()
        self.persist()
        if old != cfg:
            log.info("consumer group %s %s (retry queues %d, retries before dead-lettering %d)", cfg.group_name,
                     "created" if old is None else "updated", cfg.retry_queue_nums, cfg.retry_max_times)
        return cfg

    def delete(self, group: str) -> bool:
        with self._lock:
            gone = self.table.pop(group, None) is not None
            if gone:
                self.data_version.next()
        if gone:
            self.persist()
            log.info("consumer group %s deleted", group)
        return gone

    def encode(self) -> dict:
        """The GET_ALL_SUBSCRIPTIONGROUP_CONFIG body, also what subscriptionGroup.json holds."""
        with self._lock:
            return {"subscriptionGroupTable": {n: c.to_json() for n, c in sorted(self.table.items())},
                    "forbiddenTable": {}, "dataVersion": self.data_version.to_json()}

    def persist(self) -> None:
        write_json(self.path, self.encode())
