"""Topic attributes through the wire (issue 19 item 3): UPDATE_AND_CREATE_TOPIC's ``attributes``
header parsed, validated against RocketMQ's known attributes and merged; GET_TOPIC_CONFIG; the
declared ``message.type`` enforced on remoting sends; the attributes after a broker restart; and
``rocketq topic create -a`` / ``rocketq topic config``."""

import asyncio
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "client"))
from cluster import cluster  # noqa: E402

from rocketq.broker.topic_attributes import TopicAttributeError, alter, message_type_of, parse_modification  # noqa: E402
from rocketq.client import Admin, Message, Producer  # noqa: E402
from rocketq.client.model import MQClientError  # noqa: E402
from rocketq.remoting import ResponseCode  # noqa: E402


async def _refused(call, *says: str) -> None:
    try:
        await call
    except MQClientError as exc:
        assert all(s in str(exc) for s in says), exc
        return exc.code
    raise AssertionError(f"accepted; expected a refusal saying {says}")


def test_attributes_are_validated_merged_shown_and_kept_over_a_restart(tmp_path):
    async def main():
        async with cluster(tmp_path) as c:
            async with Admin(c.addr) as admin:
                addr = c.brokers[0].address
                await admin.create_topic("Typed", queues=2, attributes="+message.type=FIFO,+queue.type=SimpleCQ")
                cfg = await admin.api.topic_config(addr, "Typed")
                assert cfg["attributes"] == {"message.type": "FIFO", "queue.type": "SimpleCQ"}
                assert cfg["readQueueNums"] == 2
                await admin.create_topic("Typed", queues=4)           # no attributes header: they stay
                cfg = await admin.api.topic_config(addr, "Typed")
                assert cfg["attributes"]["message.type"] == "FIFO" and cfg["writeQueueNums"] == 4
                await admin.create_topic("Typed", queues=4, attributes="+message.type=DELAY")
                assert (await admin.api.topic_config(addr, "Typed"))["attributes"]["message.type"] == "DELAY"
                for attributes, says in [
                        ("+colour=red", "unsupported attribute 'colour'"),
                        ("+message.type=PURPLE", "not one of"),
                        ("+message.type=MIXED", "MIXED message type is not supported"),
                        ("+queue.type=BatchCQ", "cannot be changed"),
                        ("-cleanup.policy", "no such attribute to remove"),
                        ("message.type=FIFO", "+key=value"),
                        ("+message.type=FIFO,+message.type=NORMAL", "given twice"),
                        ("+reserve.time=24", "reserveTime not supported")]:
                    code = await _refused(admin.create_topic("Typed", queues=4, attributes=attributes), *says.split("|"))
                    assert code == ResponseCode.INVALID_PARAMETER
                await _refused(admin.create_topic("Fresh", queues=1, attributes="-message.type"),
                               "a new topic takes only +key=value")
                await _refused(admin.create_topic("Fresh", queues=1, attributes="+queue.type=BatchCQ"),
                               "queue.type=BatchCQ is not supported by rocketq")
                await _refused(admin.api.topic_config(addr, "Nowhere"), "No topic in this broker. topic: Nowhere")
                await admin.create_topic("Typed", queues=4, attributes="-message.type")
                assert (await admin.api.topic_config(addr, "Typed"))["attributes"] == {"queue.type": "SimpleCQ"}
                await admin.create_topic("Typed", queues=4, attributes="+message.type=TRANSACTION")
            port = await c.stop_broker(0)
            await c.start_broker(0, port)
            async with Admin(c.addr) as admin:
                cfg = await admin.api.topic_config(c.brokers[0].address, "Typed")
                assert cfg["attributes"] == {"message.type": "TRANSACTION", "queue.type": "SimpleCQ"}
            async with Producer("PG_TYPED", c.addr) as p:      # and still enforced after the restart
                await _refused(p.send(Message("Typed", b"plain")), "takes TRANSACTION messages", "not NORMAL")
    asyncio.run(main())


def test_a_declared_message_type_is_enforced_on_remoting_sends(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Admin(c.addr) as admin, Producer("PG_TYPES", c.addr) as p:
            for name, kind in [("OnlyNormal", "NORMAL"), ("OnlyFifo", "FIFO"), ("OnlyDelay", "DELAY")]:
                await admin.create_topic(name, queues=2, attributes=f"+message.type={kind}")
            await p.send(Message("OnlyNormal", b"ok"))
            await p.send_batch([Message("OnlyNormal", b"a"), Message("OnlyNormal", b"b")])
            code = await _refused(p.send(Message("OnlyNormal", b"later", delay_level=2)),
                                  "takes NORMAL messages", "not DELAY")
            assert code == ResponseCode.MESSAGE_ILLEGAL
            await _refused(p.send(Message("OnlyNormal", b"timed", properties={"TIMER_DELAY_SEC": "5"})), "not DELAY")
            await p.send(Message("OnlyFifo", b"by selector"))          # a remoting orderly producer marks nothing
            await p.send(Message("OnlyFifo", b"keyed"), sharding_key="order-1")
            await p.send(Message("OnlyDelay", b"later", delay_level=1))
            await _refused(p.send(Message("OnlyDelay", b"now")), "takes DELAY messages", "not NORMAL")
            await _refused(p.send_batch([Message("OnlyDelay", b"a")]), "not NORMAL")
            await p.send(Message("Untyped", b"anything", delay_level=1))   # no attribute: anything goes
    asyncio.run(main())


def test_the_attribute_rules_as_a_library():
    assert parse_modification("+a=1,-b") == {"+a": "1", "-b": ""}
    assert parse_modification("") == {} and parse_modification(None) == {}
    with pytest.raises(TopicAttributeError, match="removing is written -key"):
        parse_modification("+a")
    current = {"message.type": "FIFO", "queue.type": "SimpleCQ"}
    assert alter(current, {"+queue.type": "SimpleCQ"}, create=False) == current    # the same value: no change
    assert alter(current, {}, create=False) == current
    with pytest.raises(TopicAttributeError, match="MIXED"):
        alter({}, {"+message.type": "MIXED"}, create=True)
    assert alter({}, {"+message.type": "MIXED"}, create=True, allow_mixed=True) == {"message.type": "MIXED"}
    assert message_type_of("TRAN_MSG\x01true\x02") == "TRANSACTION"
    assert message_type_of("A\x01x\x02DELAY\x013\x02") == "DELAY"
    assert message_type_of("XDELAY\x013\x02__SHARDINGKEY\x01k\x02") == "FIFO"
    assert message_type_of("TRAN_MSG\x01false\x02") == "NORMAL"


def test_the_command_line(tmp_path):
    from click.testing import CliRunner

    from rocketq.cli.main import cli

    async def up(started: asyncio.Event, stop: asyncio.Event, box: dict):
        async with cluster(tmp_path) as c:
            box["addr"] = c.addr
            started.set()
            await stop.wait()

    import threading
    loop = asyncio.new_event_loop()
    started, stop, box = asyncio.Event(), asyncio.Event(), {}
    t = threading.Thread(target=loop.run_until_complete, args=(up(started, stop, box),), daemon=True)
    t.start()
    asyncio.run_coroutine_threadsafe(started.wait(), loop).result(30)
    try:
        runner = CliRunner(env={"COLUMNS": "240"})
        r = runner.invoke(cli, ["topic", "create", "CliTyped", "--queues", "2", "-a", "+message.type=DELAY",
                                "--namesrv", box["addr"]])
        assert r.exit_code == 0, r.output
        r = runner.invoke(cli, ["topic", "config", "CliTyped", "--json", "--namesrv", box["addr"]])
        assert r.exit_code == 0, r.output
        [(_, cfg)] = json.loads(r.stdout)["brokers"].items()
        assert cfg["attributes"] == {"message.type": "DELAY"} and cfg["readQueueNums"] == 2
        r = runner.invoke(cli, ["topic", "create", "CliTyped", "-a", "+colour=red", "--namesrv", box["addr"]])
        assert r.exit_code == 1 and "unsupported attribute 'colour'" in r.output
    finally:
        loop.call_soon_threadsafe(stop.set)
        t.join(30)
