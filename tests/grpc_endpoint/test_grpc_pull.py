"""PullMessage, UpdateOffset, GetOffset and QueryOffset over a raw v2 stub (the official 5.1.2 client
has no pull consumer), against a real broker, with offsets shared with the remoting protocol."""

import threading
import time

import grpc
import pytest
from broker_helpers import send_v2
from grpc_helpers import remoting_call, wait_until

from rocketq.grpc_endpoint.protocol import Code, ms_duration, ms_timestamp, pb, spb, spb_grpc
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

MD = [("x-mq-client-id", "raw-pull-1")]


@pytest.fixture
def stub(server):
    with grpc.insecure_channel(server.access_point) as ch:
        yield spb_grpc.MessagingServiceStub(ch)


def _mq(topic, qid=0):
    return pb.MessageQueue(topic=pb.Resource(name=topic), id=qid)


def _pull(stub, topic, offset, *, qid=0, group="GPull", batch=32, wait_ms=0, tags=None, sql=None, timeout=10):
    req = spb.PullMessageRequest(group=pb.Resource(name=group), message_queue=_mq(topic, qid), offset=offset,
                                 batch_size=batch, long_polling_timeout=ms_duration(wait_ms))
    if tags is not None:
        req.filter_expression.CopyFrom(pb.FilterExpression(type=pb.FilterType.TAG, expression=tags))
    if sql is not None:
        req.filter_expression.CopyFrom(pb.FilterExpression(type=pb.FilterType.SQL, expression=sql))
    return list(stub.PullMessage(req, metadata=MD, timeout=timeout))


def _shape(responses):
    """(status code, [bodies], next_offset or None), checking the order: status, messages, next_offset."""
    kinds = [r.WhichOneof("content") for r in responses]
    assert kinds[0] == "status" and kinds.count("status") == 1, kinds
    assert kinds[1:] in (["message"] * (len(kinds) - 2) + ["next_offset"], []), kinds
    nxt = responses[-1].next_offset if kinds[-1] == "next_offset" else None
    return responses[0].status.code, [r.message.body for r in responses if r.HasField("message")], nxt


def _send(server, topic, body, *, qid=0, tag="TagA"):
    props = f"TAGS\x01{tag}\x02UNIQ_KEY\x01{body.hex().upper():0<32}\x02"
    r = remoting_call(server, lambda: send_v2(topic, body, queue_id=qid, props=props))
    assert r.code == ResponseCode.SUCCESS, r.remark
    return r


def _dispatched(server, topic, n, qid=0):
    wait_until(lambda: server.call(lambda: server.broker.store.max_offset(topic, qid)) >= n, what="dispatch")


def test_pull_answers_status_messages_then_next_offset(server, stub):
    server.create_topic("Pulled", 2)
    for i, tag in enumerate(("TagA", "TagB", "TagA", "TagA")):
        _send(server, "Pulled", f"m{i}".encode(), qid=1, tag=tag)
    _dispatched(server, "Pulled", 4, qid=1)
    resp = _pull(stub, "Pulled", 0, qid=1)
    assert _shape(resp) == (Code.OK, [b"m0", b"m1", b"m2", b"m3"], 4)
    sp = resp[1].message.system_properties
    assert (sp.queue_id, sp.queue_offset, sp.tag, sp.delivery_attempt) == (1, 0, "TagA", 1)
    assert not sp.HasField("receipt_handle")              # a pull hands out no receipt: nothing to ack
    assert _shape(_pull(stub, "Pulled", 1, qid=1, batch=2)) == (Code.OK, [b"m1", b"m2"], 3)
    assert _shape(_pull(stub, "Pulled", 0, qid=1, tags="TagA")) == (Code.OK, [b"m0", b"m2", b"m3"], 4)
    assert _shape(_pull(stub, "Pulled", 2, qid=1, tags="TagB")) == (Code.MESSAGE_NOT_FOUND, [], 4)
    # nothing new at the end: not found after the (short) long polling time, at the same offset
    began = time.monotonic()
    assert _shape(_pull(stub, "Pulled", 4, qid=1, wait_ms=300)) == (Code.MESSAGE_NOT_FOUND, [], 4)
    assert time.monotonic() - began >= 0.3
    assert server.call(lambda: server.broker.offsets.query("GPull", "Pulled", 1)) == -1   # pulls commit nothing


def test_long_polling_pull_is_woken_by_a_send(server, stub):
    server.create_topic("Held", 1)
    _send(server, "Held", b"first")
    _dispatched(server, "Held", 1)
    result = {}

    def pull():
        began = time.monotonic()
        result["resp"] = _pull(stub, "Held", 1, wait_ms=10_000, timeout=15)
        result["took_s"] = time.monotonic() - began
    t = threading.Thread(target=pull)
    t.start()
    wait_until(lambda: server.call(lambda: server.broker.long_polling.held) == 1, what="the pull to be held")
    _send(server, "Held", b"second")
    t.join(15)
    assert _shape(result["resp"]) == (Code.OK, [b"second"], 2)
    assert result["took_s"] < 5                            # woken by the arrival, not by the 10 s timeout
    assert server.call(lambda: server.broker.long_polling.held) == 0


def test_pull_refusals(server, stub):
    server.create_topic("Strict", 2)
    _send(server, "Strict", b"only")
    _dispatched(server, "Strict", 1)
    # refused before reading: the status alone
    assert _shape(_pull(stub, "Nowhere", 0)) == (Code.TOPIC_NOT_FOUND, [], None)
    assert server.call(lambda: server.broker.topics.get("Nowhere")) is None      # a pull creates no topic
    assert _shape(_pull(stub, "bad topic!", 0)) == (Code.ILLEGAL_TOPIC, [], None)
    assert _shape(_pull(stub, "Strict", 0, group="bad group!")) == (Code.ILLEGAL_CONSUMER_GROUP, [], None)
    assert _shape(_pull(stub, "Strict", 0, qid=2)) == (Code.BAD_REQUEST, [], None)
    assert _shape(_pull(stub, "Strict", 0, qid=-1)) == (Code.BAD_REQUEST, [], None)
    assert _shape(_pull(stub, "Strict", -1)) == (Code.ILLEGAL_OFFSET, [], None)
    assert _shape(_pull(stub, "Strict", 0, batch=0)) == (Code.BAD_REQUEST, [], None)
    assert _shape(_pull(stub, "Strict", 0, sql="a > 1")) == (Code.NOT_IMPLEMENTED, [], None)     # enablePropertyFilter off
    assert _shape(_pull(stub, "Strict", 0, sql="a >")) == (Code.NOT_IMPLEMENTED, [], None)
    assert _shape(_pull(stub, "Strict", 0, wait_ms=-5)) == (Code.ILLEGAL_POLLING_TIME, [], None)
    # past the end: ILLEGAL_OFFSET with where to go on (RocketMQ's OFFSET_ILLEGAL pull status; RocketMQ 5's
    # store answers the queue's max, DefaultMessageStore#getMessage OFFSET_OVERFLOW_BADLY)
    moved = _pull(stub, "Strict", 7)
    assert _shape(moved) == (Code.ILLEGAL_OFFSET, [], 1) and "0..1" in moved[0].status.message
    # an empty queue at offset 0 is simply empty; at any other offset it is moved back to 0
    assert _shape(_pull(stub, "Strict", 0, qid=1)) == (Code.MESSAGE_NOT_FOUND, [], 0)
    assert _shape(_pull(stub, "Strict", 3, qid=1)) == (Code.ILLEGAL_OFFSET, [], 0)
    server.call(setattr, server.broker.groups, "auto_create", False)
    assert _shape(_pull(stub, "Strict", 0, group="GUnknown")) == (Code.CONSUMER_GROUP_NOT_FOUND, [], None)
    assert _shape(_pull(stub, "Strict", 0)) == (Code.OK, [b"only"], 1)       # GPull exists by now


def test_offsets_are_the_remoting_offsets(server, stub):
    server.create_topic("Tracked", 2)
    for i in range(3):
        _send(server, "Tracked", f"t{i}".encode())
    _dispatched(server, "Tracked", 3)

    def update(offset, qid=0, group="GTrack"):
        return stub.UpdateOffset(spb.UpdateOffsetRequest(group=pb.Resource(name=group), message_queue=_mq("Tracked", qid),
                                                         offset=offset), metadata=MD, timeout=5).status.code

    def get(qid=0, group="GTrack"):
        r = stub.GetOffset(spb.GetOffsetRequest(group=pb.Resource(name=group), message_queue=_mq("Tracked", qid)),
                           metadata=MD, timeout=5)
        return r.status.code, r.offset

    def remoting_query(qid):
        return remoting_call(server, lambda: RemotingCommand.create_request(RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": "GTrack", "topic": "Tracked", "queueId": qid, "setZeroIfNotFound": False}))

    assert get() == (Code.OFFSET_NOT_FOUND, 0)
    assert remoting_query(0).code == ResponseCode.QUERY_NOT_FOUND
    assert update(2) == Code.OK
    assert get() == (Code.OK, 2)
    q = remoting_query(0)
    assert (q.code, q.ext_fields["offset"]) == (ResponseCode.SUCCESS, "2")
    # the reverse: committed over remoting, read over gRPC
    r = remoting_call(server, lambda: RemotingCommand.create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": "GTrack", "topic": "Tracked", "queueId": 0, "commitOffset": 3}))
    assert r.code == ResponseCode.SUCCESS
    assert get() == (Code.OK, 3)
    assert server.call(lambda: server.broker.offsets.offsets("GTrack", "Tracked")) == {0: 3}   # one table
    # out of range, unknown queue or topic
    assert update(4) == Code.ILLEGAL_OFFSET                  # past the queue's max offset (3)
    assert update(-1) == Code.ILLEGAL_OFFSET
    assert update(0, qid=5) == Code.BAD_REQUEST
    assert get(qid=1) == (Code.OFFSET_NOT_FOUND, 0)
    missing = stub.GetOffset(spb.GetOffsetRequest(group=pb.Resource(name="GTrack"), message_queue=_mq("Nowhere")),
                             metadata=MD, timeout=5)
    assert missing.status.code == Code.TOPIC_NOT_FOUND
    assert get() == (Code.OK, 3)                             # refusals changed nothing


def test_query_offset_policies(server, stub):
    server.create_topic("Timeline", 1)
    _send(server, "Timeline", b"early")
    _dispatched(server, "Timeline", 1)
    first_ms = server.call(lambda: server.broker.store.store_time_at("Timeline", 0, 0))
    wait_until(lambda: time.time() * 1000 > first_ms + 5, what="the clock to move on")
    _send(server, "Timeline", b"late-1")
    _send(server, "Timeline", b"late-2")
    _dispatched(server, "Timeline", 3)
    second_ms = server.call(lambda: server.broker.store.store_time_at("Timeline", 0, 1))
    assert second_ms > first_ms

    def query(policy, ts_ms=None, topic="Timeline", qid=0):
        req = spb.QueryOffsetRequest(message_queue=_mq(topic, qid), query_offset_policy=policy)
        if ts_ms is not None:
            req.timestamp.CopyFrom(ms_timestamp(ts_ms))
        r = stub.QueryOffset(req, metadata=MD, timeout=5)
        return r.status.code, r.offset

    assert query(pb.QueryOffsetPolicy.BEGINNING) == (Code.OK, 0)
    assert query(pb.QueryOffsetPolicy.END) == (Code.OK, 3)
    assert query(pb.QueryOffsetPolicy.TIMESTAMP, first_ms) == (Code.OK, 0)
    assert query(pb.QueryOffsetPolicy.TIMESTAMP, second_ms) == (Code.OK, 1)
    assert query(pb.QueryOffsetPolicy.TIMESTAMP, second_ms + 3_600_000) == (Code.OK, 3)
    assert query(pb.QueryOffsetPolicy.TIMESTAMP)[0] == Code.BAD_REQUEST
    assert query(pb.QueryOffsetPolicy.END, qid=1)[0] == Code.BAD_REQUEST
    assert query(pb.QueryOffsetPolicy.END, topic="Nowhere")[0] == Code.TOPIC_NOT_FOUND



def test_a_pull_and_an_end_query_see_every_send_answered_before_them(server, stub):
    """Single sends' dispatch is coalesced while nobody waits (store/dispatcher.py); stretched far beyond
    the test here, only the gRPC side's own catch-up can show the sends to a pull and an END query."""
    server.create_topic("SeenAtOnce", 1)
    server.call(lambda: setattr(server.broker.store.dispatcher, "coalesce_s", 60.0))
    for i in range(3):
        _send(server, "SeenAtOnce", f"s{i}".encode())
    end = spb.QueryOffsetRequest(message_queue=_mq("SeenAtOnce"), query_offset_policy=pb.QueryOffsetPolicy.END)
    r = stub.QueryOffset(end, metadata=MD, timeout=5)
    assert (r.status.code, r.offset) == (Code.OK, 3)
    _send(server, "SeenAtOnce", b"s3")
    assert _shape(_pull(stub, "SeenAtOnce", 0)) == (Code.OK, [b"s0", b"s1", b"s2", b"s3"], 4)
