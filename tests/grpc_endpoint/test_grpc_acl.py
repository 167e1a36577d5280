"""ACL 1.0 permissions on gRPC: what each RPC needs (see rocketq.grpc_endpoint.auth), answered
FORBIDDEN when a permission is missing and UNAUTHORIZED when the signature is, with the official
client and with raw stubs, against a real endpoint and tests/acl's plain_acl.yml."""

import hashlib
import hmac
import queue
import sys
from pathlib import Path

import grpc
import pytest
from grpc_helpers import ServerThread, message, receive_all, sent_and_received, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "acl"))
from acl_fixtures import ACL_YAML, write_acl_file  # noqa: E402

from rocketq.grpc_endpoint.protocol import Code, ms_duration, pb, spb, spb_grpc  # noqa: E402

DATE = "20260101T000000Z"


def signed_md(ak: str, sk: str, client_id: str = "acl-raw-1"):
    sig = hmac.new(sk.encode(), DATE.encode(), hashlib.sha1).hexdigest()
    return [("x-mq-client-id", client_id), ("x-mq-date-time", DATE),
            ("authorization", f"MQv2-HMAC-SHA1 Credential={ak}, SignedHeaders=x-mq-date-time, Signature={sig}")]


PRODUCER = signed_md("producer", "p-secret")
CONSUMER = signed_md("consumer", "c-secret")
ADMIN = signed_md("admin", "a-secret")


def _msg(topic, body=b"x"):
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(
        message_id="01AABBCCDDEEFF000000000000000001", message_type=pb.MessageType.NORMAL))


def _send(stub, md, topic):
    return stub.SendMessage(spb.SendMessageRequest(messages=[_msg(topic)]), metadata=md, timeout=5).status


def _receive(stub, md, topic, group):
    req = spb.ReceiveMessageRequest(group=pb.Resource(name=group), message_queue=pb.MessageQueue(
        topic=pb.Resource(name=topic)), batch_size=4, invisible_duration=ms_duration(5000),
        long_polling_timeout=ms_duration(0))
    return [r.status for r in stub.ReceiveMessage(req, metadata=md, timeout=10) if r.HasField("status")]


def _config(server, ak="", sk=""):
    from rocketmq import ClientConfiguration, Credentials
    return ClientConfiguration(server.access_point, Credentials(ak, sk) if ak else Credentials(), request_timeout=5)


def _acl_server(tmp_path, text=ACL_YAML):
    write_acl_file(tmp_path, text)
    s = ServerThread(tmp_path, acl_enable=True).start()
    for topic in ("Orders", "Other", "Secret", "Audit"):
        s.create_topic(topic)
    for group in ("GID_C", "GID_D"):
        s.set_group(group)
    return s


@pytest.fixture
def acl_server(tmp_path):
    s = _acl_server(tmp_path)
    try:
        yield s
    finally:
        s.shutdown()


@pytest.fixture
def stub(acl_server):
    with grpc.insecure_channel(acl_server.access_point) as ch:
        yield spb_grpc.MessagingServiceStub(ch)


def test_pub_on_a_topic_sends_there_and_is_refused_elsewhere(acl_server, stub):
    from rocketmq import Producer
    p = Producer(_config(acl_server, "producer", "p-secret"), ("Orders",))
    p.startup()
    try:
        assert p.send(message("Orders", b"allowed")).message_id
        with pytest.raises(Exception, match="Other"):        # the client fails on the route of Other
            p.send(message("Other", b"refused"))
    finally:
        p.shutdown()
    assert _send(stub, PRODUCER, "Orders").code == Code.OK
    refused = _send(stub, PRODUCER, "Other")
    assert refused.code == Code.FORBIDDEN
    assert refused.message == "no PUB permission for topic 'Other' (AccessKey 'producer' has the default DENY)"
    route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Other")), metadata=PRODUCER, timeout=5)
    assert route.status.code == Code.FORBIDDEN and "PUB or SUB permission for topic 'Other'" in route.status.message
    # QueryRoute needs PUB or SUB: the consumer (SUB by default) may look up Orders too
    route = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="Orders")), metadata=CONSUMER, timeout=5)
    assert route.status.code == Code.OK
    # PUB only is not SUB: the producer may not receive, nor may it without a group permission
    assert [s.code for s in _receive(stub, PRODUCER, "Orders", "GID_C")] == [Code.FORBIDDEN]
    end = stub.EndTransaction(spb.EndTransactionRequest(topic=pb.Resource(name="Other"), transaction_id="x",
                                                        message_id="y"), metadata=PRODUCER, timeout=5)
    assert end.status.code == Code.FORBIDDEN and "topic 'Other'" in end.status.message
    # a bad signature stays UNAUTHORIZED, whatever the permissions
    forged = signed_md("producer", "not-the-secret")
    assert _send(stub, forged, "Orders").code == Code.UNAUTHORIZED
    assert acl_server.broker.acl.refused >= 5


def test_sub_on_topic_and_group_receives_and_a_denied_group_is_refused(acl_server, stub):
    from rocketmq import FilterExpression, SimpleConsumer
    sent_and_received(_config(acl_server, "producer", "p-secret"), _config(acl_server, "consumer", "c-secret"),
                      "Orders", "GID_C")
    denied = SimpleConsumer(_config(acl_server, "consumer", "c-secret"), "GID_D", {"Orders": FilterExpression()})
    denied.startup()
    try:
        from rocketmq.v5.exception import ForbiddenException
        with pytest.raises(ForbiddenException, match=r"no SUB permission for group 'GID_D' \(AccessKey 'consumer' "
                                                     r"has DENY\)"):
            denied.receive(4, 10)
    finally:
        denied.shutdown()
    # the same per RPC with raw stubs
    assert [s.code for s in _receive(stub, CONSUMER, "Secret", "GID_C")] == [Code.FORBIDDEN]   # topic DENY
    assert [s.code for s in _receive(stub, CONSUMER, "Orders", "GID_D")] == [Code.FORBIDDEN]
    for rpc, req in [
        ("AckMessage", spb.AckMessageRequest(group=pb.Resource(name="GID_D"), topic=pb.Resource(name="Orders"),
                                             entries=[spb.AckMessageEntry(message_id="m", receipt_handle="r")])),
        ("ChangeInvisibleDuration", spb.ChangeInvisibleDurationRequest(
            group=pb.Resource(name="GID_D"), topic=pb.Resource(name="Orders"), receipt_handle="r",
            invisible_duration=ms_duration(5000), message_id="m")),
        ("ForwardMessageToDeadLetterQueue", spb.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name="GID_D"), topic=pb.Resource(name="Orders"), receipt_handle="r", message_id="m")),
        ("QueryAssignment", spb.QueryAssignmentRequest(group=pb.Resource(name="GID_D"),
                                                       topic=pb.Resource(name="Orders"))),
        ("Heartbeat", spb.HeartbeatRequest(group=pb.Resource(name="GID_D"),
                                           client_type=pb.ClientType.SIMPLE_CONSUMER)),
        ("NotifyClientTermination", spb.NotifyClientTerminationRequest(group=pb.Resource(name="GID_D"))),
    ]:
        resp = getattr(stub, rpc)(req, metadata=CONSUMER, timeout=5)
        assert resp.status.code == Code.FORBIDDEN and "group 'GID_D'" in resp.status.message, rpc
    nameless = stub.Heartbeat(spb.HeartbeatRequest(client_type=pb.ClientType.PUSH_CONSUMER), metadata=CONSUMER,
                              timeout=5)
    assert nameless.status.code == Code.FORBIDDEN and "names no group" in nameless.status.message
    # signature only: a producer's heartbeat, a termination without group; the retry topic is the group
    ok = stub.Heartbeat(spb.HeartbeatRequest(client_type=pb.ClientType.PRODUCER), metadata=PRODUCER, timeout=5)
    assert ok.status.code == Code.OK
    bye = stub.NotifyClientTermination(spb.NotifyClientTerminationRequest(), metadata=PRODUCER, timeout=5)
    assert bye.status.code == Code.OK
    retry = stub.QueryRoute(spb.QueryRouteRequest(topic=pb.Resource(name="%RETRY%GID_D")), metadata=CONSUMER,
                            timeout=5)
    assert retry.status.code == Code.FORBIDDEN and "group 'GID_D'" in retry.status.message
    # an admin account has every permission
    assert _send(stub, ADMIN, "Secret").code == Code.OK


def test_telemetry_settings_are_checked(acl_server):
    def first_reply(md, settings, *, refused: bool):
        """The reply to *settings*; when *refused*, also what follows it with the client's side still open."""
        outgoing: queue.Queue = queue.Queue()
        outgoing.put(spb.TelemetryCommand(settings=settings))

        def requests():
            while (item := outgoing.get()) is not None:
                yield item
        with grpc.insecure_channel(acl_server.access_point) as ch:
            stream = spb_grpc.MessagingServiceStub(ch).Telemetry(requests(), metadata=md, timeout=20)
            try:
                return next(stream), list(stream) if refused else None
            finally:
                outgoing.put(None)

    pub_other = pb.Settings(client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(
        topics=[pb.Resource(name="Orders"), pb.Resource(name="Other")]))
    reply, rest = first_reply(PRODUCER, pub_other, refused=True)
    assert reply.status.code == Code.FORBIDDEN and "PUB permission for topic 'Other'" in reply.status.message
    assert rest == []                     # the server ended the stream, the client's side still open
    sub_denied = pb.Settings(client_type=pb.ClientType.SIMPLE_CONSUMER, subscription=pb.Subscription(
        group=pb.Resource(name="GID_D"), subscriptions=[pb.SubscriptionEntry(topic=pb.Resource(name="Orders"))]))
    reply, _ = first_reply(CONSUMER, sub_denied, refused=True)
    assert reply.status.code == Code.FORBIDDEN and "group 'GID_D'" in reply.status.message
    pub_orders = pb.Settings(client_type=pb.ClientType.PRODUCER, publishing=pb.Publishing(
        topics=[pb.Resource(name="Orders")]))
    reply, _ = first_reply(PRODUCER, pub_orders, refused=False)
    assert reply.status.code == Code.OK


def test_whitelisted_addresses_need_no_signature(tmp_path):
    from rocketmq import FilterExpression, Producer, SimpleConsumer
    text = ACL_YAML.replace("  - 10.10.103.*\n", "  - 10.10.103.*\n  - 127.0.0.1\n")
    s = _acl_server(tmp_path, text)
    try:
        p = Producer(_config(s), ("Secret",))                 # no credentials at all
        p.startup()
        try:
            sent = p.send(message("Secret", b"white")).message_id
        finally:
            p.shutdown()
        c = SimpleConsumer(_config(s), "GID_D", {"Secret": FilterExpression()})
        c.startup()
        try:
            got = receive_all(c, 1)
            assert [m.message_id for m in got] == [sent]
            c.ack(got[0])
        finally:
            c.shutdown()
    finally:
        s.shutdown()


def test_an_accounts_white_address_skips_signature_and_permissions(tmp_path):
    text = ACL_YAML.replace('    secretKey: "p-secret"\n',
                            '    secretKey: "p-secret"\n    whiteRemoteAddress: 127.0.0.*\n')
    s = _acl_server(tmp_path, text)
    try:
        with grpc.insecure_channel(s.access_point) as ch:
            stub = spb_grpc.MessagingServiceStub(ch)
            assert _send(stub, signed_md("producer", "wrong-secret"), "Other").code == Code.OK
            assert _send(stub, signed_md("consumer", "wrong-secret"), "Orders").code == Code.UNAUTHORIZED
            unsigned = _send(stub, [("x-mq-client-id", "c1")], "Orders")
            assert unsigned.code == Code.UNAUTHORIZED and "no AccessKey" in unsigned.message
    finally:
        s.shutdown()


def test_an_acl_file_changed_at_run_time_takes_effect(acl_server, stub, tmp_path):
    acl_file = tmp_path / "config" / "plain_acl.yml"
    acl_server.create_topic("Fresh")
    assert _send(stub, PRODUCER, "Fresh").code == Code.FORBIDDEN
    acl_file.write_text(ACL_YAML.replace("[Orders=PUB, Audit=PUB|SUB]", "[Orders=PUB, Fresh=PUB]"))
    wait_until(lambda: _send(stub, PRODUCER, "Fresh").code == Code.OK, what="PUB on Fresh after the edit")
    acl_file.write_text(ACL_YAML.replace("[Orders=PUB, Audit=PUB|SUB]", "[Orders=DENY]"))
    wait_until(lambda: _send(stub, PRODUCER, "Orders").code == Code.FORBIDDEN, what="DENY on Orders after the edit")
    assert "(AccessKey 'producer' has DENY)" in _send(stub, PRODUCER, "Orders").message


def test_pull_offsets_and_recall_need_their_permissions(acl_server, stub):
    def mq(topic):
        return pb.MessageQueue(topic=pb.Resource(name=topic), id=0)

    def pull(md, topic, group):
        req = spb.PullMessageRequest(group=pb.Resource(name=group), message_queue=mq(topic), offset=0,
                                     batch_size=4, long_polling_timeout=ms_duration(0))
        return [r.status.code for r in stub.PullMessage(req, metadata=md, timeout=10) if r.HasField("status")]

    def update(md, group):
        return stub.UpdateOffset(spb.UpdateOffsetRequest(group=pb.Resource(name=group), message_queue=mq("Orders"),
                                                         offset=0), metadata=md, timeout=5).status.code

    def get(md, group):
        return stub.GetOffset(spb.GetOffsetRequest(group=pb.Resource(name=group), message_queue=mq("Orders")),
                              metadata=md, timeout=5).status.code

    def query(md, topic):
        return stub.QueryOffset(spb.QueryOffsetRequest(message_queue=mq(topic), query_offset_policy=pb.QueryOffsetPolicy.END),
                                metadata=md, timeout=5).status.code

    def recall(md, topic):
        return stub.RecallMessage(spb.RecallMessageRequest(topic=pb.Resource(name=topic), recall_handle="x"),
                                  metadata=md, timeout=5).status

    # SUB on the topic and on the group, as remoting's PULL_MESSAGE and consumer offset requests
    assert pull(CONSUMER, "Orders", "GID_C") == [Code.MESSAGE_NOT_FOUND]
    assert pull(CONSUMER, "Orders", "GID_D") == [Code.FORBIDDEN]
    assert pull(CONSUMER, "Secret", "GID_C") == [Code.FORBIDDEN]
    assert pull(PRODUCER, "Orders", "GID_C") == [Code.FORBIDDEN]
    assert update(CONSUMER, "GID_C") == Code.OK and update(CONSUMER, "GID_D") == Code.FORBIDDEN
    assert get(CONSUMER, "GID_C") == Code.OK and get(PRODUCER, "GID_C") == Code.FORBIDDEN
    # QueryOffset: any access to the topic; RecallMessage: PUB on it
    assert query(PRODUCER, "Orders") == Code.OK and query(CONSUMER, "Orders") == Code.OK
    assert query(PRODUCER, "Other") == Code.FORBIDDEN
    refused = recall(CONSUMER, "Orders")
    assert refused.code == Code.FORBIDDEN and "PUB permission for topic 'Orders'" in refused.message
    assert recall(PRODUCER, "Orders").code == Code.BAD_REQUEST          # allowed; the handle is garbage
    assert recall(signed_md("producer", "wrong"), "Orders").code == Code.UNAUTHORIZED


def test_end_transaction_only_resolves_a_half_message_of_the_topic_it_names(acl_server, stub):
    """PUB is checked on the request's topic, so the transaction id must be a half message of that
    topic: the producer (PUB on Orders only) may not commit the admin's transaction on Secret."""
    tx = pb.Message(topic=pb.Resource(name="Secret"), body=b"held", system_properties=pb.SystemProperties(
        message_id="01AABBCCDDEEFF000000000000000002", message_type=pb.MessageType.TRANSACTION))
    sent = stub.SendMessage(spb.SendMessageRequest(messages=[tx]), metadata=ADMIN, timeout=5)
    assert sent.status.code == Code.OK
    half_id = sent.entries[0].transaction_id
    end = stub.EndTransaction(spb.EndTransactionRequest(
        topic=pb.Resource(name="Orders"), transaction_id=half_id, message_id="01AABBCCDDEEFF000000000000000002",
        resolution=pb.TransactionResolution.COMMIT), metadata=PRODUCER, timeout=5)
    assert end.status.code == Code.INVALID_TRANSACTION_ID and "'Orders'" in end.status.message
    assert acl_server.call(lambda: sum(acl_server.broker.store.max_offset("Secret", q) for q in range(8))) == 0
    end = stub.EndTransaction(spb.EndTransactionRequest(
        topic=pb.Resource(name="Secret"), transaction_id=half_id, message_id="01AABBCCDDEEFF000000000000000002",
        resolution=pb.TransactionResolution.COMMIT), metadata=ADMIN, timeout=5)
    assert end.status.code == Code.OK
    wait_until(lambda: acl_server.call(lambda: sum(acl_server.broker.store.max_offset("Secret", q)
                                                   for q in range(8))) == 1, what="the committed message")
