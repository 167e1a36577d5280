"""The embedded message store: CommitLog, consume queues, index, flushing, dispatch, recovery.

Theory of operation
-------------------
``put_message`` / ``put_messages`` (:mod:`rocketq.store.writes`) validate outside the lock, append
under the CommitLog's put lock, hand the appended batch to the dispatcher, and (under ``SYNC_FLUSH``)
wait for the group commit.  The dispatcher fills consume queues and the index in the background;
readers go through a consume queue to the CommitLog.  This module opens, recovers, starts and
stops the store and holds its read API; topic deletion, replication appends and the flush
bookkeeping are in :mod:`rocketq.store.maintenance`.

Background threads: segment preallocation, CommitLog flush (group commit or periodic), transient
buffer commit, dispatch, consume-queue/index flush + checkpoint, delay-level delivery, and expiry
of old files.  Each gets only the callables it needs, not the store.

``start`` takes the process lock, detects a crash by the ``abort`` marker, recovers (see
:mod:`rocketq.store.recovery`), and only then accepts writes.  ``shutdown`` stops producers,
drains the dispatcher, flushes everything, writes the checkpoint and removes ``abort``.
"""

from __future__ import annotations

import logging
import threading
import time

from rocketq.common.msgid import HostAddress, decode_offset_msg_id, offset_msg_id
from rocketq.store.allocator import AllocateService
from rocketq.store.checkpoint import CheckpointFile
from rocketq.store.cleaner import Cleaner
from rocketq.store.commitlog import CommitLog
from rocketq.store.config import SYNC_FLUSH, StoreConfig
from rocketq.store.config_files import ConfigFileError, read_json, write_json
from rocketq.store.consume_queue import BLANK_SIZE, ConsumeQueue
from rocketq.store.consume_queue_ext import open_ext
from rocketq.store.dispatch_sinks import ConsumeQueueSink, IndexSink
from rocketq.store.dispatcher import Dispatcher
from rocketq.store.filter_bitmap import open_filter_bitmaps
from rocketq.store.flush import CommitService, GroupCommitService, PeriodicFlushService
from rocketq.store.maintenance import StoreMaintenance
from rocketq.store.mapped_file import MappedFile
from rocketq.store.prepare import Preparer
from rocketq.store.reads import QueueReader
from rocketq.store.record import MAGIC_V1, MAGIC_V2, MIN_RECORD_BYTES, StoredMessage
from rocketq.store.recovery import RecoveryReport, recover_commitlog
from rocketq.store.results import GetMessageResult
from rocketq.store.schedule import ScheduleService
from rocketq.store.store_files import ProcessLock, StorePaths, create_abort_marker
from rocketq.store.transient_pool import TransientStorePool
from rocketq.store.writes import StoreWrites

log = logging.getLogger(__name__)


def _read_or_none(path):
    try:
        return read_json(path)
    except ConfigFileError:          # unreadable: written anew
        return None


class MessageStore(StoreWrites, StoreMaintenance):
    def __init__(self, config: StoreConfig | None = None, *, clock=time.time, reserve=None):
        self.config = config or StoreConfig()
        self.paths = StorePaths(self.config.store_path)
        self._clock = clock
        self._reserve = reserve
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._queues_lock = threading.Lock()
        self._dirty_queues: set[ConsumeQueue] = set()
        self._lock = ProcessLock(self.paths.lock)
        self.store_host = HostAddress.parse(self.config.store_host)
        self.running = False
        self.recovery: RecoveryReport | None = None
        self.arrival_listeners: list = []
        # (topic, queue id) -> lowest offset a consumer group committed; set by the broker, so that
        # cleaning under disk pressure keeps what a group has not read yet (see Cleaner)
        self.consumed_offsets = None
        self._logics_flush_failing = False
        self._delay_level_count = len(self.config.delay_levels_ms)
        self._msg_id_prefix = offset_msg_id(self.store_host, 0)[:-16]

    # -- lifecycle ---------------------------------------------------------------------------

    def set_store_host(self, address: str) -> None:
        """The ``host:port`` written into records and message ids; only before :meth:`start`
        (a broker learns its port when it binds)."""
        if self.running:
            raise RuntimeError("the store host cannot change while the store runs")
        self.store_host = HostAddress.parse(address)
        self._msg_id_prefix = offset_msg_id(self.store_host, 0)[:-16]

    def start(self) -> "MessageStore":
        self.paths.check_is_store()
        self._lock.acquire()
        try:
            self._open()
        except BaseException:
            self._close_after_failed_open()
            self._lock.release()
            raise
        return self

    def _open(self) -> None:
        cfg, paths = self.config, self.paths
        abnormal = paths.abort.exists()
        for d in (paths.commitlog, paths.consumequeue, paths.index, paths.config):
            d.mkdir(parents=True, exist_ok=True)
        self.checkpoint = CheckpointFile(paths.checkpoint)
        pool = None
        if cfg.transient_store_pool_enable:
            pool = TransientStorePool(cfg.transient_store_pool_size, cfg.commitlog_file_size)
        kwargs = {"transient_pool": pool}
        if self._reserve is not None:
            kwargs["reserve"] = self._reserve
        self._allocator = AllocateService(lambda p: MappedFile(p, cfg.commitlog_file_size, **kwargs),
                                          warm=cfg.warm_mapped_file_enable, prefault=cfg.prefault_mapped_file_enable,
                                          sync_warm=cfg.flush_disk_type == SYNC_FLUSH)
        self.commitlog = CommitLog(paths.commitlog, file_size=cfg.commitlog_file_size, store_host=self.store_host,
                                   allocator=self._allocator, transient_pool=pool, reserve=self._reserve,
                                   max_message_size=cfg.max_message_size)
        self.commitlog.files.load()
        self.index = None
        if cfg.message_index_enable:
            from rocketq.store.index_service import IndexService
            self.index = IndexService(paths.index, slot_count=cfg.index_slots, max_entries=cfg.index_max_entries,
                                      clock_ms=lambda: int(self._clock() * 1000))
            self.index.load(clean_shutdown=not abnormal, checkpoint_ms=self.checkpoint.value.index_msg_timestamp)
        self._load_queues()
        self.filter_bitmaps = open_filter_bitmaps(cfg, paths, self.commitlog.files.find)   # None unless on
        sinks = [ConsumeQueueSink(self._queue_for_dispatch, self._on_arrival, self._mark_dirty, self.filter_bitmaps)]
        if self.index is not None:
            sinks.append(IndexSink(self.index))
        self.dispatcher = Dispatcher(self.commitlog, sinks, delay_levels_ms=cfg.delay_levels_ms,
                                     with_index=self.index is not None,
                                     max_pending_messages=cfg.dispatch_queue_max_messages)
        self._notify_appended = self.dispatcher.notify_appended    # bound once, not per single put
        self._preparer = Preparer(max_message_size=cfg.max_message_size, delay_levels=self._delay_level_count,
                                  store_host=self.store_host)
        self.recovery = self._recover(abnormal)
        # only now that the files opened with these sizes (a failed start must not rewrite it), and only
        # when it changed (a store on a full disk still opens, to be read)
        geometry = {"commitlogFileSize": cfg.commitlog_file_size, "consumeQueueEntries": cfg.consume_queue_entries,
                    "indexSlots": cfg.index_slots, "indexMaxEntries": cfg.index_max_entries,
                    "messageIndexEnable": cfg.message_index_enable}
        if _read_or_none(paths.geometry) != geometry:
            write_json(paths.geometry, geometry)
        if cfg.warm_mapped_file_enable:
            self.commitlog.files.last_for_append().warm(sync=cfg.flush_disk_type == SYNC_FLUSH)
        elif self.commitlog.files.files:
            self._allocator.follow(self.commitlog.files.files[-1])
        create_abort_marker(paths.abort)
        self._start_services()
        self.running = True
        log.info("store %s open (%s recovery, log end %d)", paths.root,
                 "crash" if abnormal else "normal", self.recovery.end_offset)

    def _close_after_failed_open(self) -> None:
        """Release what a failed start opened (threads, mappings); nothing is flushed or changed."""
        allocator = getattr(self, "_allocator", None)
        if allocator is not None:
            allocator.shutdown()
        commitlog = getattr(self, "commitlog", None)
        if commitlog is not None:
            commitlog.files.close(flush=False)
        for cq in self._queues.values():
            cq.files.close(flush=False)
            if cq.ext is not None:
                cq.ext.files.close(flush=False)
        if getattr(self, "index", None) is not None:
            self.index.close()

    def _load_queues(self) -> None:
        root = self.paths.consumequeue
        for topic_dir in sorted(p for p in root.iterdir() if p.is_dir()):
            for qdir in sorted(p for p in topic_dir.iterdir() if p.is_dir() and p.name.isdigit()):
                cq = ConsumeQueue(root, topic_dir.name, int(qdir.name), self.config.consume_queue_entries)
                cq.load()
                open_ext(cq, self.paths.consumequeue_ext, self.config.mapped_file_size_consume_queue_ext)
                self._queues[(topic_dir.name, int(qdir.name))] = cq

    def _recover(self, abnormal: bool) -> RecoveryReport:
        cp = self.checkpoint.value
        end, scanned, cut = recover_commitlog(self.commitlog.files, cp, abnormal=abnormal,
                                              check_crc=self.config.check_crc_on_recover, store_path=self.paths.root)
        for cq in self._queues.values():
            cq.recover()
            cq.truncate_dirty(end)
            cq.correct_min_offset(self.commitlog.min_offset())
        # also after a clean shutdown: one that came while dispatch was stalled (a full disk) left the
        # queues behind the log, and the checkpoint says from where
        start = min(cp.logics_flushed_offset, end)
        if not self._queues or not self.checkpoint.existed:
            start = self.commitlog.min_offset()     # queues (or the checkpoint) gone: rebuild them all
        if self.index is not None and self.index.max_phy_offset < 0 and abnormal:
            start = self.commitlog.min_offset()
        elif self.index is not None and abnormal:
            start = min(start, self.index.max_phy_offset)
        start = max(start, self.commitlog.min_offset())
        self.dispatcher.dispatched_offset = start
        count = self.dispatcher.dispatch_range(start, end) if start < end else 0
        for (topic, qid), cq in self._queues.items():
            self.commitlog.queue_offsets[(topic, qid)] = cq.max_offset()
        return RecoveryReport(abnormal, scanned, end, cut, count)

    def _after_commit(self) -> None:
        """The transient pool's commit moved: the flusher has pages to sync, the dispatcher records to read."""
        self._flusher.wakeup()
        self.dispatcher.wake()

    def _start_services(self) -> None:
        cfg, cl = self.config, self.commitlog
        self.group_commit = None
        if cfg.flush_disk_type == SYNC_FLUSH:
            self.group_commit = GroupCommitService(self._flush_commitlog, cfg.sync_flush_timeout_ms)
            self._flusher = self.group_commit
        else:
            self._flusher = PeriodicFlushService(
                self._flush_commitlog, cl.dirty_bytes, interval_ms=cfg.flush_interval_commitlog_ms,
                least_pages=cfg.flush_commitlog_least_pages,
                thorough_interval_ms=cfg.flush_commitlog_thorough_interval_ms)
        self._committer = None
        if cfg.transient_store_pool_enable:
            self._committer = CommitService(cl.commit, cl.uncommitted_bytes, self._after_commit,
                                            interval_ms=cfg.commit_interval_commitlog_ms,
                                            least_pages=cfg.commit_commitlog_least_pages,
                                            thorough_interval_ms=cfg.commit_commitlog_thorough_interval_ms)
        self.schedule = ScheduleService(self, self.paths.delay_offset, cfg.delay_levels_ms,
                                        poll_interval_ms=cfg.schedule_poll_interval_ms, clock=self._clock)
        self.schedule.load()
        self.cleaner = Cleaner(self, interval_ms=cfg.clean_resource_interval_ms,
                               reserved_hours=cfg.file_reserved_time_hours, delete_when=cfg.delete_when,
                               max_used_ratio=cfg.disk_max_used_space_ratio,
                               warning_ratio=cfg.disk_space_warning_level_ratio,
                               forcibly_ratio=cfg.disk_space_clean_forcibly_ratio,
                               force_enable=cfg.clean_file_forcibly_enable, clock=self._clock)
        self._logics_stop = threading.Event()
        self._logics_thread = threading.Thread(target=self._logics_flush_loop, name="rocketq-flush-cq", daemon=True)
        self.dispatcher.start(self.dispatcher.dispatched_offset)
        for svc in (self._flusher, self._committer):
            if svc is not None:
                svc.start()
        self._logics_thread.start()
        if self.config.broker_role != "SLAVE":      # delayed messages are re-put by the master only
            self.schedule.start()
        self.cleaner.start()

    def shutdown(self) -> None:
        """Stop, flush and close.  The abort marker goes only when the checkpoint was written: a
        shutdown that could not write it (a failing disk) leaves the next start a crash recovery.
        A stalled dispatch (a full disk) is not waited for: the checkpoint says where it stopped and
        the next start dispatches from there."""
        if not self.running:
            return
        self.running = False
        try:
            self.cleaner.shutdown()
            self.schedule.shutdown()
            self.dispatcher.wait_dispatched(timeout_s=60, while_stalled=False)
            self.dispatcher.shutdown()
            if self._committer is not None:
                self._committer.shutdown()
            self._flusher.shutdown()
            self._logics_stop.set()
            self._logics_thread.join(timeout=30)
            self._allocator.shutdown()
            self.commitlog.close()
            self._flush_logics(final=True)
            for cq in self._queues.values():
                cq.close()
            if self.index is not None:
                self.index.close()
            self.checkpoint.close()
            self.paths.abort.unlink(missing_ok=True)
        except OSError:
            log.exception("store %s: shutdown could not write everything; the abort marker stays, so the next "
                          "start recovers as after a crash", self.paths.root)
        finally:
            self._lock.release()

    def __enter__(self) -> "MessageStore":
        return self.start() if not self.running else self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # -- consume queues ----------------------------------------------------------------------

    def consume_queues(self) -> dict[tuple[str, int], ConsumeQueue]:
        return dict(self._queues)

    def delete_expired_files(self) -> int:
        """Run one expiry round now, whatever the hour (RocketMQ's manual delete)."""
        return self.cleaner.run_once(force=True)

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def _queue_for_dispatch(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            with self._queues_lock:
                cq = self._queues.get((topic, queue_id))
                if cq is None:
                    cq = ConsumeQueue(self.paths.consumequeue, topic, queue_id, self.config.consume_queue_entries)
                    open_ext(cq, self.paths.consumequeue_ext, self.config.mapped_file_size_consume_queue_ext, fresh=True)
                    self._queues[(topic, queue_id)] = cq
        return cq

    def _mark_dirty(self, cq: ConsumeQueue) -> None:
        """After units were written (not before: a flush in between would miss them).  A queue already
        in the set is left alone without the lock: the flush that takes the set away takes it after
        this look, so after these units were written, and flushes them."""
        if cq not in self._dirty_queues:
            with self._queues_lock:
                self._dirty_queues.add(cq)

    def _on_arrival(self, topic: str, queue_id: int, next_offset: int) -> None:
        for listener in self.arrival_listeners:
            listener(topic, queue_id, next_offset)

    def topics(self) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for topic, qid in sorted(self._queues):
            out.setdefault(topic, []).append(qid)
        return out

    def wait_dispatched(self, timeout_s: float = 60.0, *, while_stalled: bool = True) -> bool:
        """Wait until what was appended so far is in its consume queue and the index; with
        *while_stalled* False, stop waiting as soon as dispatch is stalled (a full disk)."""
        return self.dispatcher.wait_dispatched(timeout_s, while_stalled=while_stalled)

    # -- reading -----------------------------------------------------------------------------

    def get_messages(self, topic: str, queue_id: int, offset: int, max_count: int = 32, *,
                     tag_codes: set[int] | None = None, max_bytes: int | None = None,
                     prefilter=None) -> GetMessageResult:     # prefilter: filter_bitmap.Prefilter (bit maps)
        return self._reader.get(topic, queue_id, offset, max_count, tag_codes=tag_codes, max_bytes=max_bytes,
                                prefilter=prefilter)

    @property
    def _reader(self) -> QueueReader:
        return QueueReader(self._queues.get, self.commitlog)

    def read_message(self, physical_offset: int, size: int | None = None) -> StoredMessage | None:
        """The record starting at *physical_offset*, or None when no record starts there."""
        if size is None:
            head = self.commitlog.read(physical_offset, 8)
            if head is None:
                return None
            size = int.from_bytes(head[:4], "big", signed=True)
            if size < MIN_RECORD_BYTES or int.from_bytes(head[4:8], "big") not in (MAGIC_V1, MAGIC_V2):
                return None
        raw = self.commitlog.read(physical_offset, size)
        if raw is None or len(raw) < MIN_RECORD_BYTES:
            return None
        msg = StoredMessage(raw)
        return msg if msg.physical_offset == physical_offset else None

    def view_by_id(self, msg_id: str) -> StoredMessage | None:
        """The message with this offset id (raises ValueError for a malformed id)."""
        _host, offset = decode_offset_msg_id(msg_id)
        if not self.commitlog.min_offset() <= offset < self.commitlog.max_offset():
            return None
        return self.read_message(offset)

    def query_by_key(self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0,
                     end_ms: int | None = None) -> list[StoredMessage]:
        """Messages of *topic* whose KEYS contain *key* or whose UNIQ_KEY is *key*, newest first."""
        if self.index is None:
            return []
        end_ms = end_ms if end_ms is not None else int(self._clock() * 1000) + 1
        found = self.index.query(topic, key, max_num, begin_ms, end_ms)
        out = []
        for phy in found.phy_offsets:
            m = self.read_message(phy)
            if m is not None and m.topic == topic and (key in m.keys or m.uniq_key == key):
                out.append(m)
        return out

    def max_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return cq.max_offset() if cq else 0

    def min_offset(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return cq.min_offset() if cq else 0

    def search_offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int, *, upper: bool = False) -> int:
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return 0
        return cq.search_offset_by_time(timestamp_ms, self.commitlog.store_time_of, boundary_lower=not upper)

    def earliest_store_time(self, topic: str, queue_id: int) -> int:
        cq = self._queues.get((topic, queue_id))
        return self.store_time_at(topic, queue_id, cq.min_offset()) if cq else -1

    def last_store_time(self, topic: str, queue_id: int) -> int:
        return self.store_time_at(topic, queue_id, self.max_offset(topic, queue_id) - 1)

    def store_time_at(self, topic: str, queue_id: int, offset: int) -> int:
        """Store timestamp (ms) of the message at logical *offset*, or -1 when there is none."""
        cq = self._queues.get((topic, queue_id))
        unit = cq.get_unit(offset) if cq and offset >= 0 else None
        if unit is None or unit[1] == BLANK_SIZE:
            return -1
        return self.commitlog.store_time_of(unit[0], unit[1]) or -1

    def msg_id(self, physical_offset: int) -> str:
        return offset_msg_id(self.store_host, physical_offset)
