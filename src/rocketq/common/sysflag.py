"""Message ``sysFlag`` bits (RocketMQ ``MessageSysFlag``) and property names (``MessageConst``)."""

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
COMPRESSION_ZLIB_TYPES = (0x000, 0x300)
# the most a compressed body is inflated to: a producer checks a body against its maxMessageSize (4 MiB by
# default) before it compresses it, so a bigger one is none a RocketMQ client made (a zlib bomb: 4 MiB of
# stored body can inflate to 4 GiB)
MAX_INFLATED_BODY_BYTES = 64 << 20


def plain_body(body: bytes, sys_flag: int, limit: int = MAX_INFLATED_BODY_BYTES) -> bytes:
    """The body a consumer sees: inflated when COMPRESSED is set with the zlib codec (as RocketMQ's
    clients compress by default), at most *limit* bytes.  Bytes that are not a whole zlib stream despite
    the flag, a body compressed with LZ4 or ZSTD (a RocketMQ 5 producer's ``compressType``; not read
    here) and one that would inflate past *limit* are returned as stored."""
    if not sys_flag & COMPRESSED or sys_flag & COMPRESSION_TYPE_MASK not in COMPRESSION_ZLIB_TYPES:
        return body
    import zlib
    inflater = zlib.decompressobj()
    try:
        plain = inflater.decompress(body, limit + 1)
    except zlib.error:
        return body
    return plain if inflater.eof and len(plain) <= limit else body


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
