"""Request-reply (issue 19 item 5): Producer.request with a timeout, a responder replying with
create_reply_message through SEND_REPLY_MESSAGE_V2, the broker pushing the reply with
PUSH_REPLY_MESSAGE_TO_CLIENT to the requester, CLUSTER stamped on sends, and the refusals."""

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402

from rocketq.client import (ConsumeResult, Message, MQClientError, Producer, PushConsumer,  # noqa: E402
                            RequestTimeout, create_reply_message)
from rocketq.client.model import MessageQueue  # noqa: E402
from rocketq.remoting import ResponseCode  # noqa: E402


def test_request_reply_round_trips_and_a_timeout(tmp_path):
    async def main():
        async with cluster(tmp_path, brokers=2) as c, Producer("PG_REQ", c.addr) as requester, \
                Producer("PG_RESP", c.addr) as replier:
            answered = []

            async def respond(msgs):
                m = msgs[0]
                answered.append(m.properties.get("CLUSTER"))
                await replier.send(create_reply_message(m, b"re: " + m.body))
                return ConsumeResult.CONSUME_SUCCESS

            responder = PushConsumer("GID_RESPONDER", c.addr, listener=respond)
            responder.subscribe("Questions")
            await requester.send(Message("Questions", b"warm-up"))       # the topic exists on both brokers
            await responder.start()
            try:
                for i in range(5):
                    reply = await requester.request(Message("Questions", f"q{i}".encode()), timeout_s=10)
                    assert reply.body == f"re: q{i}".encode()
                    assert reply.topic == "DefaultCluster_REPLY_TOPIC"
                    assert reply.properties["MSG_TYPE"] == "reply" and "PUSH_REPLY_TIME" in reply.properties
                assert "DefaultCluster" in answered                  # the broker stamped CLUSTER on the request
            finally:
                await responder.shutdown()
            started = time.monotonic()
            try:
                await requester.request(Message("Unanswered", b"anyone?"), timeout_s=1.0)
                raise AssertionError("a request nobody answers returned")
            except RequestTimeout as exc:
                assert 0.9 <= time.monotonic() - started < 5 and "timed out after 1 s" in str(exc)
    asyncio.run(main())


def test_reply_refusals_and_the_stored_reply(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG_RESP2", c.addr) as replier:
            stray = Message("DefaultCluster_REPLY_TOPIC", b"late", properties={
                "MSG_TYPE": "reply", "CORRELATION_ID": "c-1", "REPLY_TO_CLIENT": "10.0.0.9@gone", "TTL": "3000"})
            mq = MessageQueue("DefaultCluster_REPLY_TOPIC", "broker-a", 0)
            addr = c.brokers[0].address
            for msg, says in [(stray, "channel of <10.0.0.9@gone> not found"),
                              (Message("DefaultCluster_REPLY_TOPIC", b"who?", properties={"MSG_TYPE": "reply"}),
                               "[REPLY_TO_CLIENT] is null")]:
                try:
                    await replier.instance.api.send(addr, mq, msg, "PG_RESP2")
                    raise AssertionError("reply to nobody accepted")
                except MQClientError as exc:
                    assert exc.code == ResponseCode.SYSTEM_ERROR and says in exc.remark, exc
            await asyncio.to_thread(c.brokers[0].store.wait_dispatched)
            stored = c.brokers[0].store.get_messages("DefaultCluster_REPLY_TOPIC", 0, 0, 10)
            assert [m.body for m in stored.messages] == [b"late", b"who?"]      # kept, as storeReplyMessageEnable
            try:
                create_reply_message(Message("T", b"x"), b"y")
                raise AssertionError("a reply without CLUSTER was made")
            except MQClientError as exc:
                assert "CLUSTER" in str(exc)
    asyncio.run(main())
