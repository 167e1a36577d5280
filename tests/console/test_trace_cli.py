"""``rocketq message trace MSGID`` against rocketq serve with traceTopicEnable: the records a traced
producer and consumer sent to RMQ_SYS_TRACE_TOPIC, shown as the message's path."""

import asyncio
import json
import time

from console_helpers import rocketq, served  # noqa: F401 (a fixture)

from rocketq.client import Message, Producer
from rocketq.common import trace


def test_message_trace_shows_sent_and_consumed_steps(served):
    ns = ("--namesrv", served.namesrv)
    r = rocketq("send", "TracedT", "hello", "--key", "tk-1", *ns)
    assert r.exit_code == 0, r.output
    msg_id = r.stdout.split("msgId=")[1].split()[0]
    r = rocketq("message", "trace", msg_id, *ns)
    assert r.exit_code == 1 and "no trace record names message" in r.stderr
    now = int(time.time() * 1000)
    records = [trace.TraceRecord(trace.PUB, msg_id=msg_id, timestamp_ms=now, group="PID_T", topic="TracedT",
                                 keys="tk-1", store_host="127.0.0.1:10911", body_length=5, cost_ms=1,
                                 msg_type="Normal_Msg", success=True),
               trace.TraceRecord(trace.SUB_BEFORE, msg_id=msg_id, timestamp_ms=now + 5, group="GID_T",
                                 request_id="r1", keys="tk-1"),
               trace.TraceRecord(trace.SUB_AFTER, msg_id=msg_id, request_id="r1", cost_ms=3, success=False,
                                 keys="tk-1", timestamp_ms=now + 8)]

    async def send():          # one trace message holding all three records, as AsyncTraceDispatcher batches
        async with Producer("PID_TRACE_SENDER", served.namesrv) as producer:
            await producer.send(Message(topic=trace.TRACE_TOPIC, body="".join(map(trace.encode, records)).encode(),
                                        keys=[msg_id, "tk-1"]))
    asyncio.run(send())
    r = rocketq("message", "trace", msg_id, "--json", *ns)
    assert r.exit_code == 0, r.output
    steps = json.loads(r.stdout)
    assert [(s["kind"], s["group"], s["status"]) for s in steps] == [
        ("sent", "PID_T", "success"), ("delivered", "GID_T", "pulled"), ("consumed", "GID_T", "failed")]
    r = rocketq("message", "trace", msg_id, *ns)
    assert r.exit_code == 0 and "PID_T" in r.stdout and "consumed" in r.stdout
