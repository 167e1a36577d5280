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


def plain_body(body: bytes, sys_flag: int) -> bytes:
    """The body a consumer sees: inflated when COMPRESSED is set (zlib, as RocketMQ's clients
    compress); bytes that are not zlib despite the flag are returned as stored."""
    if not sys_flag & COMPRESSED:
        return body
    import zlib
    try:
        return zlib.decompress(body)
    except zlib.error:
        return body


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
