"""SEND_MESSAGE / SEND_MESSAGE_V2 of a message that needs no policy: two native calls, no ``Message``.

Theory of operation
-------------------
Most single sends carry a message that is stored as it came: no delay level, no timer property,
not a transaction's half.  For those the broker's work is the header's fields, the topic and queue
(policy: here, in Python), and one record whose properties string is the client's with the
broker's ``CLUSTER`` property appended.  So:

1. :func:`send_fields` (native) reads the header's fields, V1 or V2 names, in one call;
2. the topic checks, the declared message type and the queue choice run as in the general path;
3. the store's :meth:`~rocketq.store.MessageStore.stage_sent` (native) checks the properties and
   builds the one-record batch straight from the header's strings, with the ``UNIQ_KEY`` the
   answer carries and whether a sharding key makes it a FIFO message (the metrics' label);
4. the batch is appended as a general-path message would be, and the answer is the same.

:func:`send_plain` returns None when a step finds policy to apply (a transaction half, a property
only the general path handles, a header field in an unusual form); the broker's general path
(``send_handlers.send_routed``: ``Message``, :func:`~rocketq.broker.send.route_single`, the store's
``Preparer.messages``) then handles the request from the start.  The two paths store the same bytes
and answer the same frames (tests/broker/test_send_plain.py compares them).  One difference in
order: a message the store refuses (too large, properties too long) is answered before the store's
running state is looked at, where the general path looks at the state first; both answers are errors.
"""

from __future__ import annotations

from rocketq._native import send_fields
from rocketq.broker.send import (SEND_WAITS_FOR_ROUTE_S, STATUS_CODES, queue_for_send, topic_config_for_send,
                                 unpublished)
from rocketq.broker.topic_attributes import message_type_of, type_refusal
from rocketq.common.msgid import HostAddress
from rocketq.common.sysflag import TRANSACTION_MASK, TRANSACTION_PREPARED_TYPE
from rocketq.remoting import RemotingCommand, ResponseCode
from rocketq.store.results import PutError

__all__ = ["send_fields", "send_plain"]


async def send_plain(broker, conn, cmd: RemotingCommand, fields: tuple,
                     born_host: HostAddress) -> RemotingCommand | None:
    """The answer to a send whose *fields* (from :func:`send_fields`) need no policy, or None."""
    topic, default_topic, queue_nums, qid, sys_flag, born_ts, flag, reconsume, props = fields
    if sys_flag & TRANSACTION_MASK == TRANSACTION_PREPARED_TYPE:
        return None                                       # a transaction's half
    tc = topic_config_for_send(broker, cmd, topic, default_topic, queue_nums)
    if tc.__class__ is RemotingCommand:
        return tc
    if (registrar := unpublished(broker)) is not None:
        await registrar.published(SEND_WAITS_FOR_ROUTE_S)
    if tc.attributes:                        # a declared message.type is enforced, as on gRPC
        why = type_refusal(tc.topic_name, tc.attributes, message_type_of(props))
        if why is not None:
            return RemotingCommand.create_response(cmd, ResponseCode.MESSAGE_ILLEGAL, why)
    qid = queue_for_send(cmd, qid, tc, conn)
    if qid.__class__ is RemotingCommand:
        return qid
    store = broker.store
    try:
        staged = store.stage_sent(topic, qid, flag=flag, sys_flag=sys_flag, born_timestamp=born_ts,
                                  born_host=born_host, reconsume_times=reconsume, body=cmd.body,
                                  properties=props, cluster=broker.settings.cluster_name)
    except PutError as exc:
        return RemotingCommand.create_response(cmd, STATUS_CODES[exc.status], exc.reason)
    if staged is None:
        return None
    batch, uniq_key, fifo = staged
    with broker.flow_control.sending():
        r = await store.put_staged_async(batch)
    code = STATUS_CODES[r.status]
    if r.physical_offset < 0:
        return RemotingCommand.create_response(cmd, code, r.error or str(r.status))
    broker.stats.put(tc.topic_name, 1, r.wrote_bytes, "fifo" if fifo else "normal")
    broker.replication.notify()
    if r.ok:
        code = await broker.replication.replicated(r.physical_offset + r.wrote_bytes) or code
    # the general path's answer: transactionId is the message's UNIQ_KEY (see send_handlers.send_routed)
    header = {"msgId": r.msg_id, "queueId": str(qid), "queueOffset": str(r.queue_offset)}
    if uniq_key is not None:
        header["transactionId"] = uniq_key
    return RemotingCommand.answer(cmd, code, None if r.ok else str(r.status), header)
