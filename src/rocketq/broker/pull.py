"""PULL_MESSAGE (11): read a queue for a consumer, holding the request when there is nothing yet.

A pull for a topic the broker does not have, or for a queue the topic does not have, is refused
first, with Java's codes and remarks (:meth:`PullHandler.refusal`).

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
request's commitOffset is stored for the group first.  A queue an operator reset for the group
(:mod:`rocketq.broker.offset_reset`) answers its next pull PULL_OFFSET_MOVED to the reset offset
(RocketMQ 5's OFFSET_RESET), unless the pull is there already.

Filtering (:mod:`rocketq.filter`, :mod:`rocketq.broker.filtered_reads`): with the SUBSCRIPTION flag
(0x4) the request's ``subscription`` / ``expressionType`` (TAG or SQL92) filter the read; a bad one
is SUBSCRIPTION_PARSE_FAILED naming the position.  Without it (the Java push consumer's default,
``postSubscriptionWhenPull=false``) the subscription the group registered in its heartbeat does,
as in RocketMQ: none registered is SUBSCRIPTION_NOT_EXIST, an older one than the pull's
``subVersion`` SUBSCRIPTION_NOT_LATEST, an unparsable one FILTER_DATA_NOT_EXIST.  (rocketq takes
the request's ``subscription`` when no heartbeat registered one, where RocketMQ refuses.)  SQL92
needs ``enablePropertyFilter``; without it the pull is SYSTEM_ERROR with RocketMQ's remark.  A
long poll woken by messages its filter drops goes on waiting from past them.
"""

from __future__ import annotations

import asyncio
import os

from rocketq.broker import filtered_reads
from rocketq.common.javahash import tag_hash
from rocketq.filter import FilterError, Subscription, is_tag_type, sub_version, subscription
from rocketq.remoting import RemotingCommand, ResponseCode
from rocketq.store.results import GetStatus

FLAG_COMMIT_OFFSET, FLAG_SUSPEND, FLAG_SUBSCRIPTION = 0x1, 0x2, 0x4
MAX_SUSPEND_S = 30.0
# messages a pull is answered with at most (and MAX_PULL_BYTES of them, the store's byte cap). RocketMQ caps
# at maxTransferCountOnMessageInMemory (32 by default) and its Java client asks for 1,024 at most; rocketq's
# own readers ask for more: a pull costs the broker ~90 us besides its records (BENCHMARKS.md, issue 15)
MAX_PULL_MESSAGES = 4096

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


def property_filter_refusal(expression_type: str) -> str:
    """RocketMQ's remark, word for word, for an SQL92 subscription on a broker with enablePropertyFilter=false."""
    return f"The broker does not support consumer to filter message by {expression_type}"


def resolve_subscription(cmd: RemotingCommand, registered, *, property_filter: bool
                         ) -> Subscription | tuple[int, str]:
    """The pull's subscription, or (response code, remark) refusing it (see the module notes).
    *registered* is the SubscriptionData JSON the group's heartbeat gave for the topic, or None."""
    flags = cmd.get_int("sysFlag", 0)
    own = bool(flags & FLAG_SUBSCRIPTION) or registered is None
    if own:
        if cmd.ext_fields.get("subscription") is None and not flags & FLAG_SUBSCRIPTION:
            return (ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist: group "
                    f"{cmd.get_str('consumerGroup')!r} registered none for topic {cmd.get_str('topic')!r}")
        text, kind = cmd.get_str("subscription", "*"), cmd.get_str("expressionType", "TAG")
    else:
        if sub_version(registered) < cmd.get_int("subVersion", 0):
            return ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest"
        text, kind = str(registered.get("subString") or "*"), registered.get("expressionType")
    if not is_tag_type(kind) and not property_filter:      # Java checks this before it parses anything
        return ResponseCode.SYSTEM_ERROR, property_filter_refusal(kind)
    try:
        return subscription(text, kind)
    except FilterError as exc:
        if own:
            return ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}"
        return ResponseCode.FILTER_DATA_NOT_EXIST, f"the group's registered filter does not parse: {exc}"


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
                 is_slave=lambda: False, topic_of=lambda topic: None, registered=lambda group, topic: None,
                 property_filter: bool = False,
                 max_filter_message_bytes: int = filtered_reads.DEFAULT_MAX_FILTER_MESSAGE_BYTES):
        self._store, self._offsets, self._polling, self._stats = store, offsets, long_polling, stats
        self._topic_of = topic_of
        self._is_slave = is_slave
        self._registered = registered              # (group, topic) -> the heartbeat's SubscriptionData or None
        self._property_filter = property_filter
        self._max_filter_bytes = max_filter_message_bytes
        enabled, self._slow_broker, ratio = slave_read
        # bytes behind the CommitLog end past which a read counts as cold (None: never suggest a slave)
        self._hot_bytes = physical_memory_bytes() * ratio // 100 if enabled else None

    def _suggest(self, result) -> int:
        if self._hot_bytes is None or result.max_phy_pulled < 0:
            return 0
        return self._slow_broker if self._store.max_physical_offset() - result.max_phy_pulled > self._hot_bytes else 0

    def refusal(self, conn, cmd: RemotingCommand, topic: str, qid: int) -> RemotingCommand | None:
        """Java's PullMessageProcessor answers, in its order: an unknown topic, a queue the topic does not
        have (the subscription's refusals follow, :func:`resolve_subscription`).  Unlike Java, a slave
        serves a topic whose config it has not copied yet (every 10 s) when its store holds the queue:
        a master lost within 10 s of creating a topic leaves its messages readable."""
        tc = self._topic_of(topic)
        if tc is None and self._is_slave() and self._store.max_offset(topic, qid) > 0:
            return None
        if tc is None:
            return RemotingCommand.create_response(cmd, ResponseCode.TOPIC_NOT_EXIST,
                                                   f"topic[{topic}] not exist, apply first please!")
        if not 0 <= qid < tc.read_queue_nums:
            return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, (
                f"queueId[{qid}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{tc.read_queue_nums}] "
                f"consumer:[{getattr(conn, 'peer', '')}]"))
        return None

    async def handle(self, conn, cmd: RemotingCommand) -> RemotingCommand:
        group, topic = cmd.get_str("consumerGroup"), cmd.get_str("topic")
        qid, offset = cmd.get_int("queueId"), cmd.get_int("queueOffset")
        refused = self.refusal(conn, cmd, topic, qid)
        if refused is not None:
            return refused
        flags = cmd.get_int("sysFlag", 0)
        max_nums = max(1, min(cmd.get_int("maxMsgNums", 32), MAX_PULL_MESSAGES))
        sub = resolve_subscription(cmd, self._registered(group, topic), property_filter=self._property_filter)
        if not isinstance(sub, Subscription):
            return RemotingCommand.create_response(cmd, *sub)
        reset = self._offsets.take_reset(group, topic, qid)
        if reset is not None and reset != offset:       # an operator reset the group: go there (RocketMQ 5)
            return RemotingCommand.create_response(cmd, ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET", {
                "nextBeginOffset": reset, "minOffset": self._store.min_offset(topic, qid),
                "maxOffset": self._store.max_offset(topic, qid), "suggestWhichBrokerId": 0})
        if flags & FLAG_COMMIT_OFFSET:
            self._offsets.commit(group, topic, qid, cmd.get_int("commitOffset", -1))
        scan = filtered_reads.scan_units_for(max_nums, self._max_filter_bytes)
        result = filtered_reads.read(self._store, topic, qid, offset, max_nums, sub, scan_units=scan, group=group)
        code = status_code(result.status, offset)
        if code == ResponseCode.PULL_NOT_FOUND and flags & FLAG_SUSPEND:
            result, code = await self._hold(conn, (group, topic), qid, offset, max_nums, sub, scan, result, code,
                                            min(cmd.get_int("suspendTimeoutMillis", 15_000) / 1000, MAX_SUSPEND_S))
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
        self._stats.pulled(len(result) if code == ResponseCode.SUCCESS else 0, len(body), group=group, topic=topic,
                           queue_id=qid, next_offset=header["nextBeginOffset"])
        return RemotingCommand.create_response(cmd, code, None if code == ResponseCode.SUCCESS else str(result.status),
                                               header, body)

    async def _hold(self, conn, group_topic, qid, offset, max_nums, sub, scan, result, code, timeout_s):
        """Long polling: wait for arrivals until something passes *sub* or *timeout_s* is over.
        Arrivals the filter drops move the offset past them and the wait goes on."""
        group, topic = group_topic
        loop_time = asyncio.get_running_loop().time
        give_up = loop_time() + timeout_s
        while code == ResponseCode.PULL_NOT_FOUND:
            left = give_up - loop_time()
            if left <= 0 or not await self._polling.wait(topic, qid, offset, left,
                                                         lambda: self._store.max_offset(topic, qid)):
                break
            await conn.until_writable()    # woken with many others: each answer waits for the client to read
            result = filtered_reads.read(self._store, topic, qid, offset, max_nums, sub, scan_units=scan, group=group)
            code = status_code(result.status, offset)
            if result.status == GetStatus.NO_MATCHED_MESSAGE:        # all filtered out: wait on from past them
                offset = result.next_begin_offset
                result.status, code = GetStatus.OFFSET_OVERFLOW_ONE, ResponseCode.PULL_NOT_FOUND
        return result, code
