"""SQL92 property filters through the wire: rocketq's producer, PULL_MESSAGE with expressionType
SQL92, CHECK_CLIENT_CONFIG, long polling, a push consumer, and enablePropertyFilter.

The table below is the documented behaviour of RocketMQ's selector (RocketMQ's "message filtering"
guide: numeric comparison >, >=, <, <=, BETWEEN, =; character comparison =, <>, IN; IS NULL / IS
NOT NULL; AND, OR, NOT; TRUE / FALSE; the 5.x CONTAINS / STARTSWITH / ENDSWITH) and of its
evaluator where the guide is silent: a property is a String compared with a literal by converting
it to the literal's type (Integer, Long or Double), a conversion that fails makes the message not
match, and a null (absent) property makes a comparison unknown, which does not match either.
"""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "client"))
from cluster import cluster  # noqa: E402
from waiting import until  # noqa: E402

from rocketq.client import Message, Producer  # noqa: E402
from rocketq.client.model import MessageQueue, MQClientError, PullStatus  # noqa: E402
from rocketq.client.push_consumer import PushConsumer  # noqa: E402
from rocketq.filter import FilterError  # noqa: E402
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode  # noqa: E402

TOPIC = "Shop"
# message number -> (tag, user properties)
MESSAGES = {
    0: ("TagA", {"a": "1", "b": "x"}),
    1: ("TagB", {"a": "5", "b": "y"}),
    2: (None, {"a": "10", "b": "x", "c": "true"}),
    3: (None, {"a": "10.5", "b": "z"}),
    4: (None, {"a": "abc"}),
    5: (None, {}),
    6: (None, {"a": "-3", "b": "it's"}),
    7: (None, {"a": "3000000000", "c": "TRUE"}),
    8: (None, {"a": " 7 ", "b": "x"}),
}
ALL = set(MESSAGES)
TABLE = [
    ("a > 3", {1, 2}),                       # "10.5", "abc", 3000000000 (not an Integer), " 7 " do not convert
    ("a > 3.0", {1, 2, 3, 7, 8}),            # Double.valueOf takes them (and trims " 7 ")
    ("a >= 5 AND a <= 10", {1, 2}),
    ("a BETWEEN 5 AND 10", {1, 2}),
    ("a NOT BETWEEN 5 AND 10", {0, 6}),      # null a (5): unknown; unconvertible: no match
    ("a = 10", {2}),
    ("a = '10'", {2}),
    ("a <> '10'", ALL - {2, 5}),             # absent a: unknown, not a match
    ("a = 3000000000", {7}),                 # a Long literal
    ("a > 1e9", {7}),
    ("a > -5", {0, 1, 2, 6}),
    ("-a < 0", set()),                       # minus of a String is null
    ("a IS NULL", {5}),
    ("a IS NOT NULL", ALL - {5}),
    ("zzz IS NULL", ALL),
    ("b IN ('x', 'y')", {0, 1, 2, 8}),
    ("b NOT IN ('x', 'y')", {3, 6}),         # absent b: unknown
    ("b = 'it''s'", {6}),
    ("b CONTAINS 'x'", {0, 2, 8}),
    ("b NOT CONTAINS 'x'", {1, 3, 6}),       # absent b: false
    ("b STARTSWITH 'it'", {6}),
    ("b ENDSWITH 's'", {6}),
    ("TAGS = 'TagA'", {0}),
    ("TAGS IN ('TagA', 'TagB')", {0, 1}),
    ("TAGS IS NULL", ALL - {0, 1}),
    ("c = TRUE", {2, 7}),                    # Boolean.valueOf("TRUE") is true
    ("TRUE = c", set()),                     # RocketMQ throws on a Boolean left of a String
    ("c", set()),                            # a bare property: a String is never TRUE
    ("NOT (a > 3)", {0, 6}),
    ("a > 3 OR b = 'z'", {1, 2}),            # 3's a = '10.5' throws before b = 'z' is looked at
    ("b = 'z' OR a > 3", {1, 2, 3}),
    ("a > 3 AND b = 'x'", {2}),
    ("(a = '1' OR a = '5') AND b = 'y'", {1}),
    ("a IS NULL OR a = '1'", {0, 5}),
    ("a = b", {5}),                          # both absent: equal
    ("a <> b", ALL - {5}),
    ("TRUE", ALL),
    ("FALSE", set()),
    ("NULL", set()),
    ("a = 1 -- up to the line's end\n", {0}),
]


async def _send_all(p: Producer) -> None:
    mq = MessageQueue(TOPIC, "broker-a", 0)
    for n, (tag, props) in MESSAGES.items():
        await p.send(Message(TOPIC, str(n).encode(), tags=tag, properties=dict(props)), queue=mq)


async def _matched(api, addr: str, expression: str) -> set[int]:
    r = await api.pull(addr, MessageQueue(TOPIC, "broker-a", 0), "GID_TABLE", 0, max_nums=32,
                       expression=expression, expression_type="SQL92")
    return {int(m.body) for m in r.messages}


def test_the_table_of_expressions_and_messages(tmp_path):
    async def main():
        async with cluster(tmp_path, enable_property_filter=True) as c, Producer("PG", c.addr) as p:
            await _send_all(p)
            addr = c.brokers[0].address
            wrong = [f"{e!r}: got {sorted(got)} want {sorted(want)}"
                     for e, want in TABLE if (got := await _matched(p.instance.api, addr, e)) != want]
            assert not wrong, "\n".join(wrong)
    asyncio.run(main())


def test_refusals_over_the_wire(tmp_path):
    async def main():
        async with cluster(tmp_path, enable_property_filter=True) as c, Producer("PG", c.addr) as p:
            await _send_all(p)
            api, addr = p.instance.api, c.brokers[0].address
            try:
                await _matched(api, addr, "a > 'x' AND b = 1")
                raise AssertionError("a bad selector was served")
            except MQClientError as exc:
                assert exc.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "position 5" in str(exc), exc
            try:
                await api.check_client_config(addr, "GID_TABLE", "c1", TOPIC, "a >", "SQL92")
                raise AssertionError("CHECK_CLIENT_CONFIG passed a bad selector")
            except MQClientError as exc:
                assert exc.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and "position 4" in str(exc), exc
            await api.check_client_config(addr, "GID_TABLE", "c1", TOPIC, "a > 1", "SQL92")
            await api.check_client_config(addr, "GID_TABLE", "c1", TOPIC, "any || thing", "TAG")
    asyncio.run(main())


def test_enable_property_filter_off_refuses_sql_with_rocketmqs_error(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            await _send_all(p)
            api, addr = p.instance.api, c.brokers[0].address
            for call in (_matched(api, addr, "a > 1"),
                         api.check_client_config(addr, "G", "c1", TOPIC, "a > 1", "SQL92")):
                try:
                    await call
                    raise AssertionError("SQL92 served with enablePropertyFilter off")
                except MQClientError as exc:
                    assert exc.code == ResponseCode.SYSTEM_ERROR
                    assert "does not support consumer to filter message by SQL92" in str(exc)
            consumer = PushConsumer("GID_OFF", c.addr, listener=lambda msgs: None)
            consumer.subscribe(TOPIC, "a > 1", expression_type="SQL92")
            try:
                await consumer.start()                       # CHECK_CLIENT_CONFIG, as Java's consumers do
                raise AssertionError("a consumer started with a filter the broker does not serve")
            except MQClientError as exc:
                assert "enablePropertyFilter" in str(exc)
            finally:
                await consumer.shutdown()
    asyncio.run(main())


def test_a_selective_filter_over_a_backlog_returns_every_match_in_order(tmp_path):
    """1 % of 5,000 messages match; reads of 800 units, cut at maxMsgNums, go on where they stopped."""
    async def main():
        async with cluster(tmp_path, enable_property_filter=True) as c, Producer("PG", c.addr) as p:
            mq = MessageQueue("Backlog", "broker-a", 0)
            for start in range(0, 5_000, 500):
                await p.send_batch([Message("Backlog", str(i).encode(), properties={"n": str(i)})
                                    for i in range(start, start + 500)], queue=mq)
            await asyncio.to_thread(c.brokers[0].store.wait_dispatched)
            api, addr, offset, got, pulls = p.instance.api, c.brokers[0].address, 0, [], 0
            while offset < 5_000:
                r = await api.pull(addr, mq, "GID_BACKLOG", offset, max_nums=3,
                                   expression="n IN ('7','1007','2007','3007','4007') OR (n > 4900 AND n < 4946)",
                                   expression_type="SQL92")
                pulls += 1
                assert r.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG, PullStatus.NO_NEW_MSG), r.status
                got += [int(m.body) for m in r.messages]
                assert r.next_begin_offset > offset or r.status == PullStatus.NO_NEW_MSG
                offset = r.next_begin_offset
            assert got == [7, 1007, 2007, 3007, 4007, *range(4901, 4946)]
            assert pulls < 40                                # 800 units a read, not one message a pull
    asyncio.run(main())


def test_long_polling_waits_past_what_the_filter_drops(tmp_path):
    async def main():
        async with cluster(tmp_path, enable_property_filter=True) as c, Producer("PG", c.addr) as p:
            mq = MessageQueue("Poll", "broker-a", 0)
            await p.send(Message("Poll", b"first", properties={"k": "0"}), queue=mq)
            api, addr = p.instance.api, c.brokers[0].address
            pull = asyncio.create_task(api.pull(addr, mq, "GID_POLL", 1, expression="k = 2",
                                                expression_type="SQL92", suspend_ms=10_000))
            await asyncio.sleep(0.2)
            await p.send(Message("Poll", b"dropped", properties={"k": "1"}), queue=mq)
            await asyncio.sleep(0.2)
            assert not pull.done()                           # woken, read, dropped: still waiting
            await p.send(Message("Poll", b"wanted", properties={"k": "2"}), queue=mq)
            r = await asyncio.wait_for(pull, 10)
            assert [m.body for m in r.messages] == [b"wanted"] and r.next_begin_offset == 3
            # nothing that passes before the time is up: NO_NEW_MSG with the offset past what was dropped
            await p.send(Message("Poll", b"dropped too", properties={"k": "1"}), queue=mq)
            r = await api.pull(addr, mq, "GID_POLL", 3, expression="k = 2", expression_type="SQL92", suspend_ms=500)
            assert r.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG) and r.next_begin_offset == 4
    asyncio.run(main())


def test_a_push_consumer_with_a_selector_gets_only_what_it_selects(tmp_path):
    async def main():
        async with cluster(tmp_path, enable_property_filter=True) as c, Producer("PG", c.addr) as p:
            consumer = PushConsumer("GID_SQL", c.addr, listener=lambda msgs: got.extend(m.body for m in msgs))
            try:
                consumer.subscribe("Orders", "region = 'eu' AND amount >", expression_type="SQL92")
                raise AssertionError("a bad selector was accepted at subscribe")
            except FilterError as exc:
                assert "position 27" in str(exc)
            got: list[bytes] = []
            consumer.subscribe("Orders", "region = 'eu' AND amount > 100", expression_type="SQL92")
            await consumer.start()
            try:
                for i, (region, amount) in enumerate([("eu", 50), ("eu", 150), ("us", 500), ("eu", 101)]):
                    await p.send(Message("Orders", f"o{i}".encode(), properties={"region": region,
                                                                                "amount": str(amount)}))
                await until(lambda: len(got) >= 2, 30, "the two selected orders")
                await asyncio.sleep(0.5)
                assert sorted(got) == [b"o1", b"o3"]
            finally:
                await consumer.shutdown()
    asyncio.run(main())


def test_check_client_config_body_as_java_sends_it(tmp_path):
    """The JSON a Java consumer's checkClientInBroker sends (fastjson field order, extra fields)."""
    async def main():
        async with cluster(tmp_path, enable_property_filter=True) as c, Producer("PG", c.addr) as p:
            body = (b'{"clientId":"10.0.0.1@1234","group":"GID_J","subscriptionData":{"classFilterMode":false,'
                    b'"codeSet":[],"expressionType":"SQL92","subString":"a between 1 and 3","subVersion":1700000000000,'
                    b'"tagsSet":[],"topic":"Shop"}}')
            r = await p.instance.api.client(c.brokers[0].address).invoke(
                RemotingCommand.create_request(RequestCode.CHECK_CLIENT_CONFIG, {}, body), timeout_s=5)
            assert r.code == ResponseCode.SUCCESS, r.remark
    asyncio.run(main())


def test_a_sparse_tag_is_found_in_one_pull_and_a_dense_run_after_it_is_cut_at_max_nums(tmp_path):
    """A tag filter reads past a run of other tags within the 800-unit window (RocketMQ's
    maxFilterMessageSize) instead of answering "no match" every maxMsgNums units."""
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p:
            mq = MessageQueue("Sparse", "broker-a", 0)
            await p.send_batch([Message("Sparse", b"o", tags="Other") for _ in range(500)], queue=mq)
            await p.send_batch([Message("Sparse", f"w{i}".encode(), tags="Wanted") for i in range(50)], queue=mq)
            await asyncio.to_thread(c.brokers[0].store.wait_dispatched)
            api, addr = p.instance.api, c.brokers[0].address
            r = await api.pull(addr, mq, "GID_SPARSE", 0, max_nums=32, expression="Wanted")
            assert [m.body for m in r.messages] == [f"w{i}".encode() for i in range(32)]
            assert r.next_begin_offset == 532
            r = await api.pull(addr, mq, "GID_SPARSE", 532, max_nums=32, expression="Wanted")
            assert [m.body for m in r.messages] == [f"w{i}".encode() for i in range(32, 50)]
            assert r.next_begin_offset == 550
    asyncio.run(main())
