"""Pop consumption over remoting: POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME.

The same state as gRPC receives (:class:`~rocketq.broker.pop.popping.Popper`), so a Java consumer in
pop mode and a gRPC consumer of one group share its messages, retries and dead letters.

POP_MESSAGE (200050) header: ``consumerGroup``, ``topic``, ``queueId`` (-1: every readable queue),
``maxMsgNums`` (1..32), ``invisibleTime`` ms, ``pollTime`` ms (long polling), ``expType``/``exp``
(a TAG or SQL92 filter), ``order``.  A found pop answers SUCCESS with the records back to back in
store format (as a pull does) and RocketMQ's ``PopMessageResponseHeader``, from which the client
builds each message's ``extraInfo`` (``MQClientAPIImpl.processPopResponse``)::

    popTime invisibleTime reviveQid restNum
    startOffsetInfo  "<mark> <queueId> <first offset>" per queue, ';'-separated
    msgOffsetInfo    "<mark> <queueId> <offset>,<offset>..." per queue, in body order
    orderCountInfo   "<mark> qo<queueId>%<offset> <reconsume times>" per message (orderly groups)

``mark`` is 0 for the topic's own queue and 1 for the group's pop retry topic (whose records carry
that topic's name and queue).  Nothing found within ``pollTime`` is POLLING_TIMEOUT, as RocketMQ
answers, with the header fields still present (the client requires them).

``extraInfo`` = ``ckOffset popTime invisibleTime reviveQid mark brokerName queueId offset``.  An
ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME names the message by ``topic`` (the pop retry topic for
mark 1), ``queueId`` and ``offset``, and its copy by ``popTime + invisibleTime``: the deadline every
message of one pop shares.  An ack of that copy acks it; of an older copy (the invisible time was
changed since, or it was popped again) is NO_MESSAGE and changes nothing; of a message no longer
in flight is SUCCESS while its deadline lies ahead (acked already) and NO_MESSAGE after (it comes
back, or came back).  BATCH_ACK_MESSAGE's body carries, per queue and pop, the offsets as a bit set
from ``so`` (fastjson: ``{"acks": [{"c", "t", "r", "so", "q", "rq", "pt", "it", "b": base64}]}``).
CHANGE_MESSAGE_INVISIBLETIME answers the new ``popTime``/``invisibleTime``/``reviveQid``.
"""

from __future__ import annotations

import base64

from rocketq.broker.pop.pop_state import InFlight, QueueKey
from rocketq.broker.pop.popping import Popped, PopError, pop_retry_topic
from rocketq.broker.pull import MAX_SUSPEND_S, property_filter_refusal
from rocketq.common import fastjson
from rocketq.filter import FilterError, subscription
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

MAX_POP_MESSAGES = 32                      # RocketMQ: "the broker[...] pop message's num is greater than 32"
MAX_INVISIBLE_MS = 12 * 3600 * 1000        # the proxy's maxInvisibleTimeMills
POP_ORDER_REVIVE_QUEUE = 999               # RocketMQ's KeyBuilder.POP_ORDER_REVIVE_QUEUE
NORMAL_MARK, RETRY_MARK = "0", "1"


def handlers(broker) -> dict:
    return {RequestCode.POP_MESSAGE: lambda conn, cmd: pop_message(broker, cmd),
            RequestCode.ACK_MESSAGE: lambda conn, cmd: ack_message(broker, cmd),
            RequestCode.BATCH_ACK_MESSAGE: lambda conn, cmd: batch_ack(broker, cmd),
            RequestCode.CHANGE_MESSAGE_INVISIBLETIME: lambda conn, cmd: change_invisible(broker, cmd)}


def _refuse(cmd, code: int, remark: str) -> RemotingCommand:
    return RemotingCommand.create_response(cmd, code, remark)


# -- POP_MESSAGE -------------------------------------------------------------------------------

async def pop_message(broker, cmd: RemotingCommand) -> RemotingCommand:
    plan = _pop_plan(broker, cmd)
    if isinstance(plan, RemotingCommand):
        return plan
    group, topic, queue_ids, max_nums, invisible, wait_s, sub = plan
    popper = broker.pop.popper
    try:
        popped = await popper.receive(group, topic, queue_ids, batch=max_nums, invisible_ms=invisible, sub=sub,
                                      wait_s=wait_s)
    except PopError as exc:
        return _refuse(cmd, ResponseCode.SYSTEM_ERROR, exc.message)
    order = popper.is_fifo(group)
    header = {"popTime": popped[0].entry.deadline_ms - invisible if popped else broker.pop.state.now_ms(),
              "invisibleTime": invisible, "reviveQid": POP_ORDER_REVIVE_QUEUE if order else 0,
              "restNum": _rest(broker, group, topic, queue_ids)}
    if not popped:
        return RemotingCommand.create_response(cmd, ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", header)
    header.update(_offset_infos(popped, order=order))
    broker.stats.pulled(len(popped))
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, "FOUND", header,
                                           b"".join(p.message.raw for p in popped))


def _pop_plan(broker, cmd):
    group, topic = cmd.get_str("consumerGroup"), cmd.get_str("topic")
    cfg = broker.groups.get(group, create=True)
    if cfg is None:
        return _refuse(cmd, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"subscription group [{group}] does not exist")
    if not cfg.consume_enable:
        return _refuse(cmd, ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
    tc = broker.topics.get(topic)
    if tc is None:
        return _refuse(cmd, ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist, apply first please!")
    if not tc.is_readable():
        return _refuse(cmd, ResponseCode.NO_PERMISSION, f"the topic[{topic}] peeking message is forbidden")
    qid = cmd.get_int("queueId", -1)
    if qid >= tc.read_queue_nums:
        return _refuse(cmd, ResponseCode.INVALID_PARAMETER, f"queueId[{qid}] is illegal, topic:[{topic}] "
                                                            f"topicConfig.readQueueNums:[{tc.read_queue_nums}]")
    max_nums = cmd.get_int("maxMsgNums", MAX_POP_MESSAGES)
    if not 1 <= max_nums <= MAX_POP_MESSAGES:
        return _refuse(cmd, ResponseCode.INVALID_PARAMETER, f"maxMsgNums {max_nums} is outside 1..{MAX_POP_MESSAGES}")
    invisible = cmd.get_int("invisibleTime", 60_000)
    if not 1 <= invisible <= MAX_INVISIBLE_MS:
        return _refuse(cmd, ResponseCode.INVALID_PARAMETER, f"invisibleTime {invisible} ms is outside "
                                                            f"1..{MAX_INVISIBLE_MS}")
    wait_s = max(0.0, min(cmd.get_int("pollTime", 0) / 1000, MAX_SUSPEND_S))
    try:
        sub = subscription(cmd.get_str("exp", "*"), cmd.get_str("expType", "TAG"))
    except FilterError as exc:
        return _refuse(cmd, ResponseCode.SUBSCRIPTION_PARSE_FAILED, f"parse the consumer's subscription failed: {exc}")
    if sub.sql is not None and not broker.settings.enable_property_filter:
        return _refuse(cmd, ResponseCode.SYSTEM_ERROR, property_filter_refusal(sub.expression_type))
    queue_ids = list(range(tc.read_queue_nums)) if qid < 0 else [qid]
    return group, topic, queue_ids, max_nums, invisible, wait_s, (None if sub.is_all else sub)


def _mark(p: Popped) -> str:
    return RETRY_MARK if p.retry else NORMAL_MARK


def _offset_infos(popped: list[Popped], *, order: bool) -> dict[str, str]:
    by_queue: dict[tuple[str, int], list[int]] = {}
    for p in popped:
        by_queue.setdefault((_mark(p), p.key.queue_id), []).append(p.entry.offset)
    out = {"startOffsetInfo": ";".join(f"{m} {q} {min(offs)}" for (m, q), offs in by_queue.items()),
           "msgOffsetInfo": ";".join(f"{m} {q} {','.join(map(str, offs))}" for (m, q), offs in by_queue.items())}
    if order:
        out["orderCountInfo"] = ";".join(f"{_mark(p)} qo{p.key.queue_id}%{p.entry.offset} {p.entry.attempt - 1}"
                                         for p in popped)
    return out


def _rest(broker, group: str, topic: str, queue_ids: list[int]) -> int:
    """Messages not yet popped in the queues (RocketMQ's restNum, for the client's statistics)."""
    store, queues = broker.store, broker.pop.state.queues
    rest = 0
    for qid in queue_ids:
        q = queues.get(QueueKey(group, topic, qid))
        rest += max(0, store.max_offset(topic, qid) - (q.next_offset if q is not None else 0))
    return rest


# -- acks ---------------------------------------------------------------------------------------

class _Named:
    """The copy of a message an ack or change names: its queue, offset and deadline."""

    def __init__(self, group: str, topic: str, mark: str, queue_id: int, offset: int, deadline_ms: int):
        if mark != NORMAL_MARK and not topic.startswith("%RETRY%"):
            topic = pop_retry_topic(group, topic)        # a client that names the original topic
        self.key = QueueKey(group, topic, queue_id)
        self.offset, self.deadline_ms = offset, deadline_ms


def _extra(cmd: RemotingCommand) -> list[str]:
    parts = cmd.get_str("extraInfo", "").split(" ")
    if len(parts) < 5 or not all(p.lstrip("-").isdigit() for p in parts[:4]):
        raise ValueError(f"extraInfo {cmd.get_str('extraInfo', '')[:120]!r} is not "
                         "'ckOffset popTime invisibleTime reviveQid mark ...'")
    return parts


def _named_by_header(cmd: RemotingCommand) -> _Named:
    parts = _extra(cmd)
    return _Named(cmd.get_str("consumerGroup"), cmd.get_str("topic"), parts[4], cmd.get_int("queueId"),
                  cmd.get_int("offset"), int(parts[1]) + int(parts[2]))


def _find(broker, named: _Named) -> tuple[InFlight | None, str]:
    """The in-flight copy *named* names, or None and why not."""
    q = broker.pop.state.queues.get(named.key)
    e = q.inflight.get(named.offset) if q is not None else None
    if e is not None and e.deadline_ms == named.deadline_ms:
        return e, ""
    if e is not None:
        return None, "replaced: its invisible time was changed, or it was popped again, since this copy"
    if named.deadline_ms > broker.pop.state.now_ms():
        return None, "acked"
    return None, "its invisible time is over: it is delivered again"


def _ack_one(broker, named: _Named) -> str | None:
    """Ack the copy *named* names; None when done (or done before), else why not."""
    e, why = _find(broker, named)
    if e is not None:
        broker.pop.popper.finish(named.key, e)
        return None
    return None if why == "acked" else why


async def ack_message(broker, cmd: RemotingCommand) -> RemotingCommand:
    try:
        named = _named_by_header(cmd)
    except ValueError as exc:
        return _refuse(cmd, ResponseCode.INVALID_PARAMETER, str(exc))
    async with broker.pop.popper.lock:
        why = _ack_one(broker, named)
    if why is not None:
        return _refuse(cmd, ResponseCode.NO_MESSAGE, f"{named.key.topic}@{named.key.queue_id} offset {named.offset}: "
                                                     f"{why}")
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)


def batch_acks(body: bytes | None) -> list[dict]:
    """The ``acks`` of a BatchAckMessageRequestBody (also read by the ACL table for the names)."""
    data = fastjson.loads(body or b"{}")
    acks = data.get("acks") if isinstance(data, dict) else None
    if not isinstance(acks, list):
        raise ValueError("BatchAckMessageRequestBody has no acks list")
    return [a for a in acks if isinstance(a, dict)]


def _bits(encoded) -> list[int]:
    """Indexes set in a java.util.BitSet's toByteArray (little-endian), as fastjson writes it (base64)."""
    raw = base64.b64decode(encoded) if isinstance(encoded, str) else bytes(encoded or ())
    return [8 * i + b for i, byte in enumerate(raw) for b in range(8) if byte >> b & 1]


async def batch_ack(broker, cmd: RemotingCommand) -> RemotingCommand:
    try:
        acks = batch_acks(cmd.body)
        plans = []
        for a in acks:
            get = lambda long, short: a.get(short, a.get(long))        # noqa: E731 (fastjson's names, or Java's)
            group, topic, mark = str(get("consumerGroup", "c")), str(get("topic", "t")), str(get("retry", "r") or "0")
            start, qid = int(get("startOffset", "so")), int(get("queueId", "q"))
            deadline = int(get("popTime", "pt")) + int(get("invisibleTime", "it"))
            plans += [_Named(group, topic, mark, qid, start + i, deadline) for i in _bits(get("bitSet", "b"))]
    except (ValueError, TypeError) as exc:
        return _refuse(cmd, ResponseCode.INVALID_PARAMETER, f"bad BatchAckMessageRequestBody: {exc}")
    if not plans:
        return _refuse(cmd, ResponseCode.NO_MESSAGE, "the batch acks nothing")
    async with broker.pop.popper.lock:
        for named in plans:
            _ack_one(broker, named)            # as RocketMQ: one answer for the batch
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)


async def change_invisible(broker, cmd: RemotingCommand) -> RemotingCommand:
    try:
        named = _named_by_header(cmd)
    except ValueError as exc:
        return _refuse(cmd, ResponseCode.INVALID_PARAMETER, str(exc))
    invisible = cmd.get_int("invisibleTime", -1)
    if not 0 <= invisible <= MAX_INVISIBLE_MS:
        return _refuse(cmd, ResponseCode.INVALID_PARAMETER, f"invisibleTime {invisible} ms is outside "
                                                            f"0..{MAX_INVISIBLE_MS}")
    popper = broker.pop.popper
    async with popper.lock:
        e, why = _find(broker, named)
        if e is None:
            return _refuse(cmd, ResponseCode.NO_MESSAGE, f"{named.key.topic}@{named.key.queue_id} offset "
                                                         f"{named.offset}: {why}")
        e2 = popper.change(named.key, e, invisible)
    revive_qid = POP_ORDER_REVIVE_QUEUE if popper.is_fifo(named.key.group) else 0
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, None, {
        "popTime": e2.deadline_ms - invisible, "invisibleTime": invisible, "reviveQid": revive_qid})
