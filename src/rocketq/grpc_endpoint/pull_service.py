"""PullMessage, UpdateOffset, GetOffset and QueryOffset: a pull consumer's RPCs over one queue.

Apache RocketMQ declares these RPCs (``apache/rocketmq-apis`` PR #67, "support pull consumer") but
its proxy does not serve them: ``GrpcMessagingApplication`` has no override, so calls end
UNIMPLEMENTED (apache/rocketmq#6756 was closed unfinished; #10434 and PR #10509 propose GetOffset and
QueryOffset), and no official 5.x client calls them yet.  rocketq serves them over the machinery of
remoting's PULL_MESSAGE (:mod:`rocketq.broker.pull`, :mod:`rocketq.broker.long_polling`) and the
one consumer offset table (``config/consumerOffset.json``), so an offset committed here is what
QUERY_CONSUMER_OFFSET, ``rocketq group lag`` and remoting consumers see, and the reverse.

PullMessage streams one status, then one response per message, then ``next_offset`` - the shape of
the proxy's ``ReceiveMessageResponseStreamWriter`` with the next offset in place of the delivery
timestamp; a request refused before reading gets the status only.  The store's answer is mapped
as remoting maps it (``status_code``, after RocketMQ's ``PullMessageProcessor``), then as RocketMQ's
client reads those codes (``PullAPIWrapper#processPullResult``):

===========================================  =================================================
remoting code (store status)                 PullMessage answers
===========================================  =================================================
SUCCESS (FOUND)                              OK, the messages, ``next_offset``
PULL_NOT_FOUND (nothing at the offset yet)   holds the call (long polling) until a message
                                             arrives in the queue or ``long_polling_timeout``
                                             passes; then MESSAGE_NOT_FOUND, ``next_offset``
PULL_RETRY_IMMEDIATELY (no message matches   reads on from the next offset (at most
the tags, or they expired meanwhile)         ``MAX_SCAN_ROUNDS`` reads); then as above
PULL_OFFSET_MOVED (offset below the min or   ILLEGAL_OFFSET, ``next_offset`` = where to go on
past the max offset, queue gone)             (RocketMQ's OFFSET_ILLEGAL pull status)
the same on a slave                          MESSAGE_NOT_FOUND at the offset asked: a slave
                                             may only lag (RocketMQ's offsetCheckInSlave=false)
===========================================  =================================================

Refused before reading: a bad or unknown group (ILLEGAL_CONSUMER_GROUP, CONSUMER_GROUP_NOT_FOUND,
FORBIDDEN when it may not consume), topic (ILLEGAL_TOPIC, TOPIC_NOT_FOUND, FORBIDDEN when not
readable), a queue id that is not one of the topic's read queues (BAD_REQUEST), a negative offset
(ILLEGAL_OFFSET), a batch size below 1 (BAD_REQUEST; above ``MAX_PULL_MESSAGES`` it is cut), a malformed
SQL92 filter (ILLEGAL_FILTER_EXPRESSION with its position; NOT_IMPLEMENTED without
``enablePropertyFilter``) and a negative polling time (ILLEGAL_POLLING_TIME).  An SQL92 filter is
evaluated on each message's properties (:mod:`rocketq.broker.filtered_reads`).

UpdateOffset commits an offset between 0 and the queue's max offset (else ILLEGAL_OFFSET; RocketMQ's
remoting does not check the upper end, a commit past it would only hide messages not yet written).
GetOffset answers OFFSET_NOT_FOUND for a queue the group never committed (rocketmq-apis issue #76).
QueryOffset answers the queue's min offset (BEGINNING), max offset (END), or the first offset stored
at or after a time (TIMESTAMP, SEARCH_OFFSET_BY_TIMESTAMP's lower boundary; BAD_REQUEST without one).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from rocketq.broker import filtered_reads
from rocketq.broker.pull import MAX_PULL_MESSAGES, status_code
from rocketq.filter import Subscription
from rocketq.grpc_endpoint.consumer_service import ConsumerService, long_polling_s
from rocketq.grpc_endpoint.convert import v2_fields
from rocketq.grpc_endpoint.protocol import Code, V2Error, pb, spb, status, timestamp_ms
from rocketq.grpc_endpoint.cluster_route import check_owner
from rocketq.grpc_endpoint.route import topic_config
from rocketq.grpc_endpoint.settings import EndpointSettings
from rocketq.remoting import ResponseCode
from rocketq.store.results import GetStatus

MAX_SCAN_ROUNDS = 16             # reads past messages of other tags in one call, then the client goes on


@dataclass(frozen=True, slots=True)
class _PullPlan:
    topic: str
    queue_id: int
    offset: int
    batch: int
    sub: Subscription | None
    wait_s: float
    namespace: str


@dataclass(frozen=True, slots=True)
class _Pulled:
    code: int
    messages: list
    next_offset: int
    reason: str = ""


class PullService:
    def __init__(self, broker, consumers: ConsumerService, settings: EndpointSettings):
        self._broker, self._consumers, self._settings = broker, consumers, settings

    # -- PullMessage -----------------------------------------------------------------------------

    async def pull(self, req, context):
        try:
            plan = self._plan(req, context)
        except V2Error as exc:
            yield spb.PullMessageResponse(status=exc.to_status())
            return
        got = await self._read(plan)
        yield spb.PullMessageResponse(status=status(got.code, got.reason or pb.Code.Name(got.code)))
        for m in got.messages:
            yield spb.PullMessageResponse(message=v2_fields(m, topic=plan.topic, namespace=plan.namespace))
        yield spb.PullMessageResponse(next_offset=got.next_offset)

    def _plan(self, req, context) -> _PullPlan:
        self._consumers.group(req.group.name)
        topic, qid = self._queue(req.message_queue)
        if not topic_config(self._broker, topic, create=False).is_readable():
            raise V2Error(Code.FORBIDDEN, f"topic {topic!r} is not readable")
        if req.offset < 0:
            raise V2Error(Code.ILLEGAL_OFFSET, f"offset {req.offset} is negative")
        if req.batch_size <= 0:
            raise V2Error(Code.BAD_REQUEST, f"batch size {req.batch_size} is not positive")
        sub = self._consumers.filter_of(req.filter_expression) if req.HasField("filter_expression") else None
        wait_s = long_polling_s(req, context, self._settings)
        return _PullPlan(topic, qid, req.offset, min(req.batch_size, MAX_PULL_MESSAGES), sub, wait_s,
                         req.message_queue.topic.resource_namespace)

    def _seeing_every_answered_send(self):
        """The store, with every send answered before this request dispatched into its queues (the broker
        coalesces single sends' dispatch while nobody waits, store/dispatcher.py); the remoting side does
        the same before every request that is not a send (Broker._serve)."""
        store = self._broker.store
        store.dispatcher.catch_up()
        return store

    async def _read(self, p: _PullPlan) -> _Pulled:
        store, polling = self._seeing_every_answered_send(), self._broker.long_polling
        scan = filtered_reads.scan_units_for(p.batch, self._broker.settings.max_filter_message_size)
        loop = asyncio.get_running_loop()
        give_up = loop.time() + p.wait_s
        offset = p.offset
        for _ in range(MAX_SCAN_ROUNDS):
            res = filtered_reads.read(store, p.topic, p.queue_id, offset, p.batch, p.sub, scan_units=scan)
            code = status_code(res.status, offset)
            if code == ResponseCode.SUCCESS:
                tags = p.sub.tags if p.sub is not None else None
                found = [m for m in res.messages if tags is None or m.tags in tags]   # hash collisions out
                if found:
                    self._broker.stats.pulled(len(found), len(res.raw), topic=p.topic)
                    return _Pulled(Code.OK, found, res.next_begin_offset)
                code = ResponseCode.PULL_RETRY_IMMEDIATELY
            if code == ResponseCode.PULL_OFFSET_MOVED:
                return self._moved(res, offset)
            if code == ResponseCode.PULL_RETRY_IMMEDIATELY or res.next_begin_offset > offset:
                offset = res.next_begin_offset          # past what no one here wants (or a hole): read on
                if loop.time() >= give_up:
                    break
                await asyncio.sleep(0)                  # a long scan does not hold the loop
                continue
            left = give_up - loop.time()
            if left <= 0 or not await polling.wait(p.topic, p.queue_id, offset, left,
                                                   lambda: store.max_offset(p.topic, p.queue_id)):
                break
        return _Pulled(Code.MESSAGE_NOT_FOUND, [], offset, "no new message")

    def _moved(self, res, offset: int) -> _Pulled:
        replication = getattr(self._broker, "replication", None)
        if getattr(replication, "role", "") == "SLAVE":
            return _Pulled(Code.MESSAGE_NOT_FOUND, [], offset, "no new message (this slave may lag its master)")
        nxt = 0 if res.status == GetStatus.NO_MATCHED_LOGIC_QUEUE else res.next_begin_offset
        return _Pulled(Code.ILLEGAL_OFFSET, [], nxt, f"offset {offset} is outside the queue's "
                                                     f"{res.min_offset}..{res.max_offset} ({res.status}); go on at {nxt}")

    # -- offsets -----------------------------------------------------------------------------------

    async def update_offset(self, req):
        try:
            group = self._consumers.group(req.group.name)
            topic, qid = self._queue(req.message_queue)
            top = self._seeing_every_answered_send().max_offset(topic, qid)
            if not 0 <= req.offset <= top:
                raise V2Error(Code.ILLEGAL_OFFSET, f"offset {req.offset} is outside 0..{top} (the queue's max offset)")
        except V2Error as exc:
            return spb.UpdateOffsetResponse(status=exc.to_status())
        self._broker.offsets.commit(group, topic, qid, req.offset)
        return spb.UpdateOffsetResponse(status=status())

    async def get_offset(self, req):
        try:
            group = self._consumers.group(req.group.name)
            topic, qid = self._queue(req.message_queue)
        except V2Error as exc:
            return spb.GetOffsetResponse(status=exc.to_status())
        offset = self._broker.offsets.query(group, topic, qid)
        if offset < 0:
            return spb.GetOffsetResponse(status=status(Code.OFFSET_NOT_FOUND, f"group {group!r} has no offset for "
                                                                              f"queue {qid} of topic {topic!r}"))
        return spb.GetOffsetResponse(status=status(), offset=offset)

    async def query_offset(self, req):
        store = self._seeing_every_answered_send()
        try:
            topic, qid = self._queue(req.message_queue)
            policy = req.query_offset_policy
            if policy == pb.QueryOffsetPolicy.BEGINNING:
                offset = store.min_offset(topic, qid)
            elif policy == pb.QueryOffsetPolicy.END:
                offset = store.max_offset(topic, qid)
            elif policy == pb.QueryOffsetPolicy.TIMESTAMP:
                if not req.HasField("timestamp"):
                    raise V2Error(Code.BAD_REQUEST, "query offset policy TIMESTAMP needs a timestamp")
                offset = store.search_offset_by_time(topic, qid, timestamp_ms(req.timestamp))
            else:
                raise V2Error(Code.BAD_REQUEST, f"unknown query offset policy {policy}")
        except V2Error as exc:
            return spb.QueryOffsetResponse(status=exc.to_status())
        return spb.QueryOffsetResponse(status=status(), offset=offset)

    def _queue(self, mq: pb.MessageQueue) -> tuple[str, int]:
        """The topic and queue id *mq* names: an existing topic and one of its read queues."""
        check_owner(self._broker, mq)
        tc = topic_config(self._broker, mq.topic.name, create=False)
        if not 0 <= mq.id < tc.read_queue_nums:
            raise V2Error(Code.BAD_REQUEST, f"queue {mq.id} is not a read queue of topic {tc.topic_name!r} "
                                            f"(0..{tc.read_queue_nums - 1})")
        return tc.topic_name, mq.id
