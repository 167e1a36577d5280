"""Store size profiles (``--store-profile`` of ``serve``, ``broker`` and ``run``) and what a store allocates.

The store reserves its files whole when it creates them (``posix_fallocate``), so their sizes are
disk taken at once, not a ceiling:

* CommitLog segments of ``mapedFileSizeCommitLog`` bytes: the one being written and the next,
  allocated ahead so that a roll never waits (two segments as soon as the first message arrives);
* one index file: 40 B + ``maxHashSlotNum`` x 4 B + ``maxIndexNum`` x 20 B;
* a consume-queue file per topic queue: ``mapedFileSizeConsumeQueue`` bytes (20 B per entry).

``default`` is RocketMQ's sizes (1 GiB segments, 5M slots / 20M entries, 300,000 entries per
consume-queue file): ~2.4 GiB as soon as a new store takes its first message.  ``small`` is for laptops, CI and the demo: 64 MiB
segments (a message is at most 4 MiB), an 8 MiB index and 586 KiB consume-queue files, ~140 MiB
for a new store; it rolls segments and index files 16 and 50 times as often.  A profile is a layer of
settings below the config file, the environment and flags; a store keeps the sizes it was made
with (``config/storeGeometry.json``), and opening it with other sizes stops with an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:                # importing the store loads numpy; the CLI imports this module at start
    from rocketq.store import StoreConfig

CQ_UNIT_BYTES = 20
INDEX_HEADER_BYTES, INDEX_SLOT_BYTES, INDEX_ENTRY_BYTES = 40, 4, 20
SEGMENTS_ALLOCATED = 2                     # the one being written and the next, made ahead

PROFILES: dict[str, dict[str, int]] = {
    "default": {},
    "small": {"mapedFileSizeCommitLog": 64 << 20, "mapedFileSizeConsumeQueue": 30_000 * CQ_UNIT_BYTES,
              "maxHashSlotNum": 100_000, "maxIndexNum": 400_000},
}
DEFAULT_PROFILE = "default"


def profile_entries(name: str) -> list[tuple[str, int, str]]:
    """The profile's settings as (RocketMQ key, value, where) config entries."""
    return [(key, value, f"profile {name}") for key, value in PROFILES[name].items()]


def store_config(name: str, **overrides) -> StoreConfig:
    """A StoreConfig with the profile's sizes (for the embedded store of ``rocketq run``)."""
    from rocketq.store import StoreConfig
    config, _ = StoreConfig.from_rocketmq({k: str(v) for k, v in PROFILES[name].items()}, **overrides)
    return config


def allocated_bytes(cfg: StoreConfig) -> dict[str, int]:
    """Bytes a new store with *cfg* reserves: CommitLog, index, and one consume-queue file."""
    index = (INDEX_HEADER_BYTES + cfg.index_slots * INDEX_SLOT_BYTES + cfg.index_max_entries * INDEX_ENTRY_BYTES
             if cfg.message_index_enable else 0)
    return {"commitlog": SEGMENTS_ALLOCATED * cfg.commitlog_file_size, "index": index,
            "consume_queue_file": cfg.consume_queue_entries * CQ_UNIT_BYTES}


def describe_allocation(cfg: StoreConfig) -> str:
    """One line for the start-up log: what the store takes on disk as soon as it is used."""
    a = allocated_bytes(cfg)
    return (f"{SEGMENTS_ALLOCATED} CommitLog segments of {_size(cfg.commitlog_file_size)} (the next made ahead), "
            f"an index file of {_size(a['index'])}, {_size(a['consume_queue_file'])} per topic queue")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"
