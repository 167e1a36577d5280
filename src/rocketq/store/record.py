"""CommitLog record codec: the exact byte layout RocketMQ writes (``MessageExtEncoder``).

Every number is big-endian.  Offsets are for IPv4 hosts; a host flagged IPv6 in SYSFLAG
(BORNHOST_V6 0x10, STOREHOST_V6 0x20) takes 16 + 4 bytes instead of 4 + 4 and shifts what follows::

    off  size  field
      0     4  TOTALSIZE        whole record, this field included
      4     4  MAGICCODE        0xDAA320A7 (V1: 1-byte topic length)
      8     4  BODYCRC          zlib.crc32(body) & 0x7FFFFFFF
     12     4  QUEUEID
     16     4  FLAG             user flag, opaque to the store
     20     8  QUEUEOFFSET      logical offset in the consume queue (0 for prepared/rollback)
     28     8  PHYSICALOFFSET   commitlog offset of this record
     36     4  SYSFLAG
     40     8  BORNTIMESTAMP    ms
     48     8  BORNHOST         ip(4) + port(int32)
     56     8  STORETIMESTAMP   ms
     64     8  STOREHOST        ip(4) + port(int32)
     72     4  RECONSUMETIMES
     76     8  PREPARED TRANSACTION OFFSET
     84   4+n  BODY             int32 length + bytes
      .   1+t  TOPIC            int8 length + UTF-8
      .   2+p  PROPERTIES       int16 length + "k\\x01v\\x02..." UTF-8

At the end of a segment, when ``record size + 8`` does not fit in what is left, the writer puts a
blank record instead: ``int32 remaining bytes | int32 0xCBD43194`` and the rest of the file is
unused; the next record starts the next segment.

This module has no state: it encodes fields to bytes and parses bytes back, and says precisely
what is wrong with a record that does not parse.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache

from rocketq.common.crc import body_crc
from rocketq.common.msgid import HostAddress, offset_msg_id
from rocketq.common.properties import decode_properties
from rocketq.common.sysflag import BORNHOST_V6, PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY, STOREHOST_V6

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
BLANK_MAGIC = 0xCBD43194
END_FILE_MIN_BLANK_LENGTH = 8
MAX_TOPIC_BYTES_V1 = 127
MAX_PROPERTIES_BYTES = 32767
QUEUE_OFFSET_POS = 20
PHYSICAL_OFFSET_POS = 28
STORE_TIMESTAMP_POS_V4 = 56

_SIZE_MAGIC = struct.Struct(">iI")
_BLANK = struct.Struct(">iI")


def _header_format(born_v6: bool, store_v6: bool) -> str:
    born = "16si" if born_v6 else "4si"
    store = "16si" if store_v6 else "4si"
    # total magic crc qid flag qoff phys sysflag born_ts born_host store_ts store_host reconsume prepared bodylen
    return f">iIiiiqqiq{born}q{store}iqi"


@lru_cache(maxsize=None)
def header_struct(born_v6: bool, store_v6: bool) -> struct.Struct:
    """Struct for the fixed part, TOTALSIZE through BODY length."""
    return struct.Struct(_header_format(born_v6, store_v6))


@lru_cache(maxsize=1024)
def record_struct(born_v6: bool, store_v6: bool, body_len: int, topic_len: int, props_len: int) -> struct.Struct:
    """One Struct that packs a whole record of these variable lengths in a single call."""
    return struct.Struct(f"{_header_format(born_v6, store_v6)}{body_len}sB{topic_len}sH{props_len}s")


_HEADER_V4 = header_struct(False, False)
_UNPACK_V4, _HEADER_V4_SIZE = _HEADER_V4.unpack_from, _HEADER_V4.size
_HOSTS_V6 = BORNHOST_V6 | STOREHOST_V6
MIN_RECORD_BYTES = _HEADER_V4_SIZE + 1 + 2     # an IPv4 record with empty body, topic and properties


def record_length(body_len: int, topic_len: int, props_len: int, *, born_v6: bool = False, store_v6: bool = False) -> int:
    """RocketMQ ``calMsgLength``: total bytes of a record with these parts."""
    return header_struct(born_v6, store_v6).size + body_len + 1 + topic_len + 2 + props_len


def encode_blank(remaining: int) -> bytes:
    """The end-of-segment filler header; the caller leaves the rest of the segment as it is."""
    return _BLANK.pack(remaining, BLANK_MAGIC)


class RecordError(ValueError):
    """A record that does not parse; ``offset`` is the commitlog offset where it starts."""

    def __init__(self, offset: int, reason: str):
        super().__init__(f"commitlog offset {offset}: {reason}")
        self.offset = offset
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Blank:
    """An end-of-segment filler: the rest of the segment (``size`` bytes) holds no record."""

    size: int


def peek(buf, pos: int, limit: int, *, offset: int) -> tuple[int, int]:
    """(size, magic) at *pos*, checked against *limit*; *offset* is only used in errors."""
    if limit - pos < 8:
        raise RecordError(offset, f"only {limit - pos} bytes left, a record header needs 8")
    size, magic = _SIZE_MAGIC.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        if size < 8 or size > limit - pos:
            raise RecordError(offset, f"blank record of size {size} does not fit in the {limit - pos} bytes left")
        return size, magic
    if magic not in (MAGIC_V1, MAGIC_V2):
        raise RecordError(offset, f"bad magic code 0x{magic:08X} (size field {size})")
    if size < header_struct(False, False).size + 3 or size > limit - pos:
        raise RecordError(offset, f"record size {size} is impossible here ({limit - pos} bytes left)")
    return size, magic


class StoredMessage:
    """A record read back from the CommitLog, with every field of the layout.

    The record is read in place: *buf* may hold many records back to back (a pull's run) and
    *pos* is where this one starts, so making one costs no copy.  The fixed header is unpacked
    once; topic and properties are decoded when first used, since most readers (consumers
    shipping bytes, the dispatcher) never look at them.
    """

    __slots__ = ("_buf", "_pos", "_h", "_tail", "_props", "_topic")

    def __init__(self, buf: bytes, pos: int = 0):
        self._buf, self._pos = buf, pos
        h = _UNPACK_V4(buf, pos)
        v6 = h[7] & _HOSTS_V6                             # SYSFLAG: IPv6 hosts make the header longer
        if v6:
            st = header_struct(bool(v6 & BORNHOST_V6), bool(v6 & STOREHOST_V6))
            h = st.unpack_from(buf, pos)
            self._tail = pos + st.size + h[16]
        else:
            self._tail = pos + _HEADER_V4_SIZE + h[16]
        self._h = h
        self._props = self._topic = None

    @property
    def raw(self) -> bytes:
        """This record's bytes (the buffer itself when it holds just this record)."""
        pos = self._pos
        return self._buf[pos:pos + self._h[0]]

    total_size = property(lambda self: self._h[0])
    magic = property(lambda self: self._h[1])
    body_crc = property(lambda self: self._h[2])
    queue_id = property(lambda self: self._h[3])
    flag = property(lambda self: self._h[4])
    queue_offset = property(lambda self: self._h[5])
    physical_offset = property(lambda self: self._h[6])
    sys_flag = property(lambda self: self._h[7])
    born_timestamp = property(lambda self: self._h[8])
    born_host = property(lambda self: HostAddress(self._h[9], self._h[10]))
    store_timestamp = property(lambda self: self._h[11])
    store_host = property(lambda self: HostAddress(self._h[12], self._h[13]))
    reconsume_times = property(lambda self: self._h[14])
    prepared_transaction_offset = property(lambda self: self._h[15])

    @property
    def body(self) -> bytes:
        end = self._tail
        return self._buf[end - self._h[16]:end]

    # the body as stored, compressed or not: what a re-put copies (the client's ``RecordView.body`` is
    # a COMPRESSED record's body inflated; the store's reader hands on what it stores)
    stored_body = body

    @property
    def topic(self) -> str:
        if self._topic is None:
            pos, buf = self._tail, self._buf
            n = buf[pos]
            self._topic = buf[pos + 1:pos + 1 + n].decode()
        return self._topic

    @topic.setter
    def topic(self, topic: str) -> None:
        """Show the record under another topic (a retry topic as the one it was first sent to)."""
        self._topic = topic

    @property
    def properties_string(self) -> str:
        pos, buf = self._tail, self._buf
        pos += 1 + buf[pos]
        n = int.from_bytes(buf[pos:pos + 2], "big")
        return buf[pos + 2:pos + 2 + n].decode()

    @property
    def properties(self) -> dict[str, str]:
        if self._props is None:
            self._props = decode_properties(self.properties_string)
        return self._props

    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        """The KEYS words: split on single spaces, empty words dropped (RocketMQ's KEY_SEPARATOR)."""
        text = self.properties.get(PROPERTY_KEYS)
        return [k for k in text.split(" ") if k] if text else []

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def msg_id(self) -> str:
        """The offset message id: store host + physical offset."""
        return offset_msg_id(self.store_host, self.physical_offset)

    def to_message(self, **kwargs):
        """A new message with this record's body, flag and born info (:func:`record_to_message`)."""
        return record_to_message(self, **kwargs)

    def crc_ok(self) -> bool:
        return body_crc(self.body) == self.body_crc

    def to_dict(self) -> dict:
        """All fields as JSON-friendly values (:func:`record_to_dict`)."""
        return record_to_dict(self)

    def __repr__(self) -> str:
        return (f"StoredMessage(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"queue_offset={self.queue_offset}, physical_offset={self.physical_offset}, "
                f"size={self.total_size})")


def record_to_message(rec, *, topic: str, properties: dict[str, str], queue_id: int = 0, sys_flag: int | None = None,
                      reconsume_times: int | None = None, delay_level: int = 0):
    """A new message with *rec*'s body as stored (compressed or not, with its sysflag), flag and born
    info, for a re-put under another topic (delay delivery, retries, transaction commits and checks).
    Host flags are re-derived on put.
    *rec* is a :class:`StoredMessage` or a native ``RecordView`` (a pulled record)."""
    from rocketq.common.message import Message
    return Message(topic=topic, body=rec.stored_body, queue_id=queue_id, properties=properties, flag=rec.flag,
                   sys_flag=(rec.sys_flag if sys_flag is None else sys_flag) & ~(BORNHOST_V6 | STOREHOST_V6),
                   born_timestamp=rec.born_timestamp, born_host=rec.born_host,
                   reconsume_times=rec.reconsume_times if reconsume_times is None else reconsume_times,
                   delay_level=delay_level)


def record_to_dict(rec) -> dict:
    """All fields of *rec* as JSON-friendly values (body as hex when not UTF-8)."""
    body = rec.body
    try:
        body_text, enc = body.decode(), "utf-8"
    except UnicodeDecodeError:
        body_text, enc = body.hex(), "hex"
    return {
        "msg_id": rec.msg_id, "topic": rec.topic, "queue_id": rec.queue_id,
        "queue_offset": rec.queue_offset, "physical_offset": rec.physical_offset,
        "total_size": rec.total_size, "magic": f"0x{rec.magic:08X}", "body_crc": rec.body_crc,
        "flag": rec.flag, "sys_flag": rec.sys_flag, "born_timestamp": rec.born_timestamp,
        "born_host": str(rec.born_host), "store_timestamp": rec.store_timestamp,
        "store_host": str(rec.store_host), "reconsume_times": rec.reconsume_times,
        "prepared_transaction_offset": rec.prepared_transaction_offset,
        "properties": rec.properties, "body": body_text, "body_encoding": enc,
    }


def check_record(buf, pos: int, limit: int, *, offset: int, check_crc: bool = True) -> int | Blank:
    """Validate the record at *pos*; return its size (or a Blank); raise RecordError otherwise.

    *offset* is the commitlog offset of *pos*, checked against the PHYSICALOFFSET field.
    """
    size, magic = peek(buf, pos, limit, offset=offset)
    if magic == BLANK_MAGIC:
        return Blank(size)
    sys_flag = int.from_bytes(buf[pos + 36:pos + 40], "big", signed=True)
    st = header_struct(bool(sys_flag & BORNHOST_V6), bool(sys_flag & STOREHOST_V6))
    if size < st.size + 3:
        raise RecordError(offset, f"record size {size} is smaller than its header")
    h = st.unpack_from(buf, pos)
    if h[6] != offset:
        raise RecordError(offset, f"record claims physical offset {h[6]}")
    body_len = h[16]
    p = pos + st.size + body_len
    if body_len < 0 or p + 3 > pos + size:
        raise RecordError(offset, f"body length {body_len} runs past the record end")
    topic_len = buf[p] if magic == MAGIC_V1 else int.from_bytes(buf[p:p + 2], "big")
    p += (1 if magic == MAGIC_V1 else 2) + topic_len
    if p + 2 > pos + size:
        raise RecordError(offset, f"topic length {topic_len} runs past the record end")
    props_len = int.from_bytes(buf[p:p + 2], "big")
    if p + 2 + props_len != pos + size:
        raise RecordError(offset, f"lengths add up to {p + 2 + props_len - pos}, TOTALSIZE says {size}")
    if check_crc:
        start = pos + st.size
        crc = body_crc(buf[start:start + body_len])
        if crc != h[2]:
            raise RecordError(offset, f"body CRC 0x{crc:08X} does not match the stored 0x{h[2]:08X}")
    return size
