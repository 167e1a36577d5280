"""Transactional (half) messages: END_TRANSACTION (37) over RocketMQ's half and op topics.

A producer's half message (property ``TRAN_MSG=true``, sysflag PREPARED) is not stored under its
topic: it goes to ``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0 with ``REAL_TOPIC`` / ``REAL_QID`` kept as
properties, invisible to consumers.  END_TRANSACTION names it by commitlog offset:

* COMMIT (8): the message is put again under its real topic and queue, then an op record is
  written to ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` (tag ``d``, body = the half message's queue offset);
* ROLLBACK (12): only the op record; UNKNOWN (0): nothing.

The op topic is what the check-back service (:mod:`rocketq.broker.transaction_check`) reads to know
which half messages are resolved (RocketMQ's ``TransactionalMessageServiceImpl``).

A transaction is ended once.  The producer's own END_TRANSACTION may come after the transaction
timeout: by then the checker has put the half message back as a new copy (same ``UNIQ_KEY``, and
``TRAN_PREPARED_QUEUE_OFFSET`` naming the first copy, as RocketMQ marks a copy) and
asked about that copy, and the answer ends the same transaction a second time.  RocketMQ commits it
twice then (a duplicate delivery); rocketq remembers the keys of the transactions it ended lately
(:class:`EndedTransactions`, bounded) and a second end only resolves its copy.  A key is remembered
only once its end is stored, so a commit that failed is committed by a later answer; an end that
arrives while another end of the same transaction is being stored writes nothing, and the checker
asks about its copy again.  The memory is lost in a restart: then the race can still duplicate, as in
RocketMQ.
"""

from __future__ import annotations

from collections import OrderedDict

from rocketq.acl.plain_acl import PUB
from rocketq.common.message import Message
from rocketq.common.sysflag import (
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rocketq.remoting import RemotingCommand, ResponseCode

OP_REMOVE_TAG = "d"
ENDED_TRANSACTIONS_KEPT = 65_536          # keys of ended transactions remembered per broker (~6 MB at most)
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
PROPERTY_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"   # a re-put copy's first half (the checker sets it)


def transaction_key(half) -> str:
    """What names a transaction across the copies of its half message: the client's message id, or
    for a client that sets none the half queue offset of its first copy."""
    props = half.properties
    return props.get(PROPERTY_UNIQ_KEY) or "#" + props.get(PROPERTY_PREPARED_QUEUE_OFFSET, str(half.queue_offset))


class EndedTransactions:
    """The unique keys of the transactions this broker ended lately, and of those being ended now."""

    def __init__(self, capacity: int = ENDED_TRANSACTIONS_KEPT):
        self._ended: OrderedDict[str, None] = OrderedDict()
        self._ending: set[str] = set()
        self._capacity = capacity

    def ended(self, key: str) -> bool:
        return key in self._ended

    def ending(self, key: str) -> bool:
        return key in self._ending

    def begin(self, key: str) -> None:
        self._ending.add(key)

    def finish(self, key: str, stored: bool) -> None:
        self._ending.discard(key)
        if stored:
            self._ended[key] = None
            if len(self._ended) > self._capacity:
                self._ended.popitem(last=False)


def is_half(msg: Message) -> bool:
    return msg.properties.get(PROPERTY_TRANSACTION_PREPARED) == "true" or \
        msg.sys_flag & TRANSACTION_MASK == TRANSACTION_PREPARED_TYPE


def to_half(msg: Message) -> Message:
    """The half message as stored: in the half topic, queue 0, real destination in properties."""
    props = dict(msg.properties)
    props[PROPERTY_REAL_TOPIC] = msg.topic
    props[PROPERTY_REAL_QUEUE_ID] = str(msg.queue_id)
    msg.properties = props
    msg.topic, msg.queue_id = TRANS_HALF_TOPIC, 0
    msg.sys_flag = (msg.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_NOT_TYPE
    return msg


async def end_transaction(broker, conn, cmd: RemotingCommand) -> RemotingCommand | None:
    kind = cmd.get_int("commitOrRollback")
    if kind not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
        return None if cmd.is_oneway else RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)
    offset = cmd.get_int("commitLogOffset")
    half = broker.store.read_message(offset)
    if half is None or half.topic != TRANS_HALF_TOPIC:
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR,
                                               f"no half message at commitlog offset {offset}")
    # committing or rolling back a half message is a send to its real topic
    denied = broker.authorize_found(conn, cmd, [("topic", half.properties.get(PROPERTY_REAL_TOPIC, ""), PUB)])
    if denied is not None:
        return None if cmd.is_oneway else denied
    key = transaction_key(half)
    ended: EndedTransactions = broker.ended_transactions
    if ended.ending(key):                    # its other copy is being ended now: this copy is asked about again
        return None if cmd.is_oneway else RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)
    ended.begin(key)
    stored = False
    try:
        if kind == TRANSACTION_COMMIT_TYPE and not ended.ended(key):
            r = await broker.store.put_message_async(committed(half))
            if not r.ok:
                return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, f"{r.status}: {r.error or ''}")
            stored = True                    # committed: never again, whatever becomes of the op record
        op = Message(topic=TRANS_OP_HALF_TOPIC, body=str(half.queue_offset).encode(), tags=OP_REMOVE_TAG)
        if (await broker.store.put_message_async(op)).ok and kind == TRANSACTION_ROLLBACK_TYPE:
            stored = True
    finally:
        ended.finish(key, stored)
    return None if cmd.is_oneway else RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)


def committed(half) -> Message:
    """The half message as its real topic's message, committed."""
    props = dict(half.properties)
    topic = props.pop(PROPERTY_REAL_TOPIC, None)
    qid = int(props.pop(PROPERTY_REAL_QUEUE_ID, "0"))
    props.pop(PROPERTY_TRANSACTION_PREPARED, None)
    return half.to_message(topic=topic, properties=props, queue_id=qid,
                           sys_flag=(half.sys_flag & ~TRANSACTION_MASK) | TRANSACTION_COMMIT_TYPE)
