"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue.

ReceiveMessage streams what the proxy streams (``ReceiveMessageResponseStreamWriter``): a status,
then one response per message, then the delivery timestamp; when nothing arrives within the long
polling time, MESSAGE_NOT_FOUND and the timestamp.  The queue id in the request is not trusted:
a receive pops across all readable queues of the topic.  A client that goes away mid-receive
loses nothing: what was popped for it is in flight and comes back after its invisible time.
"""

from __future__ import annotations

import logging
import time

from rocketq.broker.pop.pop_state import Handle
from rocketq.broker.pop.popping import PopError, Popper
from rocketq.common.validation import topic_error
from rocketq.filter import Subscription
from rocketq.grpc_endpoint.convert import v2_fields
from rocketq.grpc_endpoint.filtering import grpc_filter
from rocketq.grpc_endpoint.protocol import Code, V2Error, duration_ms, ms_timestamp, spb, status
from rocketq.grpc_endpoint.cluster_route import check_owner
from rocketq.grpc_endpoint.route import topic_config
from rocketq.grpc_endpoint.sessions import metadata
from rocketq.grpc_endpoint.settings import EndpointSettings

log = logging.getLogger(__name__)

DEADLINE_MARGIN_S = 0.5          # answer this long before the client's deadline
_OK_STATUS = {"code": Code.OK, "message": "OK"}      # status() as the fields a response is built from


class ConsumerService:
    def __init__(self, broker, popper: Popper, settings: EndpointSettings):
        self._broker, self._popper, self._settings = broker, popper, settings

    # -- validation ----------------------------------------------------------------------------

    def group(self, name: str) -> str:
        if not name or topic_error(name):
            raise V2Error(Code.ILLEGAL_CONSUMER_GROUP, f"consumer group {name!r} is empty or has illegal characters")
        cfg = self._broker.groups.get(name, create=True)
        if cfg is None:
            raise V2Error(Code.CONSUMER_GROUP_NOT_FOUND, f"consumer group {name!r} does not exist")
        if not cfg.consume_enable:
            raise V2Error(Code.FORBIDDEN, f"consumer group {name!r} may not consume (consumeEnable=false)")
        return name

    def invisible_ms(self, value_ms: int, *, least_ms: int | None = None) -> int:
        """*value_ms* if within *least_ms* (default: the receive minimum) .. the maximum."""
        s = self._settings
        least = s.min_invisible_ms if least_ms is None else least_ms
        if not least <= value_ms <= s.max_invisible_ms:
            raise V2Error(Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration {value_ms} ms is outside "
                                                       f"{least}..{s.max_invisible_ms} ms")
        return value_ms

    def filter_of(self, expression) -> Subscription | None:
        """The request's FilterExpression as a subscription (None: everything); a bad SQL92
        selector is ILLEGAL_FILTER_EXPRESSION naming the position, SQL92 on a broker without
        ``enablePropertyFilter`` NOT_IMPLEMENTED."""
        return grpc_filter(self._broker, expression)

    # -- ReceiveMessage --------------------------------------------------------------------------

    async def receive(self, req, context):
        try:
            plan = self._plan(req, context)
        except V2Error as exc:
            yield spb.ReceiveMessageResponse(status=exc.to_status())
            return
        group, topic, queue_ids, batch, invisible, sub, wait_s, renew_for = plan
        try:
            popped = await self._popper.receive(group, topic, queue_ids, batch=batch, invisible_ms=invisible, sub=sub,
                                                wait_s=wait_s, renew_for=renew_for)
        except PopError as exc:
            yield spb.ReceiveMessageResponse(status=status(Code.INTERNAL_SERVER_ERROR, exc.message))
            return
        if popped:
            yield spb.ReceiveMessageResponse(status=status())
            namespace = req.group.resource_namespace
            for p in popped:
                yield spb.ReceiveMessageResponse(message=v2_fields(
                    p.message, topic=topic, namespace=namespace, receipt_handle=p.handle(), invisible_ms=invisible,
                    attempt=p.entry.attempt))
        else:
            yield spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
        yield spb.ReceiveMessageResponse(delivery_timestamp=ms_timestamp(int(time.time() * 1000)))

    def _plan(self, req, context):
        group = self.group(req.group.name)
        topic = req.message_queue.topic.name
        check_owner(self._broker, req.message_queue)
        tc = topic_config(self._broker, topic, create=False)
        if not tc.is_readable():
            raise V2Error(Code.FORBIDDEN, f"topic {topic!r} is not readable")
        queue_ids = list(range(tc.read_queue_nums))
        if req.batch_size <= 0:
            raise V2Error(Code.BAD_REQUEST, f"batch size {req.batch_size} is not positive")
        batch = min(req.batch_size, self._settings.max_receive_batch)
        if req.HasField("invisible_duration"):
            invisible = self.invisible_ms(duration_ms(req.invisible_duration))
        elif req.auto_renew:
            invisible = self._settings.default_invisible_ms
        else:
            raise V2Error(Code.ILLEGAL_INVISIBLE_TIME, "a receive without auto-renew needs an invisible duration")
        sub = self.filter_of(req.filter_expression) if req.HasField("filter_expression") else None
        wait_s = long_polling_s(req, context, self._settings)
        renew_for = None
        if req.auto_renew and not req.HasField("invisible_duration"):
            renew_for = metadata(context).get("x-mq-client-id") or None
        return group, topic, queue_ids, batch, invisible, sub, wait_s, renew_for

    # -- acks ------------------------------------------------------------------------------------

    async def ack(self, req):
        try:
            group = self.group(req.group.name)
            _check_topic(req.topic.name)
        except V2Error as exc:
            return spb.AckMessageResponse(status=exc.to_status())
        entries = []                    # as dicts: the response is built once, from them
        async with self._popper.lock:
            for entry in req.entries:
                try:
                    found = _in_flight(self._popper, group, req.topic.name, entry.receipt_handle, repeat_ok=True)
                    if found is not None:
                        self._popper.finish(*found)
                    st = _OK_STATUS
                except V2Error as exc:
                    st = {"code": exc.code, "message": exc.message}
                entries.append({"message_id": entry.message_id, "receipt_handle": entry.receipt_handle, "status": st})
        return spb.AckMessageResponse(status=_overall(entries), entries=entries)

    async def change_invisible(self, req):
        try:
            group = self.group(req.group.name)
            _check_topic(req.topic.name)
            # any time from 0 up (RocketMQ's proxy holds only receives to its minimum): a push consumer's nack
            # asks for its backoff, which starts at 1 s, and retries a refused nack forever
            invisible = self.invisible_ms(duration_ms(req.invisible_duration), least_ms=0)
            async with self._popper.lock:
                key, e = _in_flight(self._popper, group, req.topic.name, req.receipt_handle)
                e2 = self._popper.change(key, e, invisible)
        except V2Error as exc:
            return spb.ChangeInvisibleDurationResponse(status=exc.to_status())
        new = Handle(key.topic != req.topic.name, key.queue_id, e2.offset, e2.version, e2.deadline_ms)
        return spb.ChangeInvisibleDurationResponse(status=status(), receipt_handle=new.encode())

    async def forward_to_dlq(self, req):
        try:
            group = self.group(req.group.name)
            _check_topic(req.topic.name)
            async with self._popper.lock:
                key, e = _in_flight(self._popper, group, req.topic.name, req.receipt_handle)
                m = self._popper.read(key, e.offset)
                if m is None:
                    self._popper.finish(key, e)
                else:
                    await self._popper.dead_letter(key, e, m)
        except PopError as exc:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=status(Code.INTERNAL_SERVER_ERROR, exc.message))
        except V2Error as exc:
            return spb.ForwardMessageToDeadLetterQueueResponse(status=exc.to_status())
        return spb.ForwardMessageToDeadLetterQueueResponse(status=status())


def long_polling_s(req, context, settings: EndpointSettings) -> float:
    """How long a receive or pull may hold: the request's long-polling timeout (or the default),
    at most the server's maximum, ending ``DEADLINE_MARGIN_S`` before the client's deadline."""
    wait_ms = duration_ms(req.long_polling_timeout) if req.HasField("long_polling_timeout") \
        else settings.default_long_polling_ms
    if wait_ms < 0:
        raise V2Error(Code.ILLEGAL_POLLING_TIME, f"long polling timeout {wait_ms} ms is negative")
    wait_s = min(wait_ms, settings.max_long_polling_ms) / 1000
    remaining = context.time_remaining() if context is not None else None
    if remaining is not None:
        wait_s = max(0.0, min(wait_s, remaining - DEADLINE_MARGIN_S))
    return wait_s


def _in_flight(popper: Popper, group: str, topic: str, receipt_handle: str, *, repeat_ok: bool = False):
    """:meth:`Popper.in_flight`, its refusals as INVALID_RECEIPT_HANDLE."""
    try:
        return popper.in_flight(group, topic, receipt_handle, repeat_ok=repeat_ok)
    except PopError as exc:
        raise V2Error(Code.INVALID_RECEIPT_HANDLE, exc.message) from None


def _check_topic(topic: str) -> None:
    err = topic_error(topic)
    if err:
        raise V2Error(Code.ILLEGAL_TOPIC, err)


def _overall(entries: list[dict]) -> dict:
    if not entries:
        return {"code": Code.BAD_REQUEST, "message": "the request holds no entry"}
    if len(entries) == 1:
        return entries[0]["status"]
    if all(e["status"]["code"] == Code.OK for e in entries):
        return _OK_STATUS
    return {"code": Code.MULTIPLE_RESULTS, "message": "some entries failed; see each entry's status"}
