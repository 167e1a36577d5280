"""SendMessage, EndTransaction and RecallMessage.

The broker picks the queue (the Python client leaves ``queue_id`` 0, the proxy ignores it too):
a FIFO message goes to queue ``|hash(message group)| % writeQueueNums`` (Java ``String.hashCode``),
so one message group keeps one queue and its order; other messages go round-robin.
By type:

* NORMAL / FIFO: stored under the topic;
* DELAY: ``delivery_timestamp`` in the past or now is stored at once; a later one goes to the
  broker's timer (:mod:`rocketq.broker.timer`), at most ``max_delay_ms`` (the proxy's
  ``maxDelayTimeMills``) and the broker's ``timerMaxDelaySec`` ahead (else ILLEGAL_DELIVERY_TIME;
  UNSUPPORTED when ``timerWheelEnable`` is off), and its entry carries a recall handle;
* TRANSACTION: stored as a half message (``TRAN_MSG``, producer group ``GRPC_TX_<topic>``) in
  RocketMQ's half topic; the send result's transaction id is the half's offset message id, which
  EndTransaction decodes to find it.  Commit and rollback go through the remoting path's
  :func:`rocketq.broker.transactions.end_transaction`, so both protocols resolve halves alike.

Each message answers one ``SendResultEntry``; validation failures use the v2 codes
(ILLEGAL_TOPIC, TOPIC_NOT_FOUND, MESSAGE_BODY_TOO_LARGE, ...).

RecallMessage takes that handle (RocketMQ 5.3's ``RecallMessageHandle`` v1 format) and tells the
timer to drop the message (:meth:`rocketq.broker.timer.Timer.recall`), answering its message id.
The checks are ``RecallMessageProcessor``'s; RocketMQ's proxy answers most of its refusals
INTERNAL_SERVER_ERROR (it has no mapping for the broker's ILLEGAL_OPERATION), rocketq names them:
a handle that does not decode, is for another topic or broker, or is due beyond
``timerMaxDelaySec`` is BAD_REQUEST; a topic that does not take DELAY messages
MESSAGE_PROPERTY_CONFLICT_WITH_TYPE (the proxy's topic type check); a message already due (so
delivered, or being delivered) NOT_FOUND; a full recall table TOO_MANY_REQUESTS; a slave FORBIDDEN.
As in RocketMQ, a handle naming no scheduled message at all is not detected: the recall is
answered OK and drops nothing.
"""

from __future__ import annotations

import functools
import itertools
import time

from rocketq.broker.timer import RecallRefused
from rocketq.broker.timer_messages import (
    PROPERTY_TIMER_DELIVER_MS,
    RecallHandle,
    TimerMessageIllegal,
    TimerNotEnabled,
    park,
    recall_handle,
    timer_due_ms,
)
from rocketq.broker.transaction_check import PROPERTY_PRODUCER_GROUP
from rocketq.broker.transactions import end_transaction, to_half
from rocketq.common.javahash import java_hash
from rocketq.common.msgid import HostAddress, decode_offset_msg_id
from rocketq.common.sysflag import (
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_REAL_TOPIC,
    TRANS_HALF_TOPIC,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
)
from rocketq.grpc_endpoint.checkback import tx_group
from rocketq.grpc_endpoint.convert import v2_to_message
from rocketq.grpc_endpoint.protocol import Code, V2Error, pb, spb, status, timestamp_ms
from rocketq.grpc_endpoint.route import accepted_types, topic_config
from rocketq.grpc_endpoint.sessions import Sessions, client_id_of
from rocketq.grpc_endpoint.settings import EndpointSettings
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode
from rocketq.store.results import PutStatus

_PUT_CODES = {
    PutStatus.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    PutStatus.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: Code.MESSAGE_PROPERTIES_TOO_LARGE,
    PutStatus.OS_PAGE_CACHE_BUSY: Code.TOO_MANY_REQUESTS,
}
_REPLICATION_CODES = {ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
                      ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE}


# enum values looked up once: protobuf's enum wrapper attribute access is slow on a hot path
_FIFO, _DELAY, _TRANSACTION = pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION
_KIND_LABELS = {_FIFO: "fifo", _DELAY: "delay", _TRANSACTION: "transaction"}    # rocketmq_messages_in_total's
_OK = Code.OK


def fifo_queue(message_group: str, write_queue_nums: int) -> int:
    return abs(java_hash(message_group)) % write_queue_nums


def peer_host(context) -> HostAddress:
    """``ipv4:1.2.3.4:5678`` / ``ipv6:[::1]:5678`` from grpc as a record's born host."""
    peer = context.peer() if context is not None else ""
    return _parse_peer(peer) if isinstance(peer, str) else _LOOPBACK


_LOOPBACK = HostAddress(b"\x7f\x00\x00\x01", 0)


@functools.lru_cache(maxsize=4096)
def _parse_peer(peer: str) -> HostAddress:
    try:
        return HostAddress.parse(peer.partition(":")[2])
    except ValueError:
        return _LOOPBACK


_RECALL_CODES = {"due": Code.NOT_FOUND, "full": Code.TOO_MANY_REQUESTS, "stopped": Code.FORBIDDEN}


class ProducerService:
    def __init__(self, broker, sessions: Sessions, settings: EndpointSettings):
        self._broker, self._sessions, self._settings = broker, sessions, settings
        self._round_robin = itertools.count()

    async def send(self, req, context):
        if not req.messages:
            return spb.SendMessageResponse(status=status(Code.BAD_REQUEST, "the request holds no message"))
        if len(req.messages) > self._settings.max_messages_per_send:
            return spb.SendMessageResponse(status=status(
                Code.BAD_REQUEST, f"{len(req.messages)} messages in one request; at most "
                                  f"{self._settings.max_messages_per_send}"))
        refusal = self._broker.replication.write_refusal()      # a slave, or not the controller's master now
        if refusal is not None:
            return spb.SendMessageResponse(status=status(Code.FORBIDDEN, refusal))
        entries = []
        for msg in req.messages:
            try:
                entries.append(await self._send_one(msg, context))
            except V2Error as exc:
                entries.append(spb.SendResultEntry(status=exc.to_status(),
                                                   message_id=msg.system_properties.message_id))
        if len(entries) == 1 or all(e.status.code == _OK for e in entries):
            overall = entries[0].status if len(entries) == 1 else status()
        else:
            overall = status(Code.MULTIPLE_RESULTS, "some messages failed; see each entry's status")
        return spb.SendMessageResponse(status=overall, entries=entries)

    async def _send_one(self, msg: pb.Message, context) -> spb.SendResultEntry:
        topic = msg.topic.name
        tc = topic_config(self._broker, topic, create=True)
        if not tc.is_writable():
            raise V2Error(Code.FORBIDDEN, f"topic {topic!r} is not writable")
        sp = msg.system_properties
        kind = sp.message_type
        if kind not in accepted_types(tc):
            raise V2Error(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, f"topic {topic!r} does not accept "
                                                                    f"{pb.MessageType.Name(kind)} messages")
        if kind == _FIFO and not sp.HasField("message_group"):
            raise V2Error(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, f"FIFO message {sp.message_id!r} has no group")
        if kind == _DELAY and not sp.HasField("delivery_timestamp"):
            raise V2Error(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, f"DELAY message {sp.message_id!r} has no "
                                                                    "delivery timestamp")
        if kind not in (_FIFO, _DELAY) and (
                sp.HasField("message_group") or sp.HasField("delivery_timestamp")):
            raise V2Error(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, f"{pb.MessageType.Name(kind)} message "
                                                                    f"{sp.message_id!r} has a group or delivery time")
        if kind == _FIFO:
            qid = fifo_queue(sp.message_group, tc.write_queue_nums)
        else:
            qid = next(self._round_robin) % tc.write_queue_nums
        m = v2_to_message(msg, topic=topic, queue_id=qid, born_host=peer_host(context),
                          max_body_bytes=self._broker.store.config.max_message_size)
        recall = ""
        if kind == _DELAY:
            m, recall = self._schedule(m, timestamp_ms(sp.delivery_timestamp))
        elif kind == _TRANSACTION:
            self._sessions.register_tx_producer(client_id_of(context), topic)
            m.properties[PROPERTY_TRANSACTION_PREPARED] = "true"
            m.properties[PROPERTY_PRODUCER_GROUP] = tx_group(topic)
            m = to_half(m)
        r = await self._broker.store.put_message_async(m)
        if r.physical_offset < 0:
            raise V2Error(_PUT_CODES.get(r.status, Code.INTERNAL_SERVER_ERROR),
                          f"storing message {sp.message_id!r} into topic {topic!r} failed: {r.status} {r.error or ''}")
        self._broker.stats.put(topic, 1, r.wrote_bytes, _KIND_LABELS.get(kind, "normal"))
        self._broker.replication.notify()
        code = _PUT_CODES.get(r.status, _OK)
        if r.ok:
            replicated = await self._broker.replication.replicated(r.physical_offset + r.wrote_bytes)
            code = _REPLICATION_CODES.get(replicated, _OK) if replicated is not None else code
        return spb.SendResultEntry(status=status(code, "OK" if code == _OK else str(r.status)),
                                   message_id=sp.message_id, offset=max(r.queue_offset, 0),
                                   transaction_id=r.msg_id if kind == _TRANSACTION else "", recall_handle=recall)

    def _schedule(self, m, due_ms: int):
        """A DELAY message as stored (in the timer topic when due later) and its recall handle ("" if none)."""
        now_ms = int(time.time() * 1000)
        if due_ms > now_ms + self._settings.max_delay_ms:
            raise V2Error(Code.ILLEGAL_DELIVERY_TIME, f"delivery time {due_ms} is more than "
                                                      f"{self._settings.max_delay_ms} ms ahead")
        m.properties[PROPERTY_TIMER_DELIVER_MS] = str(due_ms)
        try:
            due = timer_due_ms(m, self._broker.timer_policy, now_ms=now_ms)
        except TimerNotEnabled as exc:
            raise V2Error(Code.UNSUPPORTED, str(exc)) from None
        except TimerMessageIllegal as exc:
            raise V2Error(Code.ILLEGAL_DELIVERY_TIME, f"delivery time {due_ms}: {exc}") from None
        if due is None:
            return m, ""                                # due already: stored under its topic now
        parked = park(m, due)
        return parked, recall_handle(parked, self._broker.settings.broker_name) or ""

    async def recall(self, req, context):
        topic = req.topic.name
        try:
            tc = topic_config(self._broker, topic, create=False)
            if _DELAY not in accepted_types(tc):
                raise V2Error(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE, f"topic {topic!r} takes no DELAY messages")
            handle = self._recall_handle(req.recall_handle, topic)
            refusal = self._broker.replication.write_refusal()      # a slave, or not the controller's master
            if refusal is not None:
                raise V2Error(Code.FORBIDDEN, refusal)
            r = await self._broker.timer.recall(handle, born_host=peer_host(context))
        except V2Error as exc:
            return spb.RecallMessageResponse(status=exc.to_status())
        except RecallRefused as exc:
            return spb.RecallMessageResponse(status=status(_RECALL_CODES[exc.why], f"recall failed: {exc}"))
        if r.physical_offset < 0:
            return spb.RecallMessageResponse(status=status(_PUT_CODES.get(r.status, Code.INTERNAL_SERVER_ERROR),
                                                           f"recall failed: {r.status} {r.error or ''}"))
        self._broker.replication.notify()
        return spb.RecallMessageResponse(status=status(), message_id=handle.uniq_key)

    def _recall_handle(self, text: str, topic: str) -> RecallHandle:
        try:
            handle = RecallHandle.parse(text)
        except ValueError as exc:
            raise V2Error(Code.BAD_REQUEST, f"recall failed: {exc}") from None
        if handle.topic != topic:
            raise V2Error(Code.BAD_REQUEST, f"recall failed: the handle is for topic {handle.topic!r}, not {topic!r}")
        if handle.broker_name != self._broker.settings.broker_name:
            raise V2Error(Code.BAD_REQUEST, f"recall failed: the handle is for broker {handle.broker_name!r}")
        if handle.due_ms - int(time.time() * 1000) >= self._broker.timer_policy.max_delay_ms:
            raise V2Error(Code.BAD_REQUEST, "recall failed: the handle's timestamp is beyond timerMaxDelaySec")
        return handle

    async def end_transaction(self, req, context):
        try:
            phy = self._half_offset(req)
        except V2Error as exc:
            return spb.EndTransactionResponse(status=exc.to_status())
        if req.resolution not in (pb.TransactionResolution.COMMIT, pb.TransactionResolution.ROLLBACK):
            return spb.EndTransactionResponse(status=status())     # UNKNOWN: wait for the check-back
        kind = TRANSACTION_COMMIT_TYPE if req.resolution == pb.TransactionResolution.COMMIT else \
            TRANSACTION_ROLLBACK_TYPE
        cmd = RemotingCommand.create_request(RequestCode.END_TRANSACTION, {
            "topic": req.topic.name, "producerGroup": tx_group(req.topic.name), "commitOrRollback": kind,
            "commitLogOffset": phy, "tranStateTableOffset": 0, "msgId": req.message_id,
            "transactionId": req.transaction_id,
            "fromTransactionCheck": req.source == pb.TransactionSource.SOURCE_SERVER_CHECK})
        resp = await end_transaction(self._broker, None, cmd)
        if resp is not None and resp.code != ResponseCode.SUCCESS:
            return spb.EndTransactionResponse(status=status(Code.INTERNAL_SERVER_ERROR, resp.remark or "failed"))
        return spb.EndTransactionResponse(status=status())

    def _half_offset(self, req) -> int:
        try:
            _host, phy = decode_offset_msg_id(req.transaction_id)
        except ValueError as exc:
            raise V2Error(Code.INVALID_TRANSACTION_ID, str(exc)) from None
        half = self._broker.store.read_message(phy)
        if half is None or half.topic != TRANS_HALF_TOPIC:
            raise V2Error(Code.INVALID_TRANSACTION_ID, f"transaction id {req.transaction_id!r} names no half message")
        # ACL checked PUB on req.topic: the half message must be that topic's, or any account with PUB
        # somewhere could commit or roll back another topic's transaction
        if half.properties.get(PROPERTY_REAL_TOPIC) != req.topic.name:
            raise V2Error(Code.INVALID_TRANSACTION_ID, f"transaction id {req.transaction_id!r} is not of topic "
                                                       f"{req.topic.name!r}")
        if req.message_id and half.properties.get("UNIQ_KEY") not in (None, req.message_id):
            raise V2Error(Code.INVALID_TRANSACTION_ID, f"transaction id {req.transaction_id!r} belongs to another "
                                                       f"message than {req.message_id!r}")
        return phy
