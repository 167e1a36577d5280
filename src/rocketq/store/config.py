"""The store's settings: one typed, frozen object, validated once.

Python names inside; RocketMQ's key names (``mapedFileSizeCommitLog``, ``flushDiskType``, ...)
are accepted by :meth:`StoreConfig.from_rocketmq` so a ``broker.conf`` carries over.
Defaults are RocketMQ's.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> list[int]:
    """'1s 5s ... 2h' -> delay in ms per level (level 1 first)."""
    levels = []
    for word in text.split():
        unit = word[-1]
        if unit not in _UNIT_MS or not word[:-1].isdigit():
            raise ValueError(f"messageDelayLevel: {word!r} is not <number><s|m|h|d>")
        levels.append(int(word[:-1]) * _UNIT_MS[unit])
    if not levels:
        raise ValueError("messageDelayLevel is empty")
    return levels


@dataclass(frozen=True)
class StoreConfig:
    store_path: Path = field(default_factory=lambda: Path.home() / "rocketq" / "store")
    commitlog_file_size: int = 1 << 30
    consume_queue_entries: int = 300_000
    index_slots: int = 5_000_000
    index_max_entries: int = 20_000_000
    message_index_enable: bool = True
    flush_disk_type: str = ASYNC_FLUSH
    sync_flush_timeout_ms: int = 5_000
    flush_interval_commitlog_ms: int = 500
    flush_commitlog_least_pages: int = 4
    flush_commitlog_thorough_interval_ms: int = 10_000
    flush_interval_consume_queue_ms: int = 1_000
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 2
    commit_interval_commitlog_ms: int = 200
    commit_commitlog_least_pages: int = 4
    commit_commitlog_thorough_interval_ms: int = 200
    max_message_size: int = 4 * 1024 * 1024
    warm_mapped_file_enable: bool = False
    prefault_mapped_file_enable: bool = True       # rocketq's own: map pages read-only a window ahead of the writer
    store_host: str = "127.0.0.1:10911"
    broker_role: str = "ASYNC_MASTER"           # ASYNC_MASTER | SYNC_MASTER | SLAVE (a slave never re-puts)
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    check_crc_on_recover: bool = True
    file_reserved_time_hours: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75            # % used: clean early (only what retention allows and all have read)
    disk_space_warning_level_ratio: int = 90       # % used: refuse new messages ("disk full") ...
    disk_space_clean_forcibly_ratio: int = 85      # ... until at or below this; forced deletion starts here when on
    clean_file_forcibly_enable: bool = False       # delete unread messages on a full disk (RocketMQ's default: true)
    clean_resource_interval_ms: int = 10_000
    dispatch_queue_max_messages: int = 1 << 17     # back-pressure: producers wait when dispatch lags this far
    schedule_poll_interval_ms: int = 100
    # the SQL92 bit-map prefilter (rocketq.store.filter_bitmap); off by default, as in RocketMQ, and on only
    # with both switches, as there
    enable_consume_queue_ext: bool = False         # enableConsumeQueueExt: consume queues get ext files
    enable_calc_filter_bitmap: bool = False        # enableCalcFilterBitMap: filters' bit maps computed at dispatch
    mapped_file_size_consume_queue_ext: int = 48 << 20   # mappedFileSizeConsumeQueueExt (bytes per ext file)
    max_error_rate_of_bloom_filter: int = 20       # maxErrorRateOfBloomFilter (%; RocketMQ's BrokerConfig)
    expect_consumer_num_use_filter: int = 32       # expectConsumerNumUseFilter (filters per topic the map is sized for)
    filter_data_clean_time_span_ms: int = 24 * 3600 * 1000   # filterDataCleanTimeSpan: unheard-of filters go

    def __post_init__(self):
        object.__setattr__(self, "store_path", Path(self.store_path).expanduser())
        if self.flush_disk_type not in (ASYNC_FLUSH, SYNC_FLUSH):
            raise ValueError(f"flushDiskType must be {ASYNC_FLUSH} or {SYNC_FLUSH}, not {self.flush_disk_type!r}")
        if self.commitlog_file_size < 4096 or self.commitlog_file_size % 4096:
            raise ValueError(f"commitlog_file_size must be a positive multiple of 4096, not {self.commitlog_file_size}")
        if self.consume_queue_entries < 1:
            raise ValueError("consume_queue_entries must be at least 1")
        if self.index_slots < 1 or self.index_max_entries < 2:
            raise ValueError("index_slots must be >= 1 and index_max_entries >= 2")
        if self.max_message_size <= 0:
            raise ValueError("max_message_size must be positive")
        if self.transient_store_pool_enable and self.flush_disk_type == SYNC_FLUSH:
            raise ValueError("transientStorePoolEnable works only with ASYNC_FLUSH, as in RocketMQ")
        parse_delay_levels(self.message_delay_level)
        if self.mapped_file_size_consume_queue_ext < 4096:
            raise ValueError(f"mappedFileSizeConsumeQueueExt {self.mapped_file_size_consume_queue_ext} is below 4096 bytes")
        if self.enable_calc_filter_bitmap:
            from rocketq.store.bloom import BloomFilter
            BloomFilter.create(self.max_error_rate_of_bloom_filter, self.expect_consumer_num_use_filter)  # raises
        if self.broker_role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
            raise ValueError(f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, not {self.broker_role!r}")
        for key, value in (("diskMaxUsedSpaceRatio", self.disk_max_used_space_ratio),
                           ("diskSpaceWarningLevelRatio", self.disk_space_warning_level_ratio),
                           ("diskSpaceCleanForciblyRatio", self.disk_space_clean_forcibly_ratio)):
            if not 1 <= value <= 100:
                raise ValueError(f"{key} is a percentage of the disk used, 1..100, not {value}")
        if self.disk_space_clean_forcibly_ratio > self.disk_space_warning_level_ratio:
            raise ValueError(f"diskSpaceCleanForciblyRatio ({self.disk_space_clean_forcibly_ratio}) is where writes "
                             f"resume after the disk was full, so it cannot be above diskSpaceWarningLevelRatio "
                             f"({self.disk_space_warning_level_ratio})")

    @property
    def delay_levels_ms(self) -> list[int]:
        return parse_delay_levels(self.message_delay_level)

    def replace(self, **changes) -> "StoreConfig":
        return dataclasses.replace(self, **changes)

    # RocketMQ key -> field name (their spellings, typos included)
    ROCKETMQ_KEYS = {
        "storePathRootDir": "store_path", "mapedFileSizeCommitLog": "commitlog_file_size",
        "mappedFileSizeCommitLog": "commitlog_file_size", "mapedFileSizeConsumeQueue": None,
        "flushDiskType": "flush_disk_type", "syncFlushTimeout": "sync_flush_timeout_ms",
        "flushIntervalCommitLog": "flush_interval_commitlog_ms",
        "flushCommitLogLeastPages": "flush_commitlog_least_pages",
        "flushCommitLogThoroughInterval": "flush_commitlog_thorough_interval_ms",
        "flushIntervalConsumeQueue": "flush_interval_consume_queue_ms",
        "transientStorePoolEnable": "transient_store_pool_enable",
        "transientStorePoolSize": "transient_store_pool_size",
        "commitIntervalCommitLog": "commit_interval_commitlog_ms",
        "commitCommitLogLeastPages": "commit_commitlog_least_pages",
        "commitCommitLogThoroughInterval": "commit_commitlog_thorough_interval_ms",
        "maxMessageSize": "max_message_size", "warmMapedFileEnable": "warm_mapped_file_enable",
        "messageIndexEnable": "message_index_enable", "maxHashSlotNum": "index_slots",
        "maxIndexNum": "index_max_entries", "messageDelayLevel": "message_delay_level",
        "checkCRCOnRecover": "check_crc_on_recover", "fileReservedTime": "file_reserved_time_hours",
        "deleteWhen": "delete_when", "diskMaxUsedSpaceRatio": "disk_max_used_space_ratio",
        "diskSpaceWarningLevelRatio": "disk_space_warning_level_ratio",
        "diskSpaceCleanForciblyRatio": "disk_space_clean_forcibly_ratio",
        "cleanFileForciblyEnable": "clean_file_forcibly_enable",
        "cleanResourceInterval": "clean_resource_interval_ms", "brokerRole": "broker_role",
        "enableConsumeQueueExt": "enable_consume_queue_ext", "enableCalcFilterBitMap": "enable_calc_filter_bitmap",
        "mappedFileSizeConsumeQueueExt": "mapped_file_size_consume_queue_ext",
        "maxErrorRateOfBloomFilter": "max_error_rate_of_bloom_filter",
        "expectConsumerNumUseFilter": "expect_consumer_num_use_filter",
        "filterDataCleanTimeSpan": "filter_data_clean_time_span_ms",
    }

    @classmethod
    def from_rocketmq(cls, props: dict[str, str], **overrides) -> tuple["StoreConfig", list[str]]:
        """Build from RocketMQ-named properties; returns (config, keys it does not know)."""
        kwargs: dict = {}
        unknown = []
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for key, value in props.items():
            name = cls.ROCKETMQ_KEYS.get(key, key if key in types else "")
            if name is None:
                if key == "mapedFileSizeConsumeQueue":
                    kwargs["consume_queue_entries"] = int(value) // 20
                continue
            if not name:
                unknown.append(key)
                continue
            kwargs[name] = _coerce(types[name], value)
        kwargs.update(overrides)
        return cls(**kwargs), unknown


def _coerce(type_name, value):
    if not isinstance(value, str):
        return value
    t = str(type_name)
    if t == "int":
        return int(value)
    if t == "bool":
        if value.lower() not in ("true", "false"):
            raise ValueError(f"expected true or false, got {value!r}")
        return value.lower() == "true"
    if t == "Path":
        return Path(os.path.expanduser(value))
    return value
