"""Pure-Python reference implementations of the native kernels, written to read like the formats.

Each function here does one message or one entry at a time, the plainest way, from the byte-layout
tables (``rocketq/store/record.py``, ``index_file.py``, ``consume_queue.py``, ``broker/send.py``).
The native kernels must produce the same bytes and values; ``tests/native/`` checks that on
generated inputs.  Nothing in the product imports this module.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from rocketq.common.javahash import index_hash, java_hash
from rocketq.common.properties import decode_properties
from rocketq.store.record import BLANK_MAGIC, MAGIC_V1, MAGIC_V2, RecordError, StoredMessage, check_record

NOT_CONSUMABLE = 0x4
ROLLBACK = 0xC
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"


@dataclass
class Rec:
    """One record's fields before it has a place in the log."""

    topic: str
    queue_id: int
    flag: int
    sys_flag: int
    born_ts: int
    born_ip: bytes
    born_port: int
    reconsume: int
    prepared: int
    body: bytes
    props: bytes


def encode_record(r: Rec, *, queue_offset: int, phys: int, store_ts: int, store_ip: bytes, store_port: int) -> bytes:
    """One record, field after field (RocketMQ ``MessageExtEncoder``)."""
    sys_flag = r.sys_flag & ~(BORNHOST_V6 | STOREHOST_V6)
    sys_flag |= BORNHOST_V6 if len(r.born_ip) == 16 else 0
    sys_flag |= STOREHOST_V6 if len(store_ip) == 16 else 0
    topic = r.topic.encode()
    rest = b"".join([
        struct.pack(">I", MAGIC_V1),
        struct.pack(">I", zlib.crc32(r.body) & 0x7FFFFFFF),
        struct.pack(">i", r.queue_id),
        struct.pack(">i", r.flag),
        struct.pack(">q", queue_offset),
        struct.pack(">q", phys),
        struct.pack(">i", sys_flag),
        struct.pack(">q", r.born_ts or store_ts),
        r.born_ip, struct.pack(">i", r.born_port),
        struct.pack(">q", store_ts),
        store_ip, struct.pack(">i", store_port),
        struct.pack(">i", r.reconsume),
        struct.pack(">q", r.prepared),
        struct.pack(">i", len(r.body)), r.body,
        bytes([len(topic)]), topic,
        struct.pack(">H", len(r.props)), r.props,
    ])
    return struct.pack(">i", 4 + len(rest)) + rest


def encode_log(recs: list[Rec], *, phys: int, store_ts: int, store_ip: bytes, store_port: int,
               next_offsets: dict) -> tuple[bytes, list[int]]:
    """The records of one append in order, queue offsets taken from (and advancing) *next_offsets*."""
    out, qoffs = [], []
    for r in recs:
        if r.sys_flag & NOT_CONSUMABLE:
            qoff = 0
        else:
            qoff = next_offsets.get((r.topic, r.queue_id), 0)
            next_offsets[(r.topic, r.queue_id)] = qoff + 1
        raw = encode_record(r, queue_offset=qoff, phys=phys, store_ts=store_ts, store_ip=store_ip,
                            store_port=store_port)
        out.append(raw)
        qoffs.append(qoff)
        phys += len(raw)
    return b"".join(out), qoffs


def tags_keys_props(tags: str | None, keys) -> bytes:
    """The properties a plain message gets: TAGS, then KEYS (words joined by one space)."""
    text = ""
    if tags:
        text += f"TAGS\x01{tags}\x02"
    joined = keys if isinstance(keys, str) else " ".join(keys or ())
    if joined:
        text += f"KEYS\x01{joined}\x02"
    return text.encode()


def wire_batch(messages: list[tuple[int, bytes, bytes]]) -> bytes:
    """A SEND_BATCH_MESSAGE body: per message ``total | magic 0 | crc 0 | flag | bodyLen body | propsLen props``."""
    out = []
    for flag, body, props in messages:
        total = 20 + len(body) + 2 + len(props)
        out.append(struct.pack(">iiiii", total, 0, 0, flag, len(body)) + body + struct.pack(">H", len(props)) + props)
    return b"".join(out)


# -- dispatch -----------------------------------------------------------------------------------

def _java_long(n: int) -> int:
    """*n* as Java's long arithmetic leaves it (wrapped to 64 bits)."""
    return (n + (1 << 63)) % (1 << 64) - (1 << 63)


def dispatch(buf: bytes, base: int, start: int, end: int, delay_ms: list[int]):
    """Consume-queue units per (topic, queue) and index entries of the records in ``buf[start:end]``:
    ``({(topic, qid): [(queue_offset, unit bytes)]}, [(hash, phys, store_ts)], end, blank)``."""
    units: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    index: list[tuple[int, int, int]] = []
    pos = start
    while pos < end:
        size, magic = struct.unpack_from(">iI", buf, pos)
        if magic == BLANK_MAGIC:
            return units, index, pos, True
        m = StoredMessage(buf, pos)
        props = decode_properties(m.properties_string)
        if not m.sys_flag & NOT_CONSUMABLE:
            if m.topic == SCHEDULE_TOPIC:
                level = int(props["DELAY"]) if props.get("DELAY", "").isdigit() else 0
                level = max(1, min(level, len(delay_ms)))
                code = _java_long(m.store_timestamp + delay_ms[level - 1])
            else:
                code = java_hash(props["TAGS"]) if props.get("TAGS") else 0
            units.setdefault((m.topic, m.queue_id), []).append(
                (m.queue_offset, struct.pack(">qiq", m.physical_offset, size, code)))
        if m.sys_flag & ROLLBACK != ROLLBACK:
            for word in [w for w in props.get("KEYS", "").split(" ") if w]:
                index.append((index_hash(f"{m.topic}#{word}"), m.physical_offset, m.store_timestamp))
            if props.get("UNIQ_KEY"):
                index.append((index_hash(f"{m.topic}#{props['UNIQ_KEY']}"), m.physical_offset, m.store_timestamp))
        pos += size
    return units, index, pos, False


# -- index --------------------------------------------------------------------------------------

HEADER = struct.Struct(">qqqqii")


def index_put(mm: bytearray, slot_count: int, max_entries: int, entries) -> int:
    """RocketMQ ``IndexFile.putKey``, once per entry; returns how many fit."""
    done = 0
    for key_hash, phy, ts in entries:
        begin_ts, end_ts, begin_phy, end_phy, used, count = HEADER.unpack_from(mm, 0)
        count = max(count, 1)
        if count >= max_entries:
            break
        if count == 1:
            begin_ts, begin_phy = ts, phy
        slot_pos = 40 + (key_hash % slot_count) * 4
        old = struct.unpack_from(">i", mm, slot_pos)[0]
        if old <= 0 or old > count:
            old = 0
        tdiff = 0 if begin_ts <= 0 else min(max((ts - begin_ts) // 1000, 0), (1 << 31) - 1)
        struct.pack_into(">iqii", mm, 40 + slot_count * 4 + count * 20, key_hash, phy, tdiff, old)
        struct.pack_into(">i", mm, slot_pos, count)
        HEADER.pack_into(mm, 0, begin_ts, ts, begin_phy, phy, used + (old == 0), count + 1)
        done += 1
    return done


# -- scanning -----------------------------------------------------------------------------------

def _tail_torn(buf: bytes, pos: int, size: int) -> bool:
    """The last byte of the properties (or of the topic when there are none) is zero, or no topic."""
    sys_flag = struct.unpack_from(">i", buf, pos + 36)[0]
    header = 88 + (12 if sys_flag & BORNHOST_V6 else 0) + (12 if sys_flag & STOREHOST_V6 else 0)
    body_len = struct.unpack_from(">i", buf, pos + header - 4)[0]
    at = pos + header + body_len
    v2 = struct.unpack_from(">I", buf, pos + 4)[0] == MAGIC_V2
    topic_len = struct.unpack_from(">H", buf, at)[0] if v2 else buf[at]
    topic_end = at + (2 if v2 else 1) + topic_len
    props_len = struct.unpack_from(">H", buf, topic_end)[0]
    last = buf[pos + size - 1] if props_len else (buf[topic_end - 1] if topic_len else 0)
    return last == 0 or topic_len == 0


def scan(buf: bytes, base: int, start: int, limit: int, *, check_crc: bool, torn_from: int | None):
    """``(positions, sizes, end, blank, error offset or None)`` of a walk with the scanner's rules."""
    positions, sizes = [], []
    pos = start
    while limit - pos >= 8:
        size, magic = struct.unpack_from(">iI", buf, pos)
        if size == 0 and magic == 0:
            break
        if magic == BLANK_MAGIC and size == limit - pos:
            return positions, sizes, pos, True, None
        try:
            got = check_record(buf, pos, limit, offset=base + pos, check_crc=check_crc)
        except RecordError:
            return positions, sizes, pos, False, base + pos
        if not isinstance(got, int):                      # a blank that does not reach the limit
            return positions, sizes, pos, False, base + pos
        if torn_from is not None and base + pos >= torn_from and _tail_torn(buf, pos, got):
            return positions, sizes, pos, False, base + pos
        positions.append(pos)
        sizes.append(got)
        pos += got
    return positions, sizes, pos, False, None




# -- reading a queue ------------------------------------------------------------------------------

BLANK_SIZE = 0x7FFFFFFF
UNIT = struct.Struct(">qiq")


def read_units(units: bytes, segment: bytes, seg_base: int, readable: int, *, log_min: int, max_bytes: int,
               tag_codes=None, answered: int = 0):
    """``(records, count, units consumed, last offset or -1, expired seen, stop)`` of a pull's walk over
    consume-queue units (RocketMQ ``DefaultMessageStore.getMessage``); *answered* bytes are in the
    answer already (earlier segments), so only an empty answer takes a record past *max_bytes*."""
    data = segment[:readable]
    taken, consumed, last, expired = [], 0, -1, False
    for phys, size, code in UNIT.iter_unpack(units[:len(units) // 20 * 20]):
        if size == BLANK_SIZE or size <= 0:
            consumed += 1
        elif phys < log_min:
            expired, consumed = True, consumed + 1
        elif tag_codes is not None and code not in tag_codes:
            consumed += 1
        elif not 0 <= phys - seg_base <= len(data) - size:
            return _read(taken, consumed, last, expired, "segment")
        elif (held := answered + sum(map(len, taken))) and held + size > max_bytes:
            return _read(taken, consumed, last, expired, "budget")
        else:
            taken.append(data[phys - seg_base:phys - seg_base + size])
            last, consumed = phys, consumed + 1
    return _read(taken, consumed, last, expired, "end")


def _read(taken, consumed, last, expired, stop):
    return b"".join(taken), len(taken), consumed, last, expired, stop


# -- the SQL92 prefilter's property columns -------------------------------------------------------

ABSENT, UNKNOWN = -1, -2


def parse_record(buf: bytes, pos: int, end: int):
    """``(store timestamp, properties bytes)`` of the record at ``buf[pos:end]``, or None when the bytes
    there are no whole record whose lengths add up to its TOTALSIZE."""
    if end - pos < 8:
        return None
    size, magic = struct.unpack_from(">iI", buf, pos)
    if magic not in (MAGIC_V1, MAGIC_V2) or not 0 < size <= end - pos:
        return None
    sys_flag = struct.unpack_from(">i", buf, pos + 36)[0] if size >= 40 else 0
    header = 88 + (12 if sys_flag & BORNHOST_V6 else 0) + (12 if sys_flag & STOREHOST_V6 else 0)
    if size < header + 3:
        return None
    body_len = struct.unpack_from(">i", buf, pos + header - 4)[0]
    if body_len < 0 or header + body_len + 3 > size:
        return None
    at = pos + header + body_len
    topic_len, at = (buf[at], at + 1) if magic == MAGIC_V1 else (struct.unpack_from(">H", buf, at)[0], at + 2)
    if at + topic_len + 2 > pos + size:
        return None
    props_len = struct.unpack_from(">H", buf, at + topic_len)[0]
    if at + topic_len + 2 + props_len != pos + size:
        return None
    store_ts = struct.unpack_from(">q", buf, pos + (68 if sys_flag & BORNHOST_V6 else 56))[0]
    return store_ts, buf[pos + size - props_len:pos + size]


def property_items(props: bytes) -> dict[bytes, bytes]:
    """``name -> value`` of a properties string, the last of a name winning; items without a name or
    without a separator are no property."""
    out = {}
    for item in props.split(b"\x02"):
        name, sep, value = item.partition(b"\x01")
        if sep and name:
            out[name] = value
    return out


def property_codes(units: bytes, segment: bytes, seg_base: int, readable: int, names: list[str]):
    """``([store timestamp per unit], [(distinct values, [code per unit]) per name])``: each value's
    index among the name's distinct UTF-8 values, ABSENT or UNKNOWN (not UTF-8, or no record there)."""
    data = segment[:readable]
    times, cols = [], [([], {}, []) for _ in names]
    first = {name.encode(): names.index(name) for name in names}
    for phys, size, _code in UNIT.iter_unpack(units[:len(units) // 20 * 20]):
        rel = phys - seg_base
        ok = size != BLANK_SIZE and size > 0 and 0 <= rel <= len(data) - size
        parsed = parse_record(data, rel, rel + size) if ok else None
        if parsed is None:
            times.append(0)
            for _, _, codes in cols:
                codes.append(UNKNOWN)
            continue
        times.append(parsed[0])
        found = {first[n]: v for n, v in property_items(parsed[1]).items() if n in first}
        for i, (values, index, codes) in enumerate(cols):
            codes.append(_code_of(found.get(i), values, index))
    return times, [(values, codes) for values, _, codes in cols]


def _code_of(value: bytes | None, values: list[str], index: dict[bytes, int]) -> int:
    if value is None:
        return ABSENT
    if value not in index:
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return UNKNOWN
        index[value] = len(values)
        values.append(text)
    return index[value]



def find_record_start(buf: bytes, base: int, lo: int, hi: int) -> int | None:
    """The first position in ``[lo, hi)`` with the V1 magic 4 bytes in and a PHYSICALOFFSET (at 28)
    equal to its own log offset: where a reader resynchronises after damage."""
    for p in range(lo, min(hi, len(buf) - 35)):
        if struct.unpack_from(">I", buf, p + 4)[0] == MAGIC_V1 and struct.unpack_from(">q", buf, p + 28)[0] == base + p:
            return p
    return None



# -- the Spark sink's batch entries ---------------------------------------------------------------

def sink_rows(bodies, tags, keys, props, *, uniq_prefix: bytes, first_counter: int, max_body_bytes: int) -> list[bytes]:
    """One SEND_BATCH_MESSAGE entry per row (``wire_batch``'s layout, flag 0): properties UNIQ_KEY
    (prefix and 48-bit counter, upper-case hex), TAGS, KEYS, then the map's items without null values.
    A row that cannot be a message raises ValueError naming it, as the encoder does."""
    out = []
    for i, body in enumerate(bodies):
        if not body:
            raise ValueError(f"row {i}: the body is null or empty")
        if len(body) > max_body_bytes:
            raise ValueError(f"row {i}: body of {len(body)} bytes exceeds {max_body_bytes}")
        counter = ((first_counter + i) & 0xFFFF_FFFF_FFFF).to_bytes(6, "big")
        text = b"UNIQ_KEY\x01" + (uniq_prefix + counter).hex().upper().encode() + b"\x02"
        pairs = [(b"TAGS", tags[i] if tags else None), (b"KEYS", keys[i] if keys else None)]
        for name, value in pairs:
            if value is not None and (b"\x01" in value or b"\x02" in value):
                raise ValueError(f"row {i}: {name.decode().lower()} contains a \\x01 or \\x02 separator")
        for name, value in (props[i] if props and props[i] else []):
            if value is None:
                continue
            if any(sep in part for part in (name, value) for sep in (b"\x01", b"\x02")):
                raise ValueError(f"row {i}: property {name.decode()!r} contains a \\x01 or \\x02 separator")
            pairs.append((name, value))
        text += b"".join(n + b"\x01" + v + b"\x02" for n, v in pairs if v is not None)
        if len(text) > 32767:
            raise ValueError(f"row {i}: properties of {len(text)} bytes exceed 32767")
        out.append(wire_batch([(0, body, text)]))
    return out


__all__ = ["Rec", "encode_record", "encode_log", "tags_keys_props", "wire_batch", "dispatch", "index_put", "scan",
           "MAGIC_V2", "read_units", "property_codes", "parse_record", "property_items",
           "find_record_start", "sink_rows"]
