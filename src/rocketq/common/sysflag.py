"""Message ``sysFlag`` bits (RocketMQ ``MessageSysFlag``) and property names (``MessageConst``)."""

import zlib

COMPRESSED = 0x1
MULTI_TAGS = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20


# bits 8-10: the codec of a COMPRESSED body (RocketMQ 5's CompressionType; 0 from 4.x clients means zlib)
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4, COMPRESSION_ZSTD, COMPRESSION_ZLIB = 0x100, 0x200, 0x300
# the most a compressed body is inflated to: a producer checks a body against its maxMessageSize (4 MiB by
# default) before it compresses it, so a bigger one is none a RocketMQ client made (a zlib bomb: 4 MiB of
# stored body can inflate to 4 GiB)
MAX_INFLATED_BODY_BYTES = 64 << 20


def plain_body(body: bytes, sys_flag: int, limit: int = MAX_INFLATED_BODY_BYTES) -> bytes:
    """The body a consumer sees: inflated when COMPRESSED is set, with the codec the sysflag names (zlib
    when it names none, as RocketMQ 4.x clients send it; LZ4 and ZSTD frames from a 5.x producer set to
    them), at most *limit* bytes.  Bytes that are not one whole stream of that codec despite the flag, and
    a body that would inflate past *limit*, are returned as stored."""
    if not sys_flag & COMPRESSED:
        return body
    inflate = _INFLATERS.get(sys_flag & COMPRESSION_TYPE_MASK)
    if inflate is None:
        return body
    try:
        plain = inflate(body, limit + 1)
    except Exception:         # whatever a codec raises for bytes that are not its stream: hand them on
        return body
    return plain if plain is not None and len(plain) <= limit else body


# Each inflater: the body's one stream inflated, or None when it is not one whole stream within *most*
# bytes (past *most*, the stream's end is never reached).  lz4 and zstandard are imported when first
# needed: most processes never see such a body.

def _zlib(body: bytes, most: int) -> bytes | None:
    inflater = zlib.decompressobj()
    plain = inflater.decompress(body, most)
    return plain if inflater.eof else None


def _lz4(body: bytes, most: int) -> bytes | None:
    import lz4.frame
    inflater = lz4.frame.LZ4FrameDecompressor()
    plain = inflater.decompress(body, max_length=most)
    return plain if inflater.eof else None


def _zstd(body: bytes, most: int) -> bytes | None:
    import zstandard
    # the size a frame declares (RocketMQ's ZstdCompressor writes it) is what it inflates to: past *most*
    # it is refused unread.  A frame that declares none (-1) is inflated once bounded by max_output_size
    # (which raises past it), and then once whole, the only way python-zstandard tells where it ended.
    size = zstandard.frame_content_size(body)
    if size >= most:
        return None
    if size < 0:
        zstandard.ZstdDecompressor().decompress(body, max_output_size=most)
    inflater = zstandard.ZstdDecompressor().decompressobj()
    plain = inflater.decompress(body)
    return plain if inflater.eof and not inflater.unused_data else None


_INFLATERS = {0: _zlib, COMPRESSION_ZLIB: _zlib, COMPRESSION_LZ4: _lz4, COMPRESSION_ZSTD: _zstd}


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_MASK


def reset_transaction(sys_flag: int, tran_type: int) -> int:
    return (sys_flag & ~TRANSACTION_MASK) | tran_type


# Property names the store itself reads or writes.
PROPERTY_KEYS = "KEYS"
PROPERTY_TAGS = "TAGS"
PROPERTY_DELAY = "DELAY"
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_WAIT_STORE_MSG_OK = "WAIT"

KEY_SEPARATOR = " "

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"
