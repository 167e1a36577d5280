"""The CommitLog: every message of every topic, appended to one run of segment files.

Theory of operation
-------------------
``prepare`` (no lock) validates a :class:`~rocketq.common.message.Message` and computes what does
not depend on its position: topic and property bytes, body CRC, sysflag.  ``append`` then takes
the put lock once for a whole batch: it assigns each record its queue offset (from the
``(topic, queue id) -> next offset`` table) and physical offset, packs all records with one
``struct`` call each, and copies the batch into the mapped segment with one memory copy.

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

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rocketq.common.message import Message
from rocketq.common.msgid import HostAddress
from rocketq.common.properties import IllegalPropertyError
from rocketq.common.sysflag import (BORNHOST_V6, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC, PROPERTY_UNIQ_KEY,
                                    SCHEDULE_TOPIC, STOREHOST_V6, TRANSACTION_COMMIT_TYPE, TRANSACTION_MASK,
                                    TRANSACTION_NOT_TYPE)
from rocketq.common.validation import topic_error
from rocketq.store.allocator import AllocateService
from rocketq.store.mapped_file import MappedFile
from rocketq.store.mapped_file_queue import MappedFileQueue
from rocketq.store.record import (END_FILE_MIN_BLANK_LENGTH, MAGIC_V1, MAX_PROPERTIES_BYTES, body_crc, encode_blank,
                                  header_struct, record_struct)
from rocketq.store.results import PutError, PutStatus

MAX_QUEUE_ID = (1 << 31) - 1


@dataclass(slots=True)
class AppendedBatch:
    """What the dispatcher needs about records just appended (in log order)."""

    first_offset: int           # physical offset of the first record
    sizes: list[int]
    queue_offsets: list[int]
    prepared: list[tuple]       # the prepare() tuples, for topic/queue/tags/keys/uniq key/sysflag
    store_timestamp: int

    @property
    def end_offset(self) -> int:
        return self.first_offset + sum(self.sizes)


# Indices into a prepared tuple.
P_TOPIC, P_QID, P_SYSFLAG, P_TAGS, P_KEYS, P_UNIQ, P_PROPS_TEXT = 0, 1, 4, 13, 14, 15, 16


def prepare(m: Message, *, max_message_size: int, delay_levels: int) -> tuple:
    """Validate *m* and precompute its position-independent parts; raises PutError."""
    topic = m.topic
    if topic_error(topic):
        raise PutError(PutStatus.MESSAGE_ILLEGAL, topic_error(topic))
    qid = m.queue_id
    if not 0 <= qid <= MAX_QUEUE_ID:
        raise PutError(PutStatus.MESSAGE_ILLEGAL, f"queue id {qid} of topic {topic!r} is out of range")
    sys_flag = m.sys_flag
    if m.delay_level > 0 and sys_flag & TRANSACTION_MASK in (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE):
        m = _to_schedule_topic(m, delay_levels)
        topic, qid = m.topic, m.queue_id
    body = m.body
    try:
        props_text = m.properties_string()
    except IllegalPropertyError as exc:
        raise PutError(PutStatus.MESSAGE_ILLEGAL, f"topic {topic!r}: {exc}") from None
    props_b = props_text.encode()
    if len(props_b) > MAX_PROPERTIES_BYTES:
        raise PutError(PutStatus.PROPERTIES_SIZE_EXCEEDED,
                       f"topic {topic!r}: properties are {len(props_b)} bytes, at most {MAX_PROPERTIES_BYTES}")
    if len(body) > max_message_size:
        raise PutError(PutStatus.MESSAGE_ILLEGAL,
                       f"topic {topic!r}: body of {len(body)} bytes exceeds maxMessageSize {max_message_size}")
    born = m.born_host
    if born.is_v6:
        sys_flag |= BORNHOST_V6
    keys = m.keys
    keys_text = keys if keys is None or isinstance(keys, str) else " ".join(keys)
    if keys is None and m.properties:
        keys_text = m.properties.get("KEYS")
    uniq = m.properties.get(PROPERTY_UNIQ_KEY) if m.properties else None
    return (topic, qid, topic.encode(), m.flag, sys_flag, m.born_timestamp, born.ip, born.port,
            m.reconsume_times, m.prepared_transaction_offset, body, body_crc(body), props_b,
            m.tags if m.tags else (m.properties.get("TAGS") if m.properties else None), keys_text, uniq, props_text)


def _to_schedule_topic(m: Message, delay_levels: int) -> Message:
    level = min(m.delay_level, delay_levels)
    props = dict(m.properties)
    props[PROPERTY_REAL_TOPIC] = m.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(m.queue_id)
    from dataclasses import replace
    return replace(m, topic=SCHEDULE_TOPIC, queue_id=level - 1, delay_level=level, properties=props)


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

    def append(self, prepared: list[tuple], *, clock=time.time) -> AppendedBatch:
        """Append prepared records as one batch; raises PutError (nothing written) on failure."""
        store_v6 = self._store_v6
        sip, sport = self.store_host
        store_flag = STOREHOST_V6 if store_v6 else 0
        sizes = []
        total = 0
        for p in prepared:
            n = header_struct(bool(p[4] & BORNHOST_V6), store_v6).size + len(p[10]) + 3 + len(p[2]) + len(p[12])
            sizes.append(n)
            total += n
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise PutError(PutStatus.MESSAGE_ILLEGAL,
                           f"a batch of {total} bytes does not fit in a {self.file_size}-byte commitlog segment")
        table = self.queue_offsets
        with self.put_lock:
            mf = self._segment_for(total)
            store_ts = int(clock() * 1000)
            phys = mf.file_from_offset + mf.wrote
            first = phys
            parts = []
            qoffs = []
            for p, size in zip(prepared, sizes):
                (topic, qid, topic_b, flag, sys_flag, born_ts, bip, bport, recon, prep_off, body, crc, props_b,
                 *_rest) = p
                key = (topic, qid)
                if sys_flag & 0x4:       # PREPARED (0x4) or ROLLBACK (0xC): not consumable, offset 0
                    qoff = 0
                else:
                    qoff = table.get(key, 0)
                    table[key] = qoff + 1
                sys_flag |= store_flag
                parts.append(record_struct(bool(sys_flag & BORNHOST_V6), store_v6, len(body), len(topic_b),
                                           len(props_b)).pack(
                    size, MAGIC_V1, crc, qid, flag, qoff, phys, sys_flag, born_ts or store_ts, bip, bport,
                    store_ts, sip, sport, recon, prep_off, len(body), body, len(topic_b), topic_b,
                    len(props_b), props_b))
                qoffs.append(qoff)
                phys += size
            mf.append(b"".join(parts))
            mf.store_timestamp = store_ts
            self.last_store_timestamp = store_ts
        return AppendedBatch(first, sizes, qoffs, prepared, store_ts)

    def _segment_for(self, total: int) -> MappedFile:
        """The segment the next *total* bytes go to, closing the current one with a blank if needed."""
        try:
            mf = self.files.last_for_append()
            if total + END_FILE_MIN_BLANK_LENGTH > mf.remaining:
                remaining = mf.remaining
                mf.append(encode_blank(remaining) + bytes(0))
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
        return mf.read(pos, size)

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
        return self.files.committed_offset() - self.files.flushed_offset()

    def uncommitted_bytes(self) -> int:
        return self.files.max_offset() - self.files.committed_offset()

    def close(self) -> None:
        self.files.close(flush=True)
