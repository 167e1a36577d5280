"""The consume-queue bit-map prefilter for SQL92 subscriptions (RocketMQ ``enableCalcFilterBitMap``).

Theory of operation
-------------------
RocketMQ's ``ConsumerFilterManager`` keeps, per topic, the SQL92 filter each consumer group
registered in its heartbeats, each with ``k`` bloom positions derived from ``group#topic``
(:mod:`rocketq.store.bloom`).  At dispatch (``CommitLogDispatcherCalcBitMap``) every message of
such a topic is evaluated against the topic's filters and the positions of those it matches are
set in an ``m``-bit map, stored in the consume queue's extension file
(:mod:`rocketq.store.consume_queue_ext`) whose unit address replaces the tags code in the consume
queue.  A pull through a registered filter (``ExpressionMessageFilter.isMatchedByConsumeQueue``)
then skips every unit whose map lacks one of the filter's positions, without reading its record:
the survivors are read and evaluated as before, so a false positive costs a read, and nothing
that matches is ever skipped.

:class:`FilterBitMaps` is both halves:

* **Dispatch, per batch.**  :meth:`FilterBitMaps.attach` takes one dispatched queue run (the units
  of one topic/queue from one walk of the log): one native call (``property_codes``) reads the
  properties the topic's filters use for all its records, dictionary-encoded; each filter is
  evaluated once per *distinct* combination of those values (a few per batch for typical
  properties, at most one per message), and numpy builds and writes the ext units.  Topics without
  filters, and brokers with the feature off (the default, as in RocketMQ: the sink then holds no
  ``FilterBitMaps`` at all), pay nothing per message.
* **Read.**  :meth:`FilterBitMaps.prefilter` gives a pull its :class:`Prefilter` when the pull's SQL92
  expression is the one the group registered; :func:`window` applies it (and resolves ext addresses
  back into tags codes for tag subscriptions) to a window of units, vectorised.

When bits can be trusted.  RocketMQ compares the ext unit's store time with the filter's
``bornTime``; rocketq compares CommitLog offsets instead, which has no race with a dispatch in
flight: a filter is *born* at the end offset of the first dispatch run that evaluates it
(everything dispatched from there on has its bits), and a unit's bits count for a filter only if
its record lies at or after the filter's born offset.  Units dispatched before a filter registered,
or before its expression changed (a changed expression is a new filter, born anew), or written
without an ext unit, are read and evaluated as without the prefilter.  The born offsets are saved
(``config/consumerFilter.json``) *before* the first ext unit computed with them is written, so after
a crash the filters loaded are the ones the surviving bits were computed with; a filter whose
bloom sizes changed (``maxErrorRateOfBloomFilter``, ``expectConsumerNumUseFilter``) is dropped on
load, as RocketMQ does.  Filters not heard of for ``filterDataCleanTimeSpan`` are dropped.  The
file's layout is rocketq's own (RocketMQ's ``consumerFilter.json`` holds born *times*).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from rocketq import _native
from rocketq.filter import SQL92, FilterError, SqlFilter, sub_version, subscription
from rocketq.store.bloom import BloomFilter
from rocketq.store.config_files import read_json, write_json
from rocketq.store.consume_queue import CQ_DTYPE, CQ_UNIT_SIZE
from rocketq.store.consume_queue_ext import MAX_ADDR, ConsumeQueueExt, encode_units

log = logging.getLogger(__name__)

FILTER_FILE = "consumerFilter.json"
UNKNOWN_CODE = -2                     # property_codes: the value could not be read, so match everything
DENSE_KEYS = 1 << 16                  # up to this many possible value combinations: found with a table, not a sort
MAX_FILTERS_PER_TOPIC = 256           # filters evaluated per message at most (beyond: not registered)
EXCLUDED_TOPICS = ("SCHEDULE_TOPIC_XXXX",)   # its tags code is the delivery time, read by the schedule service


@dataclass
class FilterData:
    """One group's SQL92 filter on one topic (RocketMQ ``ConsumerFilterData``)."""

    topic: str
    group: str
    expression: str
    version: int
    positions: tuple[int, ...]
    sql: SqlFilter
    born: int | None = None           # CommitLog offset from which every unit carries its bits
    seen_ms: int = 0


@dataclass(frozen=True)
class Prefilter:
    """What a pull needs to skip units: the filter's positions, born offset and the map size."""

    positions: tuple[int, ...]
    born: int
    bitmap_bytes: int
    owner: "FilterBitMaps | None" = field(default=None, compare=False)   # counts what it skipped


class FilterBitMaps:
    def __init__(self, bloom: BloomFilter, config_dir: Path, ext_root: Path, ext_file_size: int, *,
                 segment_of, clean_after_ms: int = 24 * 3600 * 1000, clock=time.time):
        self.bloom = bloom
        self._path = Path(config_dir) / FILTER_FILE
        self._ext_root, self._ext_file_size = Path(ext_root), ext_file_size
        self._segment_of = segment_of           # CommitLog offset -> its MappedFile
        self._clean_after_ms = clean_after_ms
        self._clock = clock
        self._lock = threading.Lock()
        self.units_skipped = 0                  # units pulls skipped unread on their bit maps (a statistic)
        self._by_topic: dict[str, dict[str, FilterData]] = {}
        self._snapshot: dict[str, tuple[FilterData, ...]] = {}    # replaced whole on change (read lock-free)
        self._load()

    # -- registration (heartbeats) ---------------------------------------------------------------

    def register(self, group: str, topic: str, expression: str, expression_type: str | None, version: int) -> bool:
        """Register *group*'s SQL92 filter on *topic*; True when it is new or changed (a new filter,
        born at the next dispatch).  Tag subscriptions and unparsable expressions are not filters."""
        if expression_type != SQL92 or not expression or topic in EXCLUDED_TOPICS:
            return False
        now = int(self._clock() * 1000)
        with self._lock:
            filters = self._by_topic.setdefault(topic, {})
            old = filters.get(group)
            if old is not None and old.expression == expression:
                old.version, old.seen_ms = max(old.version, version), now
                return False
            if old is not None and version < old.version:
                return False                     # an older heartbeat than the filter we have
            if old is None and len(filters) >= MAX_FILTERS_PER_TOPIC:
                log.warning("topic %s has %d SQL92 filters already; %s's is not prefiltered", topic,
                            len(filters), group)
                return False
            try:
                sql = subscription(expression, SQL92).sql
            except FilterError:
                return False
            filters[group] = FilterData(topic, group, expression, version, self.bloom.positions(f"{group}#{topic}"),
                                        sql, None, now)
            self._publish()
        log.info("SQL92 filter of %s on %s registered for the bit-map prefilter: %s", group, topic, expression)
        return True

    def register_heartbeat(self, data: dict) -> None:
        """Register the SQL92 subscriptions of a HEART_BEAT body (``HeartbeatData`` JSON)."""
        for c in data.get("consumerDataSet") or ():
            for sub in c.get("subscriptionDataSet") or ():
                self.register(str(c.get("groupName")), str(sub.get("topic")), str(sub.get("subString") or ""),
                              sub.get("expressionType"), sub_version(sub))

    def _publish(self) -> None:
        self._snapshot = {t: tuple(fs.values()) for t, fs in self._by_topic.items() if fs}

    def prefilter(self, group: str | None, topic: str, expression: str) -> Prefilter | None:
        """The prefilter for a pull of *group* through *expression*, when that is the group's born filter."""
        fd = self._by_topic.get(topic, {}).get(group) if group else None
        if fd is None or fd.born is None or fd.expression != expression:
            return None
        return Prefilter(fd.positions, fd.born, self.bloom.bytes_len, self)

    # -- dispatch ----------------------------------------------------------------------------------

    def snapshot(self, run_end: int) -> dict[str, tuple[FilterData, ...]]:
        """The filters to evaluate in a dispatch run that ends at CommitLog offset *run_end*.  Filters
        seen for the first time are born at *run_end* and saved before any of their bits is written."""
        snap = self._snapshot
        unborn = [fd for fds in snap.values() for fd in fds if fd.born is None]
        if unborn:
            with self._lock:
                self._save(born={id(fd): run_end for fd in unborn})   # raises: unsaved, so not born
                for fd in unborn:
                    fd.born = run_end
        return snap

    def attach(self, cq, first: int, units: bytes, filters: tuple[FilterData, ...]) -> tuple[int, bytes]:
        """Compute and write the ext units of one queue run; returns the run with ext addresses in
        place of tags codes (from the first unit the queue does not hold yet)."""
        skip = max(0, cq.max_offset() - first)
        if skip * CQ_UNIT_SIZE >= len(units):
            return first, units                  # a re-dispatch of what the queue holds: put_bytes skips it
        arr = np.frombuffer(units, dtype=CQ_DTYPE)[skip:].copy()
        bitmaps, times = self._bit_maps(arr, filters)
        if cq.ext is None:
            cq.ext = ConsumeQueueExt(self._ext_root, cq.topic, cq.queue_id, self._ext_file_size)
        arr["tag"] = cq.ext.put(encode_units(arr["tag"], times, bitmaps))
        return first + skip, arr.tobytes()

    def _bit_maps(self, arr: np.ndarray, filters) -> tuple[np.ndarray, np.ndarray]:
        """(n, m/8) bit maps and store times of the records *arr*'s units point at (one segment)."""
        names = sorted({name for fd in filters for name in fd.sql.properties})
        mf = self._segment_of(int(arr["phy"][0]))
        if mf is None:                           # cannot happen for a run just walked; match all to be safe
            all_bits = self._or_bits(filters)
            return np.tile(all_bits, (len(arr), 1)), np.zeros(len(arr), dtype=np.int64)
        raw_times, columns = _native.property_codes(arr.tobytes(), mf.buffer(), mf.file_from_offset, mf.committed,
                                                    names)
        times = np.frombuffer(raw_times, dtype="<i8")
        if not names:
            table = np.frombuffer(self._matching_bits(filters, {}, False), dtype=np.uint8)[None, :]
            return np.repeat(table, len(arr), axis=0), times
        distinct, inverse = _distinct_rows([np.frombuffer(c, dtype="<i4") for _values, c in columns],
                                           [len(values) for values, _c in columns])
        table = np.empty((len(distinct), self.bloom.bytes_len), dtype=np.uint8)
        for row, combo in enumerate(distinct):
            unknown = UNKNOWN_CODE in combo
            props = {name: columns[i][0][c] for i, (name, c) in enumerate(zip(names, combo)) if c >= 0}
            table[row] = np.frombuffer(self._matching_bits(filters, props, unknown), dtype=np.uint8)
        return table[inverse], times

    def _matching_bits(self, filters, props: dict, unknown: bool) -> bytes:
        return self.bloom.bit_map(p for fd in filters if unknown or fd.sql.matches(props) for p in fd.positions)

    def _or_bits(self, filters) -> np.ndarray:
        return np.frombuffer(self._matching_bits(filters, {}, True), dtype=np.uint8)

    # -- persistence -------------------------------------------------------------------------------

    def _save(self, born: dict[int, int] | None = None) -> None:
        """Write every filter with its born offset, or the one *born* gives it (by ``id``; caller
        holds the lock); raises OSError, which stalls dispatch until it can be written, so no bit is
        ever written ahead of its filter and no pull trusts a born offset a restart would not know."""
        born = born or {}
        limit = int(self._clock() * 1000) - self._clean_after_ms
        for topic, filters in list(self._by_topic.items()):
            for group in [g for g, fd in filters.items() if fd.seen_ms < limit]:
                log.info("dropping the SQL92 filter of %s on %s: not heard of for %d ms", group, topic,
                         self._clean_after_ms)
                del filters[group]
        self._publish()
        write_json(self._path, {"bitNum": self.bloom.m, "hashNum": self.bloom.k, "filters": [
            {"topic": fd.topic, "consumerGroup": fd.group, "expression": fd.expression, "expressionType": SQL92,
             "clientVersion": fd.version, "bitPos": list(fd.positions), "bornOffset": born.get(id(fd), fd.born),
             "lastSeen": fd.seen_ms} for fds in self._by_topic.values() for fd in fds.values()]})

    def _load(self) -> None:
        data = read_json(self._path)
        if not isinstance(data, dict):
            return
        if data.get("bitNum") != self.bloom.m or data.get("hashNum") != self.bloom.k:
            log.info("the bloom filter changed (%s bits, %s hashes before); the saved filter bits are ignored",
                     data.get("bitNum"), data.get("hashNum"))
            return
        for item in data.get("filters") or ():
            try:
                sql = subscription(item["expression"], SQL92).sql
                fd = FilterData(item["topic"], item["consumerGroup"], item["expression"], int(item["clientVersion"]),
                                tuple(int(p) for p in item["bitPos"]), sql,
                                None if item.get("bornOffset") is None else int(item["bornOffset"]),
                                int(item.get("lastSeen") or 0))
            except (KeyError, TypeError, ValueError, FilterError) as exc:
                log.warning("%s: skipping a filter that does not load (%s): %r", self._path, exc, item)
                continue
            self._by_topic.setdefault(fd.topic, {})[fd.group] = fd
        self._publish()

    def save(self) -> None:
        with self._lock:
            self._save()


def _distinct_rows(codes: list[np.ndarray], cards: list[int]) -> tuple[list[list[int]], np.ndarray]:
    """The distinct rows of the code columns (each code in -2..card-1) and each row's index among
    them.  The columns are packed into one int64 key; a dense table finds the distinct keys in O(n)
    when there are at most DENSE_KEYS possible keys (the usual case), a sort otherwise."""
    sizes = [card + 2 for card in cards]
    total = 1
    for size in sizes:
        total *= size
    if total >= 1 << 62:                          # cannot pack: compare whole rows
        rows, inverse = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
        return rows.tolist(), inverse.reshape(-1)
    key = np.zeros(len(codes[0]), dtype=np.int64)
    for column, size in zip(codes, sizes):
        key = key * size + (column.astype(np.int64) + 2)
    if total <= DENSE_KEYS:
        present = np.zeros(total, dtype=bool)
        present[key] = True
        keys = np.flatnonzero(present)
        slot = np.zeros(total, dtype=np.int64)
        slot[keys] = np.arange(len(keys))
        inverse = slot[key]
    else:
        keys, inverse = np.unique(key, return_inverse=True)
    rows = []
    for k in keys.tolist():
        row = []
        for size in reversed(sizes):
            k, code = divmod(k, size)
            row.append(code - 2)
        rows.append(row[::-1])
    return rows, inverse.reshape(-1)


def open_filter_bitmaps(cfg, paths, segment_of) -> FilterBitMaps | None:
    """The store's prefilter, or None when ``enableCalcFilterBitMap`` / ``enableConsumeQueueExt`` is off."""
    if not cfg.enable_calc_filter_bitmap:
        return None
    if not cfg.enable_consume_queue_ext:
        log.warning("enableCalcFilterBitMap is on but enableConsumeQueueExt is off: the bit maps have nowhere to "
                    "go, so SQL92 filters are not prefiltered (RocketMQ needs both too)")
        return None
    bloom = BloomFilter.create(cfg.max_error_rate_of_bloom_filter, cfg.expect_consumer_num_use_filter)
    return FilterBitMaps(bloom, paths.config, paths.consumequeue_ext, cfg.mapped_file_size_consume_queue_ext,
                         segment_of=segment_of, clean_after_ms=cfg.filter_data_clean_time_span_ms)


def window(cq, units: bytes, *, tag_codes, prefilter: Prefilter | None) -> tuple[bytes, np.ndarray | None]:
    """The units of a read window a reader should look at: with *prefilter*, those whose bit map may
    match (units without bits, or older than the filter, stay); with *tag_codes*, ext addresses are
    replaced by the tags codes they hold (one that cannot be read passes, as in RocketMQ).  Returns
    the units and the window positions they came from (None when nothing changed)."""
    arr = np.frombuffer(units, dtype=CQ_DTYPE)
    tags = arr["tag"]
    ext_at = np.flatnonzero(tags <= MAX_ADDR)
    if not len(ext_at) or cq.ext is None:
        return units, None
    keep = None
    if prefilter is not None:
        sel = ext_at[arr["phy"][ext_at] >= prefilter.born]
        ok, _tags, bits = cq.ext.read(tags[sel], prefilter.bitmap_bytes)
        hit = np.ones(len(sel), dtype=bool)
        for p in prefilter.positions:
            hit &= (bits[:, p >> 3] & (1 << (p & 7))) != 0
        keep = np.ones(len(arr), dtype=bool)
        keep[sel] = ~ok | hit
        if prefilter.owner is not None:
            prefilter.owner.units_skipped += len(arr) - int(np.count_nonzero(keep))
    if tag_codes is not None:
        ok, ext_tags = cq.ext.read_tags(tags[ext_at])
        arr = arr.copy()
        arr["tag"][ext_at] = np.where(ok, ext_tags, next(iter(tag_codes), 0))
    if keep is None:
        return arr.tobytes(), None
    index = np.flatnonzero(keep)
    return arr[index].tobytes(), index

