"""Bad input over gRPC gets the v2 status code RocketMQ's proxy would answer, and loses nothing."""

import threading
import time

import grpc
import pytest
from grpc_helpers import FAST, ServerThread, client_config, message, wait_until

from rocketq.grpc_endpoint.protocol import Code, ms_duration, ms_timestamp, pb, spb, spb_grpc

MD = [("x-mq-client-id", "raw-client-1")]


@pytest.fixture
def stub(server):
    with grpc.insecure_channel(server.access_point) as ch:
        yield spb_grpc.MessagingServiceStub(ch)


def _msg(topic, body=b"x", **sp):
    sp.setdefault("message_id", "01AABBCCDDEEFF000000000000000001")
    sp.setdefault("message_type", pb.MessageType.NORMAL)
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(**sp))


def _send(stub, m):
    return stub.SendMessage(spb.SendMessageRequest(messages=[m]), metadata=MD, timeout=5).status.code


def _receive(stub, topic, *, invisible_ms=5000, group="GBad", wait_ms=0, **kw):
    req = spb.ReceiveMessageRequest(group=pb.Resource(name=group), message_queue=pb.MessageQueue(
        topic=pb.Resource(name=topic)), batch_size=4, invisible_duration=ms_duration(invisible_ms),
        long_polling_timeout=ms_duration(wait_ms), **kw)
    return list(stub.ReceiveMessage(req, metadata=MD, timeout=10))


def test_send_rejections(server, stub):
    server.create_topic("Strict", 2)
    assert _send(stub, _msg("bad topic!")) == Code.ILLEGAL_TOPIC
    assert _send(stub, _msg("Strict", b"")) == Code.MESSAGE_BODY_EMPTY
    too_big = b"z" * (server.broker.store.config.max_message_size + 1)
    assert _send(stub, _msg("Strict", too_big)) == Code.MESSAGE_BODY_TOO_LARGE
    assert _send(stub, _msg("Strict", message_id="")) == Code.ILLEGAL_MESSAGE_ID
    assert _send(stub, _msg("Strict", tag="a|b")) == Code.ILLEGAL_MESSAGE_TAG
    assert _send(stub, _msg("Strict", message_type=pb.MessageType.FIFO)) == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    far = ms_timestamp(int(time.time() * 1000) + FAST.max_delay_ms + 60_000)
    assert _send(stub, _msg("Strict", message_type=pb.MessageType.DELAY, delivery_timestamp=far)) == \
        Code.ILLEGAL_DELIVERY_TIME
    reserved = _msg("Strict")
    reserved.user_properties["UNIQ_KEY"] = "mine"
    assert _send(stub, reserved) == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    assert server.call(lambda: sum(server.broker.store.max_offset("Strict", q) for q in range(2))) == 0


def test_official_client_refuses_a_body_over_the_servers_limit(server):
    from rocketmq import Producer
    server.create_topic("Big")
    p = Producer(client_config(server), ("Big",))
    p.startup()
    try:
        limit = server.broker.store.config.max_message_size
        wait_until(lambda: _published_limit(p) == limit, what="the server's settings to reach the producer")
        with pytest.raises(Exception, match="exceeds"):
            p.send(message("Big", b"z" * (limit + 1)))
    finally:
        p.shutdown()


def _published_limit(producer):
    return getattr(producer, "_Producer__max_body_size", None)


def test_unknown_topic_without_auto_create(tmp_path):
    s = ServerThread(tmp_path, auto_create_topic=False).start()
    try:
        with grpc.insecure_channel(s.access_point) as ch:
            st = spb_grpc.MessagingServiceStub(ch)
            route = st.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Nowhere")), metadata=MD, timeout=5)
            assert route.status.code == Code.TOPIC_NOT_FOUND and "Nowhere" in route.status.message
            assert _send(st, _msg("Nowhere")) == Code.TOPIC_NOT_FOUND
            [resp] = _receive(st, "Nowhere")
            assert resp.status.code == Code.TOPIC_NOT_FOUND
    finally:
        s.shutdown()


def test_receive_and_ack_rejections(server, stub):
    server.create_topic("Picky")
    assert _receive(stub, "Picky", invisible_ms=10)[0].status.code == Code.ILLEGAL_INVISIBLE_TIME
    assert _receive(stub, "Picky", invisible_ms=13 * 3600_000)[0].status.code == Code.ILLEGAL_INVISIBLE_TIME
    sql = pb.FilterExpression(type=pb.FilterType.SQL, expression="a > 1")
    assert _receive(stub, "Picky", filter_expression=sql)[0].status.code == Code.NOT_IMPLEMENTED   # enablePropertyFilter off
    empty = _receive(stub, "Picky")
    assert [r.WhichOneof("content") for r in empty] == ["status", "delivery_timestamp"]
    assert empty[0].status.code == Code.MESSAGE_NOT_FOUND
    for handle in ("garbage", "n:0:0:99:1"):
        ack = stub.AckMessage(spb.AckMessageRequest(group=pb.Resource(name="GBad"), topic=pb.Resource(name="Picky"),
                                                    entries=[spb.AckMessageEntry(message_id="m", receipt_handle=handle)]),
                              metadata=MD, timeout=5)
        assert ack.status.code == Code.INVALID_RECEIPT_HANDLE and ack.entries[0].status.code == ack.status.code
    change = stub.ChangeInvisibleDuration(spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name="GBad"), topic=pb.Resource(name="Picky"), receipt_handle="r:1:2:3:4",
        invisible_duration=ms_duration(5000), message_id="m"), metadata=MD, timeout=5)
    assert change.status.code == Code.INVALID_RECEIPT_HANDLE


def test_official_client_receive_with_invisible_time_out_of_range(server):
    from rocketmq import FilterExpression, SimpleConsumer
    server.create_topic("Range")
    c = SimpleConsumer(client_config(server), "GRange", {"Range": FilterExpression("*")}, await_duration=1)
    c.startup()
    try:
        with pytest.raises(Exception, match="invisible"):
            c.receive(1, 50_000)                          # 13.9 h: over the 12 h limit
    finally:
        c.shutdown()


def test_requests_over_the_body_limit_are_answered_in_the_protocol(tmp_path):
    """RocketMQ's proxy reads requests up to 130 MiB and answers an oversized body with
    MESSAGE_BODY_TOO_LARGE; only beyond its inbound limit does the transport refuse."""
    import dataclasses
    import gzip
    s = ServerThread(tmp_path, endpoint_settings=dataclasses.replace(FAST, max_inbound_message_bytes=12 << 20)).start()
    try:
        s.create_topic("Big")
        with grpc.insecure_channel(s.access_point) as ch:
            st = spb_grpc.MessagingServiceStub(ch)
            assert _send(st, _msg("Big", b"z" * (6 << 20))) == Code.MESSAGE_BODY_TOO_LARGE        # 6 MiB > 4 MiB
            bomb = gzip.compress(b"\0" * (64 << 20))                                           # 64 KiB -> 64 MiB
            started = time.monotonic()
            assert _send(st, _msg("Big", bomb, body_encoding=pb.Encoding.GZIP)) == Code.MESSAGE_BODY_TOO_LARGE
            assert time.monotonic() - started < 2                                # not inflated to the end
            assert _send(st, _msg("Big", gzip.compress(b"k" * (512 << 10)), body_encoding=pb.Encoding.GZIP)) == Code.OK
            with pytest.raises(grpc.RpcError) as refused:                        # the transport's bound
                _send(st, _msg("Big", b"z" * (13 << 20)))
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert _send(st, _msg("Big", b"fine")) == Code.OK
    finally:
        s.shutdown()


def test_client_vanishing_mid_receive_loses_nothing(server, stub):
    server.create_topic("Vanish", 1)
    assert _send(stub, _msg("Vanish", b"keep-me")) == Code.OK
    wait_until(lambda: server.call(lambda: server.broker.store.max_offset("Vanish", 0)) == 1, what="dispatch")
    req = spb.ReceiveMessageRequest(group=pb.Resource(name="GVanish"), message_queue=pb.MessageQueue(
        topic=pb.Resource(name="Vanish")), batch_size=4, invisible_duration=ms_duration(1000))
    call = stub.ReceiveMessage(req, metadata=MD, timeout=10)
    first = next(call)
    assert first.status.code == Code.OK
    call.cancel()                                         # gone before reading the message
    again = wait_until(lambda: [r for r in _receive(stub, "Vanish", group="GVanish", wait_ms=2000)
                                if r.HasField("message")], what="the message to come back")
    assert again[0].message.body == b"keep-me" and again[0].message.system_properties.delivery_attempt == 2


def test_telemetry_without_client_id_is_refused_and_without_settings_is_kept(server):
    """A stream with no settings is the 5.1.2 client's stream reopened after a broker restart: it
    is kept (as RocketMQ's proxy keeps it) and the client known by its id."""
    with grpc.insecure_channel(server.access_point) as ch:
        st = spb_grpc.MessagingServiceStub(ch)
        no_id = list(st.Telemetry(iter([]), timeout=5))
        assert no_id[0].status.code == Code.CLIENT_ID_REQUIRED
        cid = dict(MD)["x-mq-client-id"]
        quiet = threading.Event()
        silent = st.Telemetry(_silent(quiet), metadata=MD, timeout=10)
        wait_until(lambda: server.call(lambda: server.endpoint.sessions.alive(cid) and
                                       getattr(server.endpoint.sessions.clients.get(cid), "outbox", None) is not None),
                   what="the stream to be taken as the client's")
        quiet.set()                                    # the client half-closes: the server ends the stream
        assert list(silent) == []                      # nothing was answered: no BAD_REQUEST for missing settings


def _silent(quiet):
    quiet.wait(10)         # a client that opens the stream and writes nothing
    return
    yield


def test_malformed_protobuf_is_answered_bad_request(server, stub):
    with grpc.insecure_channel(server.access_point) as ch:
        raw = ch.unary_unary("/apache.rocketmq.v2.MessagingService/SendMessage",
                             request_serializer=lambda b: b, response_deserializer=spb.SendMessageResponse.FromString)
        resp = raw(b"\xff\xff\xff\xff garbage", timeout=5)
        assert resp.status.code == Code.BAD_REQUEST and "SendMessageRequest" in resp.status.message
        stream = ch.unary_stream("/apache.rocketmq.v2.MessagingService/ReceiveMessage",
                                 request_serializer=lambda b: b,
                                 response_deserializer=spb.ReceiveMessageResponse.FromString)
        assert [r.status.code for r in stream(b"\x0a\xff", timeout=5)] == [Code.BAD_REQUEST]
    server.create_topic("StillUp")
    assert _send(stub, _msg("StillUp")) == Code.OK


def test_acl_accepts_a_signed_client_and_refuses_a_wrong_secret(tmp_path):
    from rocketmq import ClientConfiguration, Credentials, Producer
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "plain_acl.yml").write_text(
        'accounts:\n  - accessKey: grpc-user\n    secretKey: "g-secret"\n    admin: true\n')
    s = ServerThread(tmp_path, acl_enable=True).start()
    try:
        s.create_topic("Guarded")
        good = Producer(ClientConfiguration(s.access_point, Credentials("grpc-user", "g-secret"), request_timeout=5),
                        ("Guarded",))
        good.startup()
        try:
            assert good.send(message("Guarded", b"signed")).message_id
        finally:
            good.shutdown()
        with grpc.insecure_channel(s.access_point) as ch:
            st = spb_grpc.MessagingServiceStub(ch)
            forged = "MQv2-HMAC-SHA1 Credential=grpc-user, SignedHeaders=x-mq-date-time, Signature=00ff"
            md = [*MD, ("x-mq-date-time", "20260101T000000Z"), ("authorization", forged)]
            resp = st.SendMessage(spb.SendMessageRequest(messages=[_msg("Guarded")]), metadata=md, timeout=5)
            assert resp.status.code == Code.UNAUTHORIZED and "signature" in resp.status.message
            unsigned = st.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Guarded")), metadata=MD, timeout=5)
            assert unsigned.status.code == Code.UNAUTHORIZED
    finally:
        s.shutdown()


def test_settings_are_merged_and_a_second_stream_replaces_the_first(server):
    import queue
    server.set_group("GFifoSettings", consume_message_orderly=True, retry_max_times=4)
    settings = pb.Settings(client_type=pb.ClientType.PUSH_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name="GFifoSettings")))
    outgoing: queue.Queue = queue.Queue()

    def requests():
        while (item := outgoing.get()) is not None:
            yield item

    with grpc.insecure_channel(server.access_point) as ch:
        st = spb_grpc.MessagingServiceStub(ch)
        first = st.Telemetry(requests(), metadata=MD, timeout=20)
        outgoing.put(spb.TelemetryCommand(settings=settings))
        reply = next(first)
        assert reply.status.code == Code.OK
        sub = reply.settings.subscription
        assert sub.fifo and sub.receive_batch_size == 32 and sub.long_polling_timeout.seconds == 3
        assert reply.settings.backoff_policy.max_attempts == 5
        assert len(reply.settings.backoff_policy.customized_backoff.next) == 18
        second = st.Telemetry(iter([spb.TelemetryCommand(settings=settings)]), metadata=MD, timeout=20)
        assert next(second).status.code == Code.OK
        assert list(first) == []                          # the older stream was ended by the server
        outgoing.put(None)


def test_forward_to_dead_letter_queue_by_receipt_handle(server, stub):
    import hashlib
    server.create_topic("Fwd", 1)
    assert _send(stub, _msg("Fwd", b"give-up", message_id="01AABBCCDDEEFF00000000000000F0F0")) == Code.OK
    got = wait_until(lambda: [r.message for r in _receive(stub, "Fwd", group="GFwd", wait_ms=2000)
                              if r.HasField("message")], what="the message")
    sp = got[0].system_properties
    assert sp.body_digest.type == pb.DigestType.MD5
    assert sp.body_digest.checksum == hashlib.md5(b"give-up").hexdigest().upper()
    fwd = stub.ForwardMessageToDeadLetterQueue(spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="GFwd"), topic=pb.Resource(name="Fwd"), receipt_handle=sp.receipt_handle,
        message_id=sp.message_id, delivery_attempt=1, max_delivery_attempts=16), metadata=MD, timeout=5)
    assert fwd.status.code == Code.OK
    dlq = wait_until(lambda: server.call(lambda: server.broker.store.query_by_key("%DLQ%GFwd", sp.message_id)))
    assert dlq[0].body == b"give-up" and dlq[0].properties["DLQ_ORIGIN_TOPIC"] == "Fwd"
    again = stub.ForwardMessageToDeadLetterQueue(spb.ForwardMessageToDeadLetterQueueRequest(
        group=pb.Resource(name="GFwd"), topic=pb.Resource(name="Fwd"), receipt_handle=sp.receipt_handle,
        message_id=sp.message_id), metadata=MD, timeout=5)
    assert again.status.code == Code.INVALID_RECEIPT_HANDLE          # done: the handle is spent
    assert server.call(lambda: server.broker.offsets.query("GFwd", "Fwd", 0)) == 1


def test_a_port_in_use_fails_start_and_leaves_nothing_running(server):
    from rocketq.grpc_endpoint import GrpcEndpoint
    listeners = server.call(lambda: len(server.broker.store.arrival_listeners))

    async def clash():
        with pytest.raises((RuntimeError, OSError)):        # grpcio's RuntimeError, the native transport's OSError
            await GrpcEndpoint(server.broker, host="127.0.0.1", port=server.endpoint.port).start()
    server.run(clash())
    assert server.call(lambda: len(server.broker.store.arrival_listeners)) == listeners


def test_a_bare_client_that_keeps_receiving_keeps_its_auto_renew_messages(tmp_path):
    """No heartbeat, no Telemetry stream: its receives are what tells the endpoint it is there."""
    import dataclasses
    s = ServerThread(tmp_path, endpoint_settings=dataclasses.replace(
        FAST, default_invisible_ms=1500, client_silent_s=1.0, session_expire_s=1.0)).start()
    try:
        s.create_topic("Bare", 1)
        with grpc.insecure_channel(s.access_point) as ch:
            st = spb_grpc.MessagingServiceStub(ch)
            assert _send(st, _msg("Bare", b"mine")) == Code.OK

            def receive():
                req = spb.ReceiveMessageRequest(group=pb.Resource(name="GBare"), message_queue=pb.MessageQueue(
                    topic=pb.Resource(name="Bare")), batch_size=4, auto_renew=True,
                    long_polling_timeout=ms_duration(300))
                return [r.message for r in st.ReceiveMessage(req, metadata=MD, timeout=10) if r.HasField("message")]
            first = wait_until(receive, what="the message")
            started = time.monotonic()
            while time.monotonic() - started < 4:         # well past the grace and the silence limit
                assert receive() == []                     # never handed out again meanwhile
            assert s.call(lambda: s.endpoint.popper.renewals) >= 2
            assert first[0].body == b"mine"
    finally:
        s.shutdown()


def test_change_invisible_duration_below_the_receive_minimum_is_accepted(server, stub):
    """As RocketMQ's proxy: only a receive must ask for minInvisibleTimeMillsForRecv; ChangeInvisibleDuration
    checks the maximum only. rocketmq-client-java's PushConsumer nacks a failed message with its retry
    backoff (1 s first), which rocketq refused, so the message stayed away for its whole receive time."""
    server.create_topic("Nack", 1)
    assert _send(stub, _msg("Nack", b"again")) == Code.OK
    wait_until(lambda: server.call(lambda: server.broker.store.max_offset("Nack", 0)) == 1, what="dispatch")
    [got] = [r.message for r in _receive(stub, "Nack", group="GNack", invisible_ms=5000) if r.HasField("message")]
    change = stub.ChangeInvisibleDuration(spb.ChangeInvisibleDurationRequest(
        group=pb.Resource(name="GNack"), topic=pb.Resource(name="Nack"), receipt_handle=got.system_properties.receipt_handle,
        invisible_duration=ms_duration(200), message_id=got.system_properties.message_id), metadata=MD, timeout=5)
    assert change.status.code == Code.OK, change.status.message
    again = wait_until(lambda: [r.message for r in _receive(stub, "Nack", group="GNack", invisible_ms=5000)
                                if r.HasField("message")], timeout_s=5, what="the message back after 200 ms")
    assert again[0].body == b"again" and again[0].system_properties.delivery_attempt == 2
