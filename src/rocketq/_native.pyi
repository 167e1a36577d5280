"""rocketq._native: the per-message loops of rocketq's data path, in Rust (``native/``, PyO3).

Every function takes and returns buffers, ints and lists, one call per batch or run: no Python
object per message crosses the boundary where a buffer will do.  Segments stay ``mmap`` objects
owned by Python; kernels write into them through the buffer protocol and hold the export for the
call.  Kernels that copy, checksum or walk more than ``64 KiB`` release the GIL while they do.

Parsers of bytes from the network or the disk never panic and never read out of bounds: bad input
becomes ``BatchFormatError`` / ``BatchError`` or an ``error`` field naming the offset.
"""

from typing import Callable

BUILD_PROFILE: str
"""``"release"`` or ``"debug"``: how the extension was built (benchmarks refuse a debug build)."""
VERSION: str

class BatchError(ValueError):
    """A message the store refuses; ``args`` are ``(PutStatus name, reason naming the message)``."""

class BatchFormatError(ValueError):
    """A SEND_BATCH_MESSAGE body that does not parse; the message names the byte or record."""

def java_hash(text: str) -> int:
    """Java ``String.hashCode`` of *text* (UTF-16 code units), as a signed int32."""

def index_hash(text: str) -> int:
    """The index key hash: ``abs(hashCode)``, ``Integer.MIN_VALUE`` mapped to 0."""

def body_crc(data: bytes | bytearray | memoryview) -> int:
    """CRC-32 (IEEE) of *data* masked to 31 bits, as records store body CRCs."""

class RecordBatch:
    """Records staged for one CommitLog append: validated, sizes known (body CRCs are computed by
    :meth:`append_to`, as it copies each body).

    Bodies and properties are read where they are (the batch keeps the source objects alive).
    Prepared and rolled-back transaction records (sysflag bit 0x4) belong to no queue group.
    """

    @staticmethod
    def from_wire(body: bytes, topic: str, queue_id: int, *, sys_flag: int, born_timestamp: int, born_ip: bytes,
                  born_port: int, reconsume_times: int, max_body_bytes: int, store_v6: bool,
                  check_topic: Callable[[str], str | None] | None = None) -> "RecordBatch | None":
        """A SEND_BATCH_MESSAGE body (``i32 total | i32 magic | i32 crc | i32 flag | i32 bodyLen | body |
        i16 propsLen | props`` per message) for one topic and queue; None when a message carries a
        ``DELAY`` property.  Raises BatchFormatError for bytes that do not parse, BatchError for a
        message the store refuses (size limits, properties that are not ``k\\x01v\\x02`` pairs)."""

    @staticmethod
    def from_messages(msgs: list, *, max_body_bytes: int, store_v6: bool, general: Callable[[object], tuple],
                      check_topic: Callable[[str], str | None] | None = None) -> "RecordBatch":
        """``Message`` objects.  A plain message (no user properties, no delay level, IPv4 born host) is
        read here and gets ``TAGS\\x01t\\x02KEYS\\x01k1 k2\\x02``; any other is passed to
        ``general(msg)``, which returns a row ``(topic, queue_id, flag, sys_flag, born_timestamp, born_ip,
        born_port, reconsume_times, prepared_offset, body, properties_bytes)``."""

    def __len__(self) -> int: ...
    @property
    def total_bytes(self) -> int:
        """Bytes the records take in the log."""
    @property
    def sizes(self) -> list[int]: ...
    @property
    def queue_ids(self) -> list[int]: ...
    def groups(self) -> list[tuple[str, int, int]]:
        """``(topic, queue_id, count)`` of the consumable records, one per queue, first-seen order."""

    @property
    def queue_offsets(self) -> list[int]:
        """Each record's queue offset once appended (0 for prepared/rolled-back records)."""
    def queue_offset(self, i: int) -> int: ...

    def append_to(self, dest, pos: int, table: dict[tuple[str, int], int], *, physical_offset: int,
                  store_timestamp: int, store_ip: bytes, store_port: int) -> None:
        """Encode the records at ``dest[pos:]`` (a writable buffer: the segment's mapping or transient
        buffer) as the log's bytes from *physical_offset*, queue offsets from *table*
        (``(topic, queue_id) -> next offset``, advanced; prepared and rolled-back records get 0); a born
        timestamp of 0 becomes the store timestamp.  The caller holds the put lock; once per batch."""

    def joined_msg_ids(self, store_host: bytes, physical_offset: int) -> str:
        """The records' offset message ids (upper-case hex of packed host + offset) joined with ','."""

class SegmentFull(Exception):
    """A single put's record does not fit before the segment's end (nothing written): args are (record bytes,)."""

class SinglePut:
    """The store's single put in one call (``CommitLog.append_message``): one ``Message`` without a
    delay level read, checked as ``RecordBatch.from_messages`` checks it (same errors), encoded at the
    segment's write position, its queue offset taken from and advanced in *table*."""

    def __init__(self, table: dict[tuple[str, int], int], *, max_body_bytes: int, store_ip: bytes, store_port: int,
                 segment_bytes: int, check_topic: Callable[[str], str | None], result_type: type | None = None,
                 put_ok: object = None) -> None: ...

    def append(self, msg, segment, clock: Callable[[], float]):
        """``put`` at *segment*'s write position (a ``MappedFile``; the caller holds the put lock), stamped
        ``int(clock() * 1000)`` (read natively when *clock* is ``time.time``); the segment is advanced as
        ``MappedFile.advance`` does and its ``store_timestamp`` set; returns ``result_type(put_ok, msg id,
        physical offset, queue offset, queue id, record bytes, store timestamp, None)``, made without
        running its ``__init__`` when it is a slots dataclass.  Raises as ``put`` does, nothing changed."""

    def put(self, msg, dest, pos: int, physical_offset: int, store_timestamp: int) -> tuple[str, int, int]:
        """Encode *msg* at ``dest[pos:]`` (the segment's mapping or transient buffer) as the log's bytes at
        *physical_offset*; returns ``(offset message id, queue offset, record bytes)``.  Raises BatchError
        for a refused message, SegmentFull when the record and the closing blank do not fit before
        *segment_bytes*, ValueError for a message with a delay level.  The caller holds the put lock."""

class DispatchRun:
    """What :func:`dispatch_scan` found in a run of records (picklable, for Spark tasks)."""

    end: int                      # segment-relative position the walk reached
    blank: bool                   # stopped at the segment's blank record
    records: int
    error: str | None             # bytes that are no record stopped the walk
    base_offset: int
    max_store_timestamp: int
    @property
    def end_offset(self) -> int: ...
    @property
    def index_entries(self) -> int: ...
    def queue_runs(self) -> list[tuple[str, int, int, bytes, int]]:
        """``(topic, queue_id, first queue offset, 20-byte units, end of the last unit's record)`` per
        run of consecutive queue offsets, log order within each queue."""
    def index_first_after(self, physical_offset: int) -> int:
        """The first index entry whose commitlog offset is above *physical_offset*."""
    def index_list(self) -> list[tuple[int, int, int]]:
        """``(hash, commitlog offset, store time)`` of every index entry."""

def dispatch_scan(segment, start: int, end: int, *, base_offset: int, delay_levels_ms: list[int],
                  with_index: bool = True, max_bytes: int | None = None) -> DispatchRun:
    """Walk the records of ``segment[start:end]`` and build their consume-queue units (tags code =
    ``hashCode(TAGS)``, or in ``SCHEDULE_TOPIC_XXXX`` the delivery time) and index entries (every KEYS
    word and the UNIQ_KEY as ``topic#key``; not for rolled-back records)."""

def cq_write(dest, pos: int, units) -> None:
    """Copy consume-queue *units* into the writable buffer *dest* at *pos* (ValueError when they do not
    fit); the GIL is released for long runs (a fresh segment's page faults)."""

def index_put(file, slot_count: int, max_entries: int, entries: list[tuple[int, int, int]]) -> int:
    """Put ``(hash, commitlog offset, store time)`` entries into the mapped index *file* as RocketMQ's
    ``putKey`` would, one after the other; returns how many fit."""

def index_put_run(file, slot_count: int, max_entries: int, run: DispatchRun, start: int) -> int:
    """:func:`index_put` of a run's index entries from *start* on."""

def scan_segment(segment, base_offset: int | None, start: int, limit: int, *, check_crc: bool,
                 torn_from: int | None = None) -> tuple[bytes, bytes, int, bool, tuple[int, str] | None]:
    """Walk and check records of ``segment[start:limit]``: ``(positions, sizes, end, blank, error)``,
    positions and sizes as native-endian int64 arrays in bytes.  *base_offset* None: records not at
    their log position (a pull's body), PHYSICALOFFSET unchecked.  *torn_from*: a record at or after
    that offset whose tail ends in a zero byte stops the walk (a crash's tear)."""

def find_record_start(segment, base_offset: int, lo: int, hi: int) -> int | None:
    """First position in ``[lo, hi)`` holding the V1 magic at +4 and its own log offset as PHYSICALOFFSET."""

def read_units(units: bytes, segment, seg_base: int, readable: int, *, log_min: int, max_bytes: int,
               tag_codes: list[int] | None = None) -> tuple[bytes, int, int, int, bool, str]:
    """The records consume-queue *units* point at in *segment* (log offsets ``[seg_base, seg_base +
    readable)``), back to back: ``(records, count, units consumed, offset of the last record or -1,
    expired records seen, stop)``.  Blank units, units below *log_min* (expired) and units whose tags
    code is not in *tag_codes* are consumed without a record; a record that would pass *max_bytes*
    (once one is taken) stops with "budget"; one in another segment stops with "segment"."""

def pulled_messages(body: bytes) -> list[RecordView]:
    """The records of a pull / pop / query answer *body* (store format, back to back), one
    :class:`RecordView` each; ValueError naming the byte and the reason when a record does not parse."""

class RecordView:
    """One record of a pull answer read in place: every attribute of
    :class:`rocketq.store.record.StoredMessage` (the reference), with the same values but ``body``: a
    COMPRESSED record's is inflated (:func:`rocketq.common.sysflag.plain_body`), as RocketMQ's clients
    hand it to the application; ``stored_body`` is the bytes as stored.  ``topic`` and ``properties``
    are decoded once and kept; ``topic`` may be set (a retry topic shown as the original)."""
    def __init__(self, buf: bytes, pos: int = 0) -> None: ...
    total_size: int
    magic: int
    body_crc: int
    queue_id: int
    flag: int
    queue_offset: int
    physical_offset: int
    sys_flag: int
    born_timestamp: int
    born_host: object
    store_timestamp: int
    store_host: object
    reconsume_times: int
    prepared_transaction_offset: int
    raw: bytes
    body: bytes
    stored_body: bytes
    topic: str
    properties_string: str
    properties: dict[str, str]
    tags: str | None
    keys: list[str]
    uniq_key: str | None
    msg_id: str
    def crc_ok(self) -> bool: ...
    def to_message(self, **kwargs) -> object: ...
    def to_dict(self) -> dict: ...

def property_codes(units: bytes, segment, seg_base: int, readable: int,
                   names: list[str]) -> tuple[bytes, list[tuple[list[str], bytes]]]:
    """The named properties of the records consume-queue *units* point at in *segment* (log offsets
    ``[seg_base, seg_base + readable)``), dictionary-encoded for the bit-map prefilter: ``(store
    timestamps as little-endian int64 per unit, [(distinct values, little-endian int32 code per
    unit) per name])``; a code is the value's index, -1 when the record lacks the property, -2 when
    the value is not UTF-8 or the record cannot be read (a blank unit, outside the segment).  A
    repeated name has its last value."""

def record_columns(buf, positions, topics: list[str] | None = None, min_store_ms: int | None = None,
                   max_store_ms: int | None = None) -> dict:
    """Arrow buffers of every Spark column for the records at *positions* (an int64 buffer) in *buf*
    that are of *topics* (None: all) and stored in ``[min_store_ms, max_store_ms)`` (None: unbounded):
    fixed-width columns as little-endian bytes, strings/binary as ``(validity or None, int32 offsets,
    data)``, the properties map as ``map_offsets`` + ``prop_keys`` + ``prop_values`` (a repeated name
    keeps its first place and last value), each buffer a read-only :class:`ColumnBuffer`; ``rows``
    kept, ``consumed`` positions read (fewer than given when a column would pass 2 GiB, or at an
    error), ``uniform_topic``, ``compressed`` row numbers, ``error`` (None or why the record at
    position number ``consumed`` does not parse)."""

def walk_columns(buf, base_offset: int | None, start: int, hi: int, limit: int, max_rows: int, *, check_crc: bool,
                 topics: list[str] | None = None, min_store_ms: int | None = None,
                 max_store_ms: int | None = None) -> dict:
    """:func:`scan_segment`'s walk of ``buf[start:limit]`` and :func:`record_columns`' decoding in one
    pass: the columns (as ``record_columns`` gives them, same filter) of the records that start
    before *hi*, at most *max_rows* records walked; plus ``end`` (where the walk stopped: the next
    record, or the damaged one), ``more`` (True when it stopped at *max_rows* or a column's 2 GiB
    before *hi*: call again from ``end``) and ``error`` (None or ``(commitlog offset, reason)`` of the
    record at ``end``).  *base_offset* None: a pull's body, PHYSICALOFFSET not checked."""

def walk_bodies_columns(bodies: list, start_body: int, start_pos: int, max_rows: int) -> dict:
    """:func:`walk_columns` over several pull bodies (records back to back, each body whole; no
    log offsets, no CRC check) into one set of columns, from ``bodies[start_body][start_pos:]``, at
    most *max_rows* records: the columns, ``end`` (``(body, byte)`` where the walk stopped),
    ``more`` (call again from ``end``) and ``error`` (None or ``(body, byte, reason)``)."""


class ColumnBuffer:
    """The bytes of one column filled by :func:`record_columns`, exported read-only through the
    buffer protocol (``pyarrow.py_buffer`` wraps it without a copy)."""

    def __len__(self) -> int: ...


def encode_send_batch(msgs: list) -> bytes:
    """A SEND_BATCH_MESSAGE body of ``Message`` objects (the client side of :meth:`RecordBatch.from_wire`),
    properties built as ``Message.properties_string`` builds them; ValueError names a bad message."""

def encode_sink_rows(rows: int, body: tuple, tags: tuple | None, keys: tuple | None, props: tuple | None, *,
                     uniq_prefix: bytes, first_counter: int, max_body_bytes: int) -> tuple[bytes, bytes, bytes]:
    """SEND_BATCH entries of *rows* Arrow rows (the Spark sink): columns as ``(validity or None, int32 offsets,
    data, array offset, length)``, the properties map as ``(int32 offsets, map offset, keys column, values
    column)``; each entry's properties are UNIQ_KEY (hex of *uniq_prefix* and the 48-bit counter
    ``first_counter + row``), TAGS, KEYS, then the map (null values left out).  Returns ``(entries, int64 entry
    offsets, int64 body lengths)``; ValueError names the row that cannot be a message."""

def decode_frames(buf, start: int, base: int, max_frame_bytes: int) -> tuple[list[tuple], int, tuple[int, str, str] | None]:
    """Every whole remoting frame of ``buf[start:]`` (stream offset *base*): a list of ``(code, language,
    version, opaque, flag, remark, ext_fields, serialize_type, body)``, the position after the last whole
    frame, and None or ``(stream offset, reason, part)`` for the frame that does not parse (part: "JSON
    header", "ROCKETMQ header" or "" for the framing)."""

def encode_frame_header(code: int, language: int, version: int, opaque: int, flag: int, remark: str | None,
                        ext: dict, serialize_type: int, body_len: int) -> bytes:
    """Length prefix, header-length field and header (JSON or ROCKETMQ binary) of a frame whose body is
    *body_len* bytes; ValueError says what does not fit the header form."""

class CallMetadata:
    """A call's request headers, kept in Rust until a handler asks for them."""

    def items(self) -> tuple[tuple[str, str], ...]:
        """``((key, value), ...)`` of the headers but gRPC's own (content-type, te, grpc-timeout,
        grpc-encoding, grpc-accept-encoding); values that are not UTF-8 decoded lossily."""


class GrpcServer:
    """The native gRPC transport (``native/src/grpc_server.rs``): HTTP/2 served on a thread of its own,
    calls handed to Python in batches (:mod:`rocketq.grpc_endpoint.native_transport` drives it).  Binds
    ``host:port`` at once with a listen queue of *backlog* (OSError when taken); *client_streaming* lists
    the method paths whose request is a stream (the others are read whole before their call event).
    With *tls_cert* and *tls_key* (PEM bytes) every connection is TLS (rustls, ALPN h2): *client_auth*
    ``none`` asks for no client certificate, ``optional`` verifies one if given, ``require`` refuses a
    client without one (both against *tls_trust*, PEM CA certificates); ValueError names what does not
    load."""

    port: int
    wake_fd: int          # readable while events are queued; drain() empties it
    tls: bool             # the port serves TLS

    def __init__(self, host: str, port: int, client_streaming: list[str], *, max_connections: int,
                 max_streams: int, max_calls: int, max_message_bytes: int, idle_timeout_s: float,
                 keepalive_s: float, max_queued_bytes: int, max_partial_bytes: int, backlog: int = 1024,
                 tls_cert: bytes | None = None, tls_key: bytes | None = None, tls_trust: bytes | None = None,
                 client_auth: str = "none") -> None: ...

    def set_tls(self, cert: bytes, key: bytes, trust: bytes | None = None, client_auth: str = "none") -> None:
        """A new certificate for the connections accepted from now on (those open keep theirs);
        ValueError, and the old one stays, when it does not load or the server has no TLS."""

    def drain(self) -> list[tuple]:
        """The queued events, oldest first: ``(0, id, method path, metadata (a CallMetadata), peer
        "ipv4:host:port", timeout seconds or None, request bytes or None for a client stream)``,
        ``(1, id, message)`` of a client stream, ``(2, id)`` its half-close, ``(3, id, grpc status, reason)``
        the call was ended by the transport (client reset, deadline, lost connection, shutdown),
        ``(4, id, length)`` a message (of *length* bytes) sent with ack was taken by the client's window."""

    def respond(self, ops: list[tuple[int, bytes | None, int, str, bool]]) -> None:
        """``(id, message or None, grpc status or -1, status message, ack)`` each: the message goes out,
        then (status not -1) the trailers end the call; ops on ended calls are dropped.  The batch
        wakes the transport's thread once."""

    def stats(self) -> tuple[int, int, int]:
        """(open connections, calls in progress, bytes queued for Python)."""

    def close(self, grace_s: float) -> None:
        """Stop accepting, GOAWAY to every connection, *grace_s* for calls to end, then close all."""

def send_fields(ext_fields: dict) -> tuple[str, str, int, int, int, int, int, int, str] | None:
    """A SEND_MESSAGE(_V2) header's fields, V1 or V2 names: ``(topic, defaultTopic, defaultTopicQueueNums,
    queueId, sysFlag, bornTimestamp, flag, reconsumeTimes, properties)`` with RocketMQ's defaults; None when
    a field is missing or in a form only the Python path reads (integers other than ``-?[0-9]{1,18}``
    strings, a V2 header that also has V1 names)."""

def stage_send(topic: str, queue_id: int, flag: int, sys_flag: int, born_timestamp: int, born_ip: bytes,
               born_port: int, reconsume_times: int, body: bytes, properties: str, cluster: str, *,
               max_body_bytes: int, store_v6: bool,
               check_topic: Callable[[str], str | None] | None = None) -> tuple[RecordBatch, str | None, bool] | None:
    """The one-record batch of a sent message whose properties need no policy: ``(batch, UNIQ_KEY or
    None, has __SHARDINGKEY)``, the record's properties being *properties* (terminated) then
    ``CLUSTER\\x01<cluster>\\x02``.  None for properties that are not plain unique ``k\\x01v\\x02`` pairs
    or that name DELAY, TRAN_MSG, CLUSTER or a TIMER_ property.  Raises BatchError as
    ``RecordBatch.from_messages`` does."""
