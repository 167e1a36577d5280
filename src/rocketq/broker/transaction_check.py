"""Asking producers about unresolved half messages (CHECK_TRANSACTION_STATE, 39, broker -> client).

Every ``interval_s`` the checker walks ``RMQ_SYS_TRANS_HALF_TOPIC`` from its saved offset.  A half
message whose queue offset appears in an op record (``RMQ_SYS_TRANS_OP_HALF_TOPIC``, written by
END_TRANSACTION) is resolved.  An unresolved one younger than ``timeout_s`` stops the walk (later
ones are younger still).  An older one is put back at the end of the half queue with
``TRANSACTION_CHECK_TIMES + 1`` (its old copy marked resolved), and a oneway CHECK_TRANSACTION_STATE
carrying the new copy goes to a connected producer of its group (``PGROUP``); the producer answers
with END_TRANSACTION.  After ``max_checks`` the message is moved, as RocketMQ moves it
(``DefaultTransactionalMessageCheckListener.resolveDiscardMsg``), to ``TRANS_CHECK_MAX_TIME_TOPIC``
(1 queue, read-write, made on first use) with its body and properties, where an operator can read
it and decide; it is marked resolved only once stored there, so a full disk loses nothing.
Progress is kept as the consumer offsets of group ``CID_RMQ_SYS_TRANS``.

A slave checks nothing: its CommitLog is a copy of its master's and must take no write of its own.
A slave acting master (:mod:`rocketq.broker.acting_services` sets :attr:`TransactionChecker.escape`)
does what RocketMQ's does: every unresolved half message, whatever its age, is escaped as a half
message to another group's master, which checks it back with the producer after its own
transaction timeout; the walk moves past it only once that master stored it (RocketMQ gives up on
a half message after three failed escapes, rocketq tries again next round).  The walk's offset is
this slave's consumer offset, which the returning master takes back, so it does not check again
what the slave escaped.
"""

from __future__ import annotations

import asyncio
import logging
import time

from rocketq.broker.escape import half_for_escape
from rocketq.broker.transactions import PROPERTY_PREPARED_QUEUE_OFFSET
from rocketq.common.message import Message
from rocketq.common.sysflag import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from rocketq.remoting import RemotingCommand, RequestCode

log = logging.getLogger(__name__)

CHECK_GROUP = "CID_RMQ_SYS_TRANS"
CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"     # TopicValidator.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC
CHECK_MAX_TIME_QUEUES = 1                               # TCMT_QUEUE_NUMS
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
PROPERTY_PRODUCER_GROUP = "PGROUP"
MAX_SCAN = 2048


class TransactionChecker:
    def __init__(self, broker, *, interval_s: float = 60.0, timeout_s: float = 6.0, max_checks: int = 15,
                 clock=time.time):
        self._broker = broker
        self.interval_s, self.timeout_s, self.max_checks = interval_s, timeout_s, max_checks
        self._clock = clock
        self._task: asyncio.Task | None = None
        self.escape = None              # async (message) -> bool while acting master: see the module doc
        self.held = False               # a master taking back its acting slave's progress: no round yet
        self._round = asyncio.Lock()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.check_once()
            except Exception:
                log.exception("transaction check round failed")

    def _resolved(self) -> tuple[set[int], list[tuple[int, int]]]:
        """The half offsets the op records from the op walk's offset resolve, and (op offset, half
        offset) of each op record read (-1: not an op record for a half)."""
        store, offsets = self._broker.store, self._broker.offsets
        start = max(0, offsets.query(CHECK_GROUP, TRANS_OP_HALF_TOPIC, 0))
        ops = [(m.queue_offset, int(m.body) if m.body.isdigit() else -1)
               for m in store.get_messages(TRANS_OP_HALF_TOPIC, 0, start, MAX_SCAN * 4)]
        return {h for _, h in ops if h >= 0}, ops

    def _pass_ops(self, ops: list[tuple[int, int]], half_offset: int) -> None:
        """Move the op walk past its leading op records that resolve a half message the half walk has
        passed (*half_offset*): they are needed no more, and the next round reads further ones (as
        RocketMQ moves the op queue's offset over its ``doneOpOffset``)."""
        passed = None
        for op_offset, half in ops:
            if half >= half_offset:
                break
            passed = op_offset + 1
        if passed is not None:
            self._broker.offsets.commit(CHECK_GROUP, TRANS_OP_HALF_TOPIC, 0, passed)

    async def wait_idle(self) -> None:
        """Return once no round is under way (the one running finishes its escape first)."""
        async with self._round:
            pass

    async def check_once(self) -> int:
        """One round; returns how many checks were sent (or half messages escaped)."""
        async with self._round:
            escape = self.escape
            if escape is not None:
                return await self._escape_round(escape)
            if self.held or getattr(getattr(self._broker, "replication", None), "role", "") == "SLAVE":
                return 0                 # a slave's CommitLog takes no writes of its own
            return await self._check_round()

    async def _escape_round(self, escape) -> int:
        store, offsets = self._broker.store, self._broker.offsets
        resolved, ops = self._resolved()
        offset = max(0, offsets.query(CHECK_GROUP, TRANS_HALF_TOPIC, 0))
        sent = 0
        for half in store.get_messages(TRANS_HALF_TOPIC, 0, offset, MAX_SCAN):
            if half.queue_offset not in resolved:
                if self.escape is None or not await escape(half_for_escape(half, half.properties)):
                    break                # acting ended, or no other group took it: from here next round
                sent += 1
            offset = half.queue_offset + 1
            offsets.commit(CHECK_GROUP, TRANS_HALF_TOPIC, 0, offset)
        self._pass_ops(ops, offset)
        return sent

    async def _check_round(self) -> int:
        store, offsets = self._broker.store, self._broker.offsets
        resolved, ops = self._resolved()
        offset = max(0, offsets.query(CHECK_GROUP, TRANS_HALF_TOPIC, 0))
        now_ms = int(self._clock() * 1000)
        sent = 0
        for half in store.get_messages(TRANS_HALF_TOPIC, 0, offset, MAX_SCAN):
            if half.queue_offset not in resolved:
                if now_ms - half.store_timestamp < self.timeout_s * 1000:
                    break
                checked = await self._check(half)
                if checked is None:      # its copy could not be stored (a full disk): from here next round
                    break
                sent += checked
            offset = half.queue_offset + 1
        offsets.commit(CHECK_GROUP, TRANS_HALF_TOPIC, 0, offset)
        self._pass_ops(ops, offset)
        return sent

    async def _check(self, half) -> int | None:
        """Re-put *half* and ask its producer; 1 when asked, 0 when not (dropped, or no producer), None
        when the copy could not be stored: then the half stays where it is, unresolved (the copy goes
        in before the old one is marked resolved, so a refused put never loses a transaction)."""
        store = self._broker.store
        props = dict(half.properties)
        times = int(props.get(PROPERTY_CHECK_TIMES, "0") or 0)
        resolve = Message(topic=TRANS_OP_HALF_TOPIC, body=str(half.queue_offset).encode(), tags="d")
        if times >= self.max_checks:
            tc = self._broker.topics.create_retry_or_dlq(CHECK_MAX_TIME_TOPIC, CHECK_MAX_TIME_QUEUES)
            kept = await store.put_message_async(half.to_message(topic=tc.topic_name, properties=props, queue_id=0))
            if kept.physical_offset < 0:
                return None                  # stays unresolved; moved on a later round
            await store.put_message_async(resolve)
            log.warning("half message %s of group %s (topic %s) moved to %s after %d checks without an answer",
                        props.get("UNIQ_KEY", half.msg_id), props.get(PROPERTY_PRODUCER_GROUP),
                        props.get("REAL_TOPIC"), CHECK_MAX_TIME_TOPIC, times)
            return 0
        props[PROPERTY_CHECK_TIMES] = str(times + 1)
        props.setdefault(PROPERTY_PREPARED_QUEUE_OFFSET, str(half.queue_offset))    # the first copy's, kept
        again = await store.put_message_async(half.to_message(topic=TRANS_HALF_TOPIC, properties=props))
        if again.physical_offset < 0:
            return None
        await store.put_message_async(resolve)
        conn = self._broker.clients.any_producer(props.get(PROPERTY_PRODUCER_GROUP, ""))
        if conn is None:
            return 0
        copy = store.read_message(again.physical_offset)
        header = {"topic": props.get("REAL_TOPIC", ""), "tranStateTableOffset": again.queue_offset,
                  "commitLogOffset": again.physical_offset, "msgId": props.get("UNIQ_KEY", again.msg_id),
                  "transactionId": props.get("__transactionId__", props.get("UNIQ_KEY", again.msg_id)),
                  "offsetMsgId": again.msg_id}
        try:
            await conn.send_oneway(RemotingCommand.create_request(RequestCode.CHECK_TRANSACTION_STATE, header,
                                                                  copy.raw, oneway=True))
        except Exception as exc:
            log.info("could not ask producer group %s about %s: %s", props.get(PROPERTY_PRODUCER_GROUP),
                     again.msg_id, exc)
            return 0
        return 1

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
