"""ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue.

ReceiveMessage streams what the proxy streams (``ReceiveMessageResponseStreamWriter``): a status,
then one response per message, then the delivery timestamp; when nothing arrives within the long
polling time, MESSAGE_NOT_FOUND and the timestamp.  The queue id in the request is not trusted:
a receive pops across all readable queues of the topic.  A client that goes away mid-receive
loses nothing: what was popped for it is in flight and comes back after its invisible time.
"""

from __future__ import annotations

import asyncio
import logging
import time

from rocketq.common.validation import topic_error
from rocketq.grpc_endpoint.pop_state import Handle
from rocketq.grpc_endpoint.popping import Popper, pop_retry_topic
from rocketq.grpc_endpoint.protocol import Code, V2Error, duration_ms, ms_timestamp, spb, status
from rocketq.grpc_endpoint.route import topic_config
from rocketq.grpc_endpoint.sessions import metadata
from rocketq.grpc_endpoint.settings import EndpointSettings

log = logging.getLogger(__name__)

DEADLINE_MARGIN_S = 0.5          # answer this long before the client's deadline


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

    def invisible_ms(self, value_ms: int, *, receiving: bool = True) -> int:
        """The proxy's bounds: a receive asks for at least minInvisibleTimeMillsForRecv; a change of invisible
        duration only for at most the maximum (a push consumer's nack asks for its retry backoff, 1 s first)."""
        s = self._settings
        low = s.min_invisible_ms if receiving else 0
        if not low <= value_ms <= s.max_invisible_ms:
            raise V2Error(Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration {value_ms} ms is outside "
                                                       f"{low}..{s.max_invisible_ms} ms")
        return value_ms

    @staticmethod
    def tags(expression) -> set[str] | None:
        if expression.type == 2:                    # FilterType.SQL
            raise V2Error(Code.ILLEGAL_FILTER_EXPRESSION, "SQL92 filter expressions are not supported by rocketq")
        text = expression.expression.strip()
        if not text or text == "*":
            return None
        return {t.strip() for t in text.split("||") if t.strip()}

    # -- ReceiveMessage --------------------------------------------------------------------------

    async def receive(self, req, context):
        try:
            plan = self._plan(req, context)
        except V2Error as exc:
            yield spb.ReceiveMessageResponse(status=exc.to_status())
            return
        group, topic, queue_ids, batch, invisible, tags, wait_s, renew_for = plan
        loop = asyncio.get_running_loop()
        give_up = loop.time() + wait_s
        watched = [topic, pop_retry_topic(group, topic)]
        messages = []
        while True:
            fut = self._popper.watch(watched)
            try:
                async with self._popper.lock:
                    messages = await self._popper.pop(group, topic, queue_ids, batch=batch, invisible_ms=invisible,
                                                      tags=tags, namespace=req.group.resource_namespace,
                                                      renew_for=renew_for)
                left = give_up - loop.time()
                if messages or left <= 0:
                    break
                await asyncio.wait({fut}, timeout=min(left, self._next_expiry_s()))
            except V2Error as exc:
                yield spb.ReceiveMessageResponse(status=exc.to_status())
                return
            finally:
                self._popper.unwatch(watched, fut)
        if messages:
            yield spb.ReceiveMessageResponse(status=status())
            for m in messages:
                yield spb.ReceiveMessageResponse(message=m)
        else:
            yield spb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
        yield spb.ReceiveMessageResponse(delivery_timestamp=ms_timestamp(int(time.time() * 1000)))

    def _next_expiry_s(self) -> float:
        nxt = self._popper.state.next_deadline_ms()
        return 1.0 if nxt is None else max(0.01, min(1.0, nxt / 1000 - time.time() + 0.01))

    def _plan(self, req, context):
        group = self.group(req.group.name)
        topic = req.message_queue.topic.name
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
        tags = self.tags(req.filter_expression) if req.HasField("filter_expression") else None
        wait_s = long_polling_s(req, context, self._settings)
        renew_for = None
        if req.auto_renew and not req.HasField("invisible_duration"):
            renew_for = metadata(context).get("x-mq-client-id") or None
        return group, topic, queue_ids, batch, invisible, tags, wait_s, renew_for

    # -- acks ------------------------------------------------------------------------------------

    async def ack(self, req):
        try:
            group = self.group(req.group.name)
            _check_topic(req.topic.name)
        except V2Error as exc:
            return spb.AckMessageResponse(status=exc.to_status())
        entries = []
        async with self._popper.lock:
            for entry in req.entries:
                try:
                    key, e = self._popper.in_flight(group, req.topic.name, entry.receipt_handle)
                    self._popper.finish(key, e)
                    st = status()
                except V2Error as exc:
                    st = exc.to_status()
                entries.append(spb.AckMessageResultEntry(message_id=entry.message_id,
                                                         receipt_handle=entry.receipt_handle, status=st))
        return spb.AckMessageResponse(status=_overall(entries), entries=entries)

    async def change_invisible(self, req):
        try:
            group = self.group(req.group.name)
            _check_topic(req.topic.name)
            invisible = self.invisible_ms(duration_ms(req.invisible_duration), receiving=False)
            async with self._popper.lock:
                key, e = self._popper.in_flight(group, req.topic.name, req.receipt_handle)
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
                key, e = self._popper.in_flight(group, req.topic.name, req.receipt_handle)
                m = self._popper.read(key, e.offset)
                if m is None:
                    self._popper.finish(key, e)
                else:
                    await self._popper.dead_letter(key, e, m)
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


def _check_topic(topic: str) -> None:
    err = topic_error(topic)
    if err:
        raise V2Error(Code.ILLEGAL_TOPIC, err)


def _overall(entries) -> object:
    if not entries:
        return status(Code.BAD_REQUEST, "the request holds no entry")
    if len(entries) == 1:
        return entries[0].status
    if all(e.status.code == Code.OK for e in entries):
        return status()
    return status(Code.MULTIPLE_RESULTS, "some entries failed; see each entry's status")
