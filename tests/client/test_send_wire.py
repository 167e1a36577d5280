"""What MQClientAPI.send puts on the wire and reads back, against a real RemotingServer on loopback that
records the frames it receives: the SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE header carries exactly the strings
Java's toString gives (the hot path builds them itself, no normalising copy), and the answer's fields
become the SendResult (a queue id the broker changed included)."""

from __future__ import annotations

import asyncio

import pytest

from rocketq.client import Message, MessageQueue, MQClientError
from rocketq.client.api import MQClientAPI
from rocketq.client.model import SendStatus
from rocketq.remoting import RemotingCommand, RemotingServer, RequestCode, ResponseCode
from rocketq.remoting.command import normalize_ext_fields

WAIT_S = 5.0


class Recorder:
    def __init__(self, answer_fields: dict[str, str], code: int = ResponseCode.SUCCESS):
        self.seen: list[RemotingCommand] = []
        self.answer_fields, self.code = answer_fields, code

    async def __call__(self, conn, cmd):
        self.seen.append(cmd)
        return RemotingCommand.create_response(cmd, self.code, "stored", ext_fields=self.answer_fields)


def _typed_header(group, mq, msg, born_ms):
    """The header as the client built it before (typed values, normalised by create_request)."""
    return {"a": group, "b": mq.topic, "c": "TBW102", "d": 4, "e": mq.queue_id, "f": msg.sys_flag, "g": born_ms,
            "h": msg.flag, "i": msg.properties_string(), "j": msg.reconsume_times, "k": False}


def _send(recorder, call):
    async def main():
        server = await RemotingServer(recorder, "127.0.0.1", 0).start()
        api = MQClientAPI()
        try:
            return await asyncio.wait_for(call(api, f"127.0.0.1:{server.port}"), WAIT_S)
        finally:
            await api.close()
            await server.close()
    return asyncio.run(main())


def test_a_single_send_header_is_the_java_strings_and_the_answer_the_send_result():
    rec = Recorder({"msgId": "0A00000100002A9F0000000000000010", "queueId": "3", "queueOffset": "41"})
    mq = MessageQueue("TopicA", "broker-a", 3)
    msg = Message("TopicA", b"hello", tags="TagA", keys=["k1"], properties={"UNIQ_KEY": "ABC"})
    msg.flag, msg.reconsume_times = 7, 2
    result = _send(rec, lambda api, addr: api.send(addr, mq, msg, "PG"))
    cmd = rec.seen[0]
    assert cmd.code == RequestCode.SEND_MESSAGE_V2 and cmd.body == b"hello"
    born = cmd.ext_fields["g"]
    assert born.isdigit()
    assert cmd.ext_fields == normalize_ext_fields(_typed_header("PG", mq, msg, int(born)))
    assert all(type(v) is str for v in cmd.ext_fields.values())
    assert (result.status, result.msg_id, result.offset_msg_id, result.queue, result.queue_offset) == \
        (SendStatus.SEND_OK, "ABC", "0A00000100002A9F0000000000000010", mq, 41)


def test_a_batch_send_says_so_and_a_queue_the_broker_chose_is_the_result_queue():
    rec = Recorder({"msgId": "X,Y", "queueId": "1", "queueOffset": "8"}, ResponseCode.FLUSH_DISK_TIMEOUT)
    mq = MessageQueue("TopicB", "broker-b", 0)
    batch = [Message("TopicB", b"one", properties={"UNIQ_KEY": "U1"}),
             Message("TopicB", b"two", properties={"UNIQ_KEY": "U2"})]
    result = _send(rec, lambda api, addr: api.send(addr, mq, batch[0], "PG", batch=batch))
    cmd = rec.seen[0]
    assert cmd.code == RequestCode.SEND_BATCH_MESSAGE
    expected = normalize_ext_fields(dict(_typed_header("PG", mq, batch[0], int(cmd.ext_fields["g"])), m=True))
    assert cmd.ext_fields == expected and expected["m"] == "true" and expected["k"] == "false"
    assert (result.status, result.msg_id, result.queue, result.queue_offset) == \
        (SendStatus.FLUSH_DISK_TIMEOUT, "U1,U2", MessageQueue("TopicB", "broker-b", 1), 8)


def test_a_refused_send_names_the_code_the_remark_and_the_broker():
    rec = Recorder({}, ResponseCode.NO_PERMISSION)
    mq = MessageQueue("TopicC", "broker-c", 0)
    with pytest.raises(MQClientError) as err:
        _send(rec, lambda api, addr: api.send(addr, mq, Message("TopicC", b"x"), "PG"))
    assert err.value.code == ResponseCode.NO_PERMISSION and "stored" in str(err.value) and "127.0.0.1" in str(err.value)
