"""The broker's handlers of SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE.

Theory of operation
-------------------
Every send first passes the broker's gates: a slave refuses it (:mod:`rocketq.broker.replication`),
fast failure refuses it when the store is busy (:mod:`rocketq.broker.flow_control`).  Then:

* a single message whose header the native :func:`~rocketq.broker.send_plain.send_fields` reads and
  that needs no policy is stored by :func:`~rocketq.broker.send_plain.send_plain`; anything else
  (a delay level, a timer property, a transaction's half, an unusual header) takes
  :func:`send_routed`: a ``Message``, :func:`~rocketq.broker.send.route_single`, the store's put;
* a batch is staged by the store's native batch kernel straight from the request body (one call
  per batch, :meth:`~rocketq.store.MessageStore.stage_wire_batch`) and appended in one put; a batch
  holding a delay level goes through ``Message`` objects instead (the store's general path).

Under SYNC_FLUSH the put awaits the shared group commit without blocking the event loop; with
replication on, the answer waits for the slaves as the broker's role asks.  The handlers are
functions of the broker (its store, topics, settings and services), bound by :func:`handlers`.
"""

from __future__ import annotations

import time
from functools import partial

from rocketq._native import BatchFormatError
from rocketq.broker import reply
from rocketq.broker.send import (
    SEND_WAITS_FOR_ROUTE_S,
    STATUS_CODES,
    batch_messages,
    decode_batch,
    host_of,
    message_from_header,
    message_kind,
    queue_for_send,
    route_single,
    send_header,
    terminate_properties,
    topic_for_send,
    unpublished,
)
from rocketq.broker.send_plain import send_fields, send_plain
from rocketq.broker.topic_attributes import NORMAL, message_type_of, type_refusal
from rocketq.common.sysflag import PROPERTY_UNIQ_KEY
from rocketq.remoting import (
    RemotingCommand,
    RemotingCommandError,
    RequestCode,
    ResponseCode,
)
from rocketq.store.results import PutError


def handlers(broker) -> dict:
    """The send request codes mapped to their handlers over *broker*."""
    single = partial(send, broker)
    return {RequestCode.SEND_MESSAGE: single, RequestCode.SEND_MESSAGE_V2: single,
            RequestCode.SEND_BATCH_MESSAGE: partial(send_batch, broker)}


async def send(broker, conn, cmd: RemotingCommand) -> RemotingCommand:
    busy = broker.replication.refuse_send(cmd) or broker.flow_control.check(cmd)
    if busy is not None:
        return busy
    fields = send_fields(cmd.ext_fields)
    if fields is not None:              # header fields in one native call; None: the general path says why
        response = await send_plain(broker, conn, cmd, fields, host_of(conn))
        if response is not None:
            return response
    return await send_routed(broker, conn, cmd)


async def send_routed(broker, conn, cmd: RemotingCommand) -> RemotingCommand:
    """A single message through its policy: delay levels, timers, transaction halves."""
    send_header(cmd)
    tc = topic_for_send(broker, cmd)
    if isinstance(tc, RemotingCommand):
        return tc
    if (registrar := unpublished(broker)) is not None:
        await registrar.published(SEND_WAITS_FOR_ROUTE_S)
    if tc.attributes:                        # a declared message.type is enforced, as on gRPC
        why = type_refusal(tc.topic_name, tc.attributes, message_type_of(cmd.get_str("properties", "")))
        if why is not None:
            return RemotingCommand.create_response(cmd, ResponseCode.MESSAGE_ILLEGAL, why)
    qid = queue_for_send(cmd, cmd.get_int("queueId", -1), tc, conn)
    if isinstance(qid, RemotingCommand):
        return qid
    msg = message_from_header(cmd, cmd.body, host_of(conn), queue_id=qid)
    msg.properties[reply.PROPERTY_CLUSTER] = broker.settings.cluster_name    # as RocketMQ: replies need it
    routed = route_single(msg, broker.timer_policy, broker_name=broker.settings.broker_name, clock_ms=_now_ms)
    if routed.refusal is not None:
        return RemotingCommand.create_response(cmd, *routed.refusal)
    msg = routed.message
    with broker.flow_control.sending():
        r = await broker.store.put_message_async(msg)
    code = STATUS_CODES[r.status]
    if r.physical_offset < 0:
        return RemotingCommand.create_response(cmd, code, r.error or str(r.status))
    broker.stats.put(tc.topic_name, 1, r.wrote_bytes, message_kind(tc.topic_name, msg))
    broker.replication.notify()
    if r.ok:
        code = await broker.replication.replicated(r.physical_offset + r.wrote_bytes) or code
    # Java answers the queue the message is for, also when the store parked it elsewhere (a delayed
    # message in SCHEDULE_TOPIC_XXXX or the timer topic, a half message in the half topic)
    # transactionId: the message's UNIQ_KEY, on every send as Java answers it; TransactionMQProducer hands it
    # to the application (TransactionSendResult.getTransactionId) and it names the transaction in checks
    header = {"msgId": r.msg_id, "queueId": qid, "queueOffset": r.queue_offset,
              "transactionId": msg.properties.get(PROPERTY_UNIQ_KEY), "recallHandle": routed.recall_handle}
    return RemotingCommand.create_response(cmd, code, None if r.ok else str(r.status),
                                           {k: v for k, v in header.items() if v is not None})


async def send_batch(broker, conn, cmd: RemotingCommand) -> RemotingCommand:
    busy = broker.replication.refuse_send(cmd) or broker.flow_control.check(cmd)
    if busy is not None:
        return busy
    send_header(cmd)
    tc = topic_for_send(broker, cmd)
    if isinstance(tc, RemotingCommand):
        return tc
    if (registrar := unpublished(broker)) is not None:
        await registrar.published(SEND_WAITS_FOR_ROUTE_S)
    why = type_refusal(tc.topic_name, tc.attributes, NORMAL) if tc.attributes else None
    if why is not None:                      # a batch holds normal messages (no delay, no transaction)
        return RemotingCommand.create_response(cmd, ResponseCode.MESSAGE_ILLEGAL, why)
    qid = queue_for_send(cmd, cmd.get_int("queueId", -1), tc, conn)
    if isinstance(qid, RemotingCommand):
        return qid
    header = dict(topic=tc.topic_name, queue_id=qid, sys_flag=cmd.get_int("sysFlag", 0),
                  born_timestamp=cmd.get_int("bornTimestamp", 0), born_host=host_of(conn),
                  reconsume_times=cmd.get_int("reconsumeTimes", 0))
    try:
        msgs = stage_batch(broker.store, cmd.body or b"", header)
    except PutError as exc:
        return RemotingCommand.create_response(cmd, STATUS_CODES[exc.status], exc.reason)
    except BatchFormatError as exc:
        raise RemotingCommandError("body", str(exc)) from None
    if msgs is None:                                  # a delay level inside: the general path
        msgs = batch_messages(decode_batch(cmd.body), **header)
    if not len(msgs):
        return RemotingCommand.create_response(cmd, ResponseCode.MESSAGE_ILLEGAL, "the batch holds no message")
    with broker.flow_control.sending():
        rs = await broker.store.put_messages_async(msgs)      # SYNC_FLUSH: awaits the shared fsync
    if not rs.ok:
        return RemotingCommand.create_response(cmd, STATUS_CODES[rs.status], rs.error or str(rs.status))
    broker.stats.put(tc.topic_name, len(msgs), len(cmd.body))
    broker.replication.notify()
    code = STATUS_CODES[rs.status]
    if rs.ok:
        code = await broker.replication.replicated(rs.end_offset) or code
    if msgs.__class__ is list:                        # the general path: a delayed message may have moved queue
        first = rs[0]
        queue_id, queue_offset = first.queue_id, first.queue_offset
    else:       # staged from the wire: every record is for queue qid (rs[0] would build two lists per batch)
        queue_id, queue_offset = qid, msgs.queue_offset(0)
    return RemotingCommand.answer(cmd, code, None, {
        "msgId": rs.joined_msg_ids(), "queueId": str(queue_id), "queueOffset": str(queue_offset)})


def stage_batch(store, body: bytes, header: dict):
    try:
        return store.stage_wire_batch(body, **header)
    except PutError:
        fixed = terminate_properties(body)        # a RocketMQ 4.x client's batch: retried once, rewritten
        if fixed is None:
            raise
        return store.stage_wire_batch(fixed, **header)


def _now_ms() -> int:
    return int(time.time() * 1000)
