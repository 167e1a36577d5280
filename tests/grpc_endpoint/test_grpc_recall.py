"""RecallMessage: a scheduled (DELAY) message recalled before its time is never delivered, also
after a restart; what cannot be recalled is refused with a status saying why."""

import json
import time

import grpc
import pytest
from broker_helpers import send_v2
from grpc_helpers import client_config, message, remoting_call, wait_until

from rocketq.broker.timer_messages import RecallHandle
from rocketq.grpc_endpoint.protocol import Code, pb, spb, spb_grpc
from rocketq.remoting import ResponseCode

MD = [("x-mq-client-id", "raw-recall-1")]


@pytest.fixture
def stub(server):
    with grpc.insecure_channel(server.access_point) as ch:
        yield spb_grpc.MessagingServiceStub(ch)


def _producer(server, topic):
    from rocketmq import Producer
    p = Producer(client_config(server), (topic,))
    p.startup()
    return p


def _recall(stub, topic, handle):
    r = stub.RecallMessage(spb.RecallMessageRequest(topic=pb.Resource(name=topic), recall_handle=handle),
                           metadata=MD, timeout=5)
    return r.status.code, r.message_id


def _bodies(server, topic):
    store = server.broker.store
    return server.call(lambda: sorted(m.body for q in range(4) for m in store.get_messages(topic, q, 0, 64).messages))


def _timer(server, attr):
    return server.call(lambda: getattr(server.broker.timer, attr))


def test_a_recalled_message_is_never_delivered(server):
    from rocketmq.v5.exception import NotFoundException
    server.create_topic("Recall")
    p = _producer(server, "Recall")
    try:
        due_s = int(time.time()) + 2
        doomed = p.send(message("Recall", b"doomed", deliver_at_s=due_s))
        kept = p.send(message("Recall", b"kept", deliver_at_s=due_s))
        assert doomed.recall_handle and kept.recall_handle
        assert RecallHandle.parse(doomed.recall_handle).due_ms == due_s * 1000
        assert p.recall_message("Recall", doomed.recall_handle) == doomed.message_id
        assert p.recall_message("Recall", doomed.recall_handle) == doomed.message_id     # again: still OK
        wait_until(lambda: _timer(server, "watermark_ms") > due_s * 1000 + 100, what="the due time to pass")
        assert _bodies(server, "Recall") == [b"kept"]
        assert _timer(server, "dropped_recalled") == 1
        with pytest.raises(NotFoundException, match="delivered already"):
            p.recall_message("Recall", kept.recall_handle)           # too late: it was delivered
        assert p.send(message("Recall", b"now")).recall_handle is None     # not scheduled: no handle
    finally:
        p.shutdown()
    wait_until(lambda: _timer(server, "pending_recalls") == 0, what="the recalled key to be forgotten")


def test_a_recall_survives_a_restart(server):
    server.create_topic("Durable")
    p = _producer(server, "Durable")
    try:
        due_s = int(time.time()) + 2
        r = p.send(message("Durable", b"never", deliver_at_s=due_s))
        assert p.recall_message("Durable", r.recall_handle) == r.message_id
        # answered only once a checkpoint holding it is on disk: a crash now would not lose it
        checkpoint = json.loads((server.tmp_path / "timer" / "checkpoint.json").read_text())
        assert [k for k, _due, _at in checkpoint["recalled"]] == [f"Durable+{r.message_id}"]
    finally:
        p.shutdown()
    server.stop()
    server.start()
    assert _timer(server, "pending_recalls") == 1
    wait_until(lambda: _timer(server, "watermark_ms") > due_s * 1000 + 100, what="the due time to pass")
    assert _bodies(server, "Durable") == [] and _timer(server, "dropped_recalled") == 1


def test_a_remoting_timer_message_is_recalled_over_grpc(server, stub):
    server.create_topic("Mixed", 1)
    uniq = "AC110001000100000000000000000RCL"
    props = f"UNIQ_KEY\x01{uniq}\x02TIMER_DELAY_MS\x011500\x02"
    sent = remoting_call(server, lambda: send_v2("Mixed", b"gone", props=props))
    assert sent.code == ResponseCode.SUCCESS
    handle = sent.ext_fields["recallHandle"]
    assert _recall(stub, "Mixed", handle) == (Code.OK, uniq)
    due = RecallHandle.parse(handle).due_ms
    wait_until(lambda: _timer(server, "watermark_ms") > due + 100, what="the due time to pass")
    assert _bodies(server, "Mixed") == []


def test_recall_refusals(server, stub):
    server.create_topic("Refuse")
    server.create_topic("Plain", **{"+message.type": "NORMAL"})
    name = server.broker.settings.broker_name
    soon = int(time.time() * 1000) + 60_000

    def handle(topic="Refuse", broker=name, due=soon, uniq="01AABB"):
        return RecallHandle(topic, broker, due, uniq).encode()
    assert _recall(stub, "Refuse", "not a handle!")[0] == Code.BAD_REQUEST
    assert _recall(stub, "Refuse", "djIgYSBiIGMgZA==")[0] == Code.BAD_REQUEST           # "v2 a b c d"
    assert _recall(stub, "Refuse", handle(topic="Other"))[0] == Code.BAD_REQUEST
    assert _recall(stub, "Refuse", handle(broker="broker-z"))[0] == Code.BAD_REQUEST
    assert _recall(stub, "Refuse", handle(due=soon + 4 * 24 * 3_600_000))[0] == Code.BAD_REQUEST
    assert _recall(stub, "Refuse", handle(due=soon - 120_000))[0] == Code.NOT_FOUND       # due a minute ago
    assert _recall(stub, "Nowhere", handle(topic="Nowhere"))[0] == Code.TOPIC_NOT_FOUND
    assert _recall(stub, "Plain", handle(topic="Plain"))[0] == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert _timer(server, "pending_recalls") == 0
    # a handle that names no scheduled message is taken, as RocketMQ takes it, and drops nothing
    assert _recall(stub, "Refuse", handle()) == (Code.OK, "01AABB")
    assert _timer(server, "pending_recalls") == 1
