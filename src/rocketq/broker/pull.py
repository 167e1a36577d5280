"""PULL_MESSAGE (11): read a queue for a consumer, holding the request when there is nothing yet.

A pull for a topic the broker does not have, for a queue the topic does not have, or with an SQL92
expression is refused first, with Java's codes and remarks (:meth:`PullHandler.refusal`).

Store status to response code (RocketMQ ``PullMessageProcessor``): FOUND -> SUCCESS (body = the
records in store format, back to back); MESSAGE_WAS_REMOVING / NO_MATCHED_MESSAGE ->
PULL_RETRY_IMMEDIATELY; NO_MATCHED_LOGIC_QUEUE / NO_MESSAGE_IN_QUEUE -> PULL_OFFSET_MOVED when the
requested offset is not 0, else PULL_NOT_FOUND; OFFSET_FOUND_NULL / OFFSET_OVERFLOW_ONE ->
PULL_NOT_FOUND; OFFSET_OVERFLOW_BADLY / OFFSET_TOO_SMALL -> PULL_OFFSET_MOVED.  The remark is the
store status.  Responses always carry nextBeginOffset, minOffset, maxOffset and
suggestWhichBrokerId: 0 (the master), or with ``slaveReadEnable`` on a master,
``whichBrokerWhenConsumeSlowly`` when the consumer reads data older than what fits in
``accessMessageInMemoryMaxRatio`` % of RAM (RocketMQ's "in disk" test: the CommitLog end minus the
last record pulled), so the slave serves the cold reads.  A slave never answers PULL_OFFSET_MOVED
(it may only be behind its master): PULL_RETRY_IMMEDIATELY at the same offset instead.  With the SUSPEND flag (0x2) a pull that would answer PULL_NOT_FOUND waits
(long polling) up to suspendTimeoutMillis for a message to arrive.  With COMMIT_OFFSET (0x1) the
request's commitOffset is stored for the group first.
"""

from __future__ import annotations

import os

from rocketq.common.javahash import tag_hash
from rocketq.remoting import RemotingCommand, ResponseCode
from rocketq.store.results import GetStatus

FLAG_COMMIT_OFFSET, FLAG_SUSPEND = 0x1, 0x2
MAX_SUSPEND_S = 30.0
MAX_PULL_MESSAGES = 1024

_CODES = {GetStatus.FOUND: ResponseCode.SUCCESS, GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
          GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
          GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
          GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
          GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
          GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED}


def tag_codes(subscription: str | None) -> set[int] | None:
    """Hash codes of a ``"TagA || TagB"`` expression; None for ``*`` (everything)."""
    if not subscription or subscription.strip() in ("*", ""):
        return None
    return {tag_hash(t.strip()) for t in subscription.split("||") if t.strip()}


def status_code(status: GetStatus, offset: int) -> int:
    if status in (GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
    return _CODES[status]


def physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):      # not POSIX: assume 8 GiB
        return 8 << 30


class PullHandler:
    def __init__(self, store, offsets, long_polling, stats, *, slave_read: tuple[bool, int, int] = (False, 1, 40),
                 is_slave=lambda: False, topic_of=lambda topic: None):
        self._store, self._offsets, self._polling, self._stats = store, offsets, long_polling, stats
        self._topic_of = topic_of
        self._is_slave = is_slave
        enabled, self._slow_broker, ratio = slave_read
        # bytes behind the CommitLog end past which a read counts as cold (None: never suggest a slave)
        self._hot_bytes = physical_memory_bytes() * ratio // 100 if enabled else None

    def _suggest(self, result) -> int:
        if self._hot_bytes is None or result.max_phy_pulled < 0:
            return 0
        return self._slow_broker if self._store.max_physical_offset() - result.max_phy_pulled > self._hot_bytes else 0

    def refusal(self, conn, cmd: RemotingCommand, topic: str, qid: int) -> RemotingCommand | None:
        """Java's PullMessageProcessor answers, in its order: an unknown topic, a queue the topic does not
        have, an expression type other than TAG (SQL92 needs enablePropertyFilter, which rocketq has not)."""
        tc = self._topic_of(topic)
        if tc is None:
            return RemotingCommand.create_response(cmd, ResponseCode.TOPIC_NOT_EXIST,
                                                   f"topic[{topic}] not exist, apply first please!")
        if not 0 <= qid < tc.read_queue_nums:
            return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, (
                f"queueId[{qid}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}] "
                f"consumer:[{getattr(conn, 'peer', '')}]"))
        expression_type = cmd.get_str("expressionType", "TAG") or "TAG"
        if expression_type != "TAG":
            return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR,
                                                   f"The broker does not support consumer to filter message by "
                                                   f"{expression_type}")
        return None

    async def handle(self, conn, cmd: RemotingCommand) -> RemotingCommand:
        group, topic = cmd.get_str("consumerGroup"), cmd.get_str("topic")
        qid, offset = cmd.get_int("queueId"), cmd.get_int("queueOffset")
        refused = self.refusal(conn, cmd, topic, qid)
        if refused is not None:
            return refused
        flags = cmd.get_int("sysFlag", 0)
        max_nums = max(1, min(cmd.get_int("maxMsgNums", 32), MAX_PULL_MESSAGES))
        codes = tag_codes(cmd.get_str("subscription", "*"))
        if flags & FLAG_COMMIT_OFFSET:
            self._offsets.commit(group, topic, qid, cmd.get_int("commitOffset", -1))
        result = self._store.get_messages(topic, qid, offset, max_nums, tag_codes=codes)
        code = status_code(result.status, offset)
        if code == ResponseCode.PULL_NOT_FOUND and flags & FLAG_SUSPEND:
            timeout_s = min(cmd.get_int("suspendTimeoutMillis", 15_000) / 1000, MAX_SUSPEND_S)
            if await self._polling.wait(topic, qid, offset, timeout_s, lambda: self._store.max_offset(topic, qid)):
                result = self._store.get_messages(topic, qid, offset, max_nums, tag_codes=codes)
                code = status_code(result.status, offset)
        header = {"nextBeginOffset": result.next_begin_offset, "minOffset": result.min_offset,
                  "maxOffset": result.max_offset, "suggestWhichBrokerId": self._suggest(result)}
        if code == ResponseCode.PULL_OFFSET_MOVED and self._is_slave():
            # a slave may simply not have dispatched this far yet: never move a consumer's offset from
            # here (RocketMQ's offsetCheckInSlave=false) - ask it to retry at the same offset
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
            header["nextBeginOffset"] = offset
        elif code == ResponseCode.PULL_OFFSET_MOVED and result.status == GetStatus.NO_MATCHED_LOGIC_QUEUE:
            header["nextBeginOffset"] = 0
        body = result.raw if code == ResponseCode.SUCCESS else b""
        self._stats.pulled(len(result) if code == ResponseCode.SUCCESS else 0)
        return RemotingCommand.create_response(cmd, code, None if code == ResponseCode.SUCCESS else str(result.status),
                                               header, body)
