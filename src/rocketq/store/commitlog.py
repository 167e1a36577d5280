"""The CommitLog: every message of every topic, appended to one run of segment files.

Theory of operation
-------------------
:mod:`rocketq.store.prepare` (no lock) validates messages and computes what does not depend on
their position.  ``append`` then takes the put lock once for a whole batch: it assigns each record
its queue offset (from the ``(topic, queue id) -> next offset`` table) and physical offset, packs
the headers with one C-level ``map`` over the columns, interleaves them with bodies, topics and
properties, and copies the batch into the mapped segment with one memory copy.

A batch never straddles segments: when ``batch bytes + 8`` does not fit in what is left, a blank
record (``remaining | 0xCBD43194``) closes the segment and the batch goes to the next one.  A
batch bigger than a segment is refused.  Prepared and rolled-back transaction records get queue
offset 0 and do not advance the table: they never reach a consume queue.

Invariants: records are contiguous from the first segment's start; every record's PHYSICALOFFSET
field equals its position; the queue-offset table only grows.  This module knows nothing about
consume queues or indexes: ``append`` returns an :class:`AppendedBatch` that the store hands to the
dispatcher.
"""

from __future__ import annotations

import operator
import struct
import threading
import time
from dataclasses import dataclass
from itertools import accumulate, repeat
from pathlib import Path

from rocketq.common.msgid import HostAddress
from rocketq.common.sysflag import BORNHOST_V6, STOREHOST_V6
from rocketq.store.allocator import AllocateService
from rocketq.store.mapped_file import MappedFile
from rocketq.store.mapped_file_queue import MappedFileQueue
from rocketq.store.prepare import PreparedBatch
from rocketq.store.record import END_FILE_MIN_BLANK_LENGTH, MAGIC_V1, encode_blank, header_struct, record_struct
from rocketq.store.results import PutError, PutStatus

NOT_CONSUMABLE = 0x4     # PREPARED (0x4) and ROLLBACK (0xC) records get queue offset 0
_TAIL_HEAD = struct.Struct(">H")


@dataclass(slots=True)
class AppendedBatch:
    """What the dispatcher needs about records just appended (in log order)."""

    first_offset: int           # physical offset of the first record
    sizes: list[int]
    queue_offsets: list[int]
    columns: tuple | None       # (topics, queue_ids, sys_flags, tags, keys, uniq_keys, props_texts)
    store_timestamp: int
    row: tuple | None = None    # a single message's prepare_one() row instead of columns

    @property
    def end_offset(self) -> int:
        return self.first_offset + sum(self.sizes)


class CommitLog:
    def __init__(self, directory: Path, *, file_size: int, store_host: HostAddress,
                 allocator: AllocateService | None = None, transient_pool=None, reserve=None):
        self.store_host = store_host
        self.file_size = file_size
        kwargs = {"transient_pool": transient_pool}
        if reserve is not None:
            kwargs["reserve"] = reserve
        self.files = MappedFileQueue(directory, file_size,
                                     factory=lambda p: MappedFile(p, file_size, **kwargs), allocator=allocator)
        self.queue_offsets: dict[tuple[str, int], int] = {}
        self.put_lock = threading.Lock()
        self._store_v6 = store_host.is_v6
        self.last_store_timestamp = 0

    # -- appending ---------------------------------------------------------------------------

    def append(self, batch: PreparedBatch, *, clock=time.time, on_appended=None) -> AppendedBatch:
        """Append *batch* under the put lock; raises PutError (nothing written) on failure.

        *on_appended(appended)* runs inside the lock, so successive batches reach it in log order.
        """
        store_v6 = self._store_v6
        born_v6 = [bool(f & BORNHOST_V6) for f in batch.sys_flags] \
            if batch.any_born_v6 and any(f & BORNHOST_V6 for f in batch.sys_flags) else None
        hsize = header_struct(False, store_v6).size
        blens = batch.body_lens
        plens = list(map(len, batch.props_bs))
        topic_bs = batch.topic_bs
        if topic_bs.count(topic_bs[0]) == len(topic_bs):
            sizes = list(map((hsize + 3 + len(topic_bs[0])).__add__, map(operator.add, blens, plens)))
        else:
            sizes = [hsize + b + 3 + len(t) + p for b, t, p in zip(blens, topic_bs, plens)]
        if born_v6 is not None:
            sizes = [n + 12 if v6 else n for n, v6 in zip(sizes, born_v6)]
        total = sum(sizes)
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise PutError(PutStatus.MESSAGE_ILLEGAL,
                           f"a batch of {total} bytes does not fit in a {self.file_size}-byte commitlog segment")
        tails = list(map(_TAIL_HEAD.pack, plens))
        with self.put_lock:
            mf = self._segment_for(total)
            store_ts = int(clock() * 1000)
            first = mf.file_from_offset + mf.wrote
            qoffs = self._queue_offsets(batch)
            phys = list(accumulate(sizes[:-1], initial=first))
            headers = self._pack_headers(batch, sizes, qoffs, phys, blens, store_ts, born_v6)
            n = len(sizes)
            prefixes = {t: bytes((len(t),)) + t for t in set(batch.topic_bs)}
            parts = [b""] * (4 * n)
            parts[0::4] = headers
            parts[1::4] = batch.bodies
            parts[2::4] = map(prefixes.__getitem__, batch.topic_bs)
            parts[3::4] = map(bytes.__add__, tails, batch.props_bs)
            mf.append(b"".join(parts))
            mf.store_timestamp = store_ts
            self.last_store_timestamp = store_ts
            appended = AppendedBatch(first, sizes, qoffs, (batch.topics, batch.queue_ids, batch.sys_flags, batch.tags,
                                                            batch.keys, batch.uniq_keys, batch.props_texts), store_ts)
            if on_appended is not None:
                on_appended(appended)
        return appended

    def append_one(self, row: tuple, *, clock=time.time, on_appended=None) -> AppendedBatch:
        """The single-message path: one row from ``prepare_one``, packed with one struct call."""
        (topic, topic_b, qid, flag, sys_flag, born_ts, bip, bport, recon, prep_off, body, crc, props_b,
         tags, keys, uniq, props_text) = row
        store_v6 = self._store_v6
        born_v6 = bool(sys_flag & BORNHOST_V6)
        if store_v6:
            sys_flag |= STOREHOST_V6
        blen, tlen, plen = len(body), len(topic_b), len(props_b)
        st = record_struct(born_v6, store_v6, blen, tlen, plen)
        size = st.size
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise PutError(PutStatus.MESSAGE_ILLEGAL,
                           f"a record of {size} bytes does not fit in a {self.file_size}-byte commitlog segment")
        sip, sport = self.store_host
        with self.put_lock:
            mf = self.files.files[-1] if self.files.files else None
            if mf is None or mf.wrote + size + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
                mf = self._segment_for(size)
            store_ts = int(clock() * 1000)
            first = mf.file_from_offset + mf.wrote
            if sys_flag & NOT_CONSUMABLE:
                qoff = 0
            else:
                key = (topic, qid)
                qoff = self.queue_offsets.get(key, 0)
                self.queue_offsets[key] = qoff + 1
            mf.append(st.pack(size, MAGIC_V1, crc, qid, flag, qoff, first, sys_flag, born_ts or store_ts, bip, bport,
                              store_ts, sip, sport, recon, prep_off, blen, body, tlen, topic_b, plen, props_b))
            mf.store_timestamp = store_ts
            self.last_store_timestamp = store_ts
            appended = AppendedBatch(first, [size], [qoff], None, store_ts, row)
            if on_appended is not None:
                on_appended(appended)
        return appended

    def _queue_offsets(self, batch: PreparedBatch) -> list[int]:
        """Assign queue offsets (under the put lock) and advance the table."""
        table = self.queue_offsets
        topics, qids, flags = batch.topics, batch.queue_ids, batch.sys_flags
        n = len(topics)
        if topics.count(topics[0]) == n and qids.count(qids[0]) == n and not any(f & NOT_CONSUMABLE for f in flags):
            key = (topics[0], qids[0])
            base = table.get(key, 0)
            table[key] = base + n
            return list(range(base, base + n))
        qoffs = []
        for key, f in zip(zip(topics, qids), flags):
            if f & NOT_CONSUMABLE:
                qoffs.append(0)
            else:
                q = table.get(key, 0)
                table[key] = q + 1
                qoffs.append(q)
        return qoffs

    def _pack_headers(self, batch, sizes, qoffs, phys, blens, store_ts, born_v6) -> list[bytes]:
        n = len(sizes)
        sip, sport = self.store_host
        store_flag = STOREHOST_V6 if self._store_v6 else 0
        flags = [f | store_flag for f in batch.sys_flags] if store_flag else batch.sys_flags
        born_ts = batch.born_ts
        if 0 in born_ts:
            born_ts = [t or store_ts for t in born_ts]
        columns = (sizes, repeat(MAGIC_V1, n), batch.crcs, batch.queue_ids, batch.flags, qoffs, phys, flags, born_ts,
                   batch.born_ips, batch.born_ports, repeat(store_ts, n), repeat(sip, n), repeat(sport, n),
                   batch.reconsume, batch.prepared_offsets, blens)
        if born_v6 is None:
            return list(map(header_struct(False, self._store_v6).pack, *columns))
        structs = [header_struct(v6, self._store_v6) for v6 in born_v6]
        return [st.pack(*row) for st, row in zip(structs, zip(*columns))]

    def _segment_for(self, total: int) -> MappedFile:
        """The segment the next *total* bytes go to, closing the current one with a blank if needed."""
        try:
            mf = self.files.last_for_append()
            if total + END_FILE_MIN_BLANK_LENGTH > mf.remaining:
                remaining = mf.remaining
                mf.append(encode_blank(remaining))
                mf.wrote = mf.file_size   # the rest of the segment is unused by definition
                if mf.write_buffer is None:
                    mf.committed = mf.file_size
                mf = self.files.last_for_append()
        except OSError as exc:
            raise PutError(PutStatus.CREATE_MAPPED_FILE_FAILED, f"cannot create the next commitlog segment: {exc}") from exc
        return mf

    # -- reading -----------------------------------------------------------------------------

    def read(self, offset: int, size: int) -> bytes | None:
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = offset - mf.file_from_offset
        if pos + size > mf.wrote:
            return None
        try:
            return mf.read(pos, size)
        except ValueError:      # the segment was deleted by expiry while we were reading
            return None

    def gather(self, phys: list[int], sizes: list[int]) -> bytes | None:
        """The records at *phys* (of *sizes*) concatenated, when all lie written in one segment; else None."""
        mf = self.files.find(phys[0])
        if mf is None:
            return None
        base = mf.file_from_offset
        starts = [p - base for p in phys]
        ends = [a + n for a, n in zip(starts, sizes)]
        if min(starts) < 0 or max(ends) > mf.wrote:
            return None
        try:
            return mf.gather(starts, ends)
        except ValueError:      # the segment was deleted by expiry while we were reading
            return None

    def store_time_of(self, offset: int, size: int) -> int | None:
        head = self.read(offset, 72)
        if head is None:
            return None
        sys_flag = int.from_bytes(head[36:40], "big")
        pos = 68 if sys_flag & BORNHOST_V6 else 56
        return int.from_bytes(head[pos:pos + 8], "big", signed=True)

    def min_offset(self) -> int:
        return self.files.min_offset()

    def max_offset(self) -> int:
        return self.files.max_offset()

    def flushed_offset(self) -> int:
        return self.files.flushed_offset()

    # -- durability --------------------------------------------------------------------------

    def flush(self) -> int:
        return self.files.flush()

    def commit(self) -> bool:
        return self.files.commit()

    def dirty_bytes(self) -> int:
        return sum(mf.committed - mf.flushed for mf in self.files._unfinished("flushed"))

    def uncommitted_bytes(self) -> int:
        return sum(mf.wrote - mf.committed for mf in self.files._unfinished("committed"))

    def close(self) -> None:
        self.files.close(flush=True)
