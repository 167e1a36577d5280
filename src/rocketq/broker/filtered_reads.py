"""Reading a queue through a subscription: tag filters in the store, SQL92 filters on properties.

A tag subscription is the store's own read (:meth:`MessageStore.get_messages` with the tags hash
codes, skipped at the consume-queue level without touching the CommitLog): ``max_nums`` units,
and if none of them matched, the rest of the scan window below in one more read.  An SQL92 selector
needs each message's properties, so the read takes up to ``scan_units`` consume-queue units in
one store read (RocketMQ's ``maxFilterMessageSize``: 16,000 bytes of consume queue, 800 units,
or ``maxMsgNums`` units if more), evaluates the selector on each record and keeps the first
``max_nums`` that match, back to back in store format as a pull body carries them.

``next_begin_offset`` is past everything looked at, taken or filtered out; when more matched than
wanted, it is the first record not taken, so nothing that matched is skipped.  Nothing matched in
the units looked at is NO_MATCHED_MESSAGE with the offset past them: the consumer asks again from
there at once (PULL_RETRY_IMMEDIATELY), as RocketMQ answers.
"""

from __future__ import annotations

import struct

from rocketq.common.sysflag import BORNHOST_V6, STOREHOST_V6
from rocketq.filter import Subscription
from rocketq.store.reads import RecordRun
from rocketq.store.record import MAGIC_V2, PHYSICAL_OFFSET_POS, QUEUE_OFFSET_POS
from rocketq.store.results import GetMessageResult, GetStatus
from rocketq.store.scan import split_records

CQ_UNIT_BYTES = 20
DEFAULT_MAX_FILTER_MESSAGE_BYTES = 16_000      # RocketMQ's maxFilterMessageSize: consume-queue bytes a filtered read scans


def scan_units_for(max_nums: int, max_filter_message_bytes: int = DEFAULT_MAX_FILTER_MESSAGE_BYTES) -> int:
    """Consume-queue units one filtered read looks at (RocketMQ: max(maxFilterMessageSize, maxMsgNums x 20) bytes)."""
    return max(max_filter_message_bytes // CQ_UNIT_BYTES, max_nums)


def read(store, topic: str, queue_id: int, offset: int, max_nums: int, sub: Subscription | None, *,
         scan_units: int, group: str | None = None) -> GetMessageResult:
    """Up to *max_nums* messages of the queue from *offset* that *sub* lets through.  With the bit-map
    prefilter on and *sub* the SQL92 filter *group* registered, the units whose bit map says "no" are
    skipped unread (RocketMQ's ``isMatchedByConsumeQueue``); the rest are evaluated as always."""
    if sub is None or sub.is_all:
        return store.get_messages(topic, queue_id, offset, max_nums)
    if sub.sql is None:
        return _read_tags(store, topic, queue_id, offset, max_nums, sub.codes, scan_units)
    bitmaps = getattr(store, "filter_bitmaps", None)
    prefilter = bitmaps.prefilter(group, topic, sub.expression) if bitmaps is not None else None
    res = store.get_messages(topic, queue_id, offset, max(scan_units, max_nums), prefilter=prefilter)
    if res.status != GetStatus.FOUND:
        return res
    return select(res, sub, max_nums)


def _read_tags(store, topic, queue_id, offset, max_nums, codes, scan_units) -> GetMessageResult:
    """Tag codes filtered by the store: the first *max_nums* units, and when none of them matched,
    the rest of the scan window in one more read (cut at *max_nums*), so a sparse tag is not
    read *max_nums* units a pull."""
    res = store.get_messages(topic, queue_id, offset, max_nums, tag_codes=codes)
    if res.status != GetStatus.NO_MATCHED_MESSAGE or scan_units <= max_nums:
        return res
    more = store.get_messages(topic, queue_id, res.next_begin_offset, scan_units - max_nums, tag_codes=codes)
    if more.status == GetStatus.NO_MATCHED_MESSAGE:
        res.next_begin_offset = more.next_begin_offset
        return res
    if more.status != GetStatus.FOUND:
        return res                                     # the end of the queue: answer what the first read saw
    if len(more.messages) <= max_nums:
        return more
    blob = more.raw
    positions, sizes, _end = split_records(blob)
    cut = int(positions[max_nums])
    return GetMessageResult(GetStatus.FOUND, RecordRun(blob[:cut], max_nums), _I64(blob, cut + QUEUE_OFFSET_POS)[0],
                            more.min_offset, more.max_offset,
                            _I64(blob, int(positions[max_nums - 1]) + PHYSICAL_OFFSET_POS)[0])


def select(res: GetMessageResult, sub: Subscription, max_nums: int) -> GetMessageResult:
    """The part of a FOUND read that *sub*'s selector matches (see the module notes).  The records
    are walked in the read's blob; each one's properties are looked up in place by name
    (:class:`RecordProperties`), not decoded into a dict."""
    blob = res.raw
    positions, sizes, _end = split_records(blob)
    taken, next_offset, last_phy = [], res.next_begin_offset, -1
    matches = sub.sql.matches
    for pos, size in zip(positions.tolist(), sizes.tolist()):
        if len(taken) == max_nums:
            next_offset = _I64(blob, pos + QUEUE_OFFSET_POS)[0]     # the rest waits for the next pull
            break
        if matches(RecordProperties(blob, pos)):
            taken.append(blob[pos:pos + size])
            last_phy = _I64(blob, pos + PHYSICAL_OFFSET_POS)[0]
    if not taken:
        return GetMessageResult(GetStatus.NO_MATCHED_MESSAGE, [], next_offset, res.min_offset, res.max_offset, -1)
    return GetMessageResult(GetStatus.FOUND, RecordRun(b"".join(taken), len(taken)), next_offset,
                            res.min_offset, res.max_offset, last_phy)


_I64 = struct.Struct(">q").unpack_from
_SIZE_MAGIC = struct.Struct(">iI").unpack_from
_I32 = struct.Struct(">i").unpack_from
_U16 = struct.Struct(">H").unpack_from
_SYSFLAG_POS, _BODY_LENGTH_POS_V4, _V6_EXTRA = 36, 84, 12
_KEYS: dict[str, bytes] = {}
MAX_CACHED_KEYS = 4_096


class RecordProperties:
    """The properties of the record at *pos* of *blob*, read by name without a dict: ``get(name)``
    finds the last ``\x02name\x01`` (or a leading ``name\x01``) in the properties bytes - a name
    given twice has its last value, as the decoder's dict has - and decodes only that value.
    Values cannot hold the separators, so a match is always a whole name."""

    __slots__ = ("_props",)

    def __init__(self, blob: bytes, pos: int):
        _size, magic = _SIZE_MAGIC(blob, pos)
        flags = _I32(blob, pos + _SYSFLAG_POS)[0]
        at = pos + _BODY_LENGTH_POS_V4 + (_V6_EXTRA if flags & BORNHOST_V6 else 0) + (
            _V6_EXTRA if flags & STOREHOST_V6 else 0)
        at += 4 + _I32(blob, at)[0]                                   # past the body
        at += 2 + _U16(blob, at)[0] if magic == MAGIC_V2 else 1 + blob[at]    # past the topic
        self._props = blob[at + 2:at + 2 + _U16(blob, at)[0]]

    def get(self, name: str, default=None):
        key = _KEYS.get(name)
        if key is None:
            key = b"\x02" + name.encode() + b"\x01"
            if len(_KEYS) < MAX_CACHED_KEYS:
                _KEYS[name] = key
        props = self._props
        i = props.rfind(key)
        if i >= 0:
            start = i + len(key)
        elif props.startswith(key[1:]):
            start = len(key) - 1
        else:
            return default
        end = props.find(b"\x02", start)
        return props[start:end if end >= 0 else len(props)].decode()
