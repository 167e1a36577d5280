"""Operator commands (issue 19 item 6): resetting a group's offsets while its consumers run
(INVOKE_BROKER_TO_RESET_OFFSET, RESET_CONSUMER_CLIENT_OFFSET, the reset answered on the next pull),
and reading / changing a running broker's settings (GET / UPDATE_BROKER_CONFIG), through rocketq's
client and its command line."""

import asyncio
import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402
from waiting import until  # noqa: E402

from rocketq.client import (Admin, ConsumeFrom, LitePullConsumer, Message, MQClientError, PopConsumer,  # noqa: E402
                            Producer, PushConsumer)
from rocketq.client.model import MessageQueue  # noqa: E402
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode  # noqa: E402


async def _fill(p: Producer, topic: str, n: int) -> None:
    for i in range(n):
        await p.send(Message(topic, f"m{i}".encode()), queue=MessageQueue(topic, "broker-a", i % 2))


def test_running_consumers_move_to_the_reset_position_without_a_restart(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p, Admin(c.addr) as admin:
            await admin.create_topic("Replay", queues=2)
            await _fill(p, "Replay", 10)
            pushed: list[bytes] = []
            push = PushConsumer("GID_PUSH", c.addr, listener=lambda msgs: pushed.extend(m.body for m in msgs),
                                consume_from=ConsumeFrom.FIRST)
            push.subscribe("Replay")
            lite = LitePullConsumer("GID_LITE", c.addr, consume_from=ConsumeFrom.FIRST)
            lite.subscribe("Replay")
            polled: list[bytes] = []
            await push.start()
            await lite.start()
            try:
                async def poll_until(n):
                    deadline = time.monotonic() + 30
                    while len(polled) < n:
                        polled.extend(m.body for m in await lite.poll(0.5))
                        assert time.monotonic() < deadline, f"polled {len(polled)} of {n}"
                await until(lambda: len(pushed) == 10, 30, "the first ten pushed")
                await poll_until(10)
                await push.offsets.persist()
                await lite.commit()
                for group in ("GID_PUSH", "GID_LITE"):
                    offsets = await admin.reset_offset(group, "Replay", 0)       # earliest
                    assert sorted(offsets.values()) == [0, 0]
                await until(lambda: len(pushed) == 20, 30, "the ten again, pushed")
                await poll_until(20)
                assert sorted(pushed) == sorted(pushed[:10] * 2) and sorted(polled[10:]) == sorted(polled[:10])
                assert await admin.reset_offset("GID_PUSH", "Replay", -1) != {}           # latest
                await _fill(p, "Replay", 2)
                await until(lambda: len(pushed) == 22, 30, "only the new two")
                await asyncio.sleep(0.5)
                assert len(pushed) == 22
            finally:
                await push.shutdown()
                await lite.shutdown()
    asyncio.run(main())


def test_the_reset_holds_against_stale_commits_and_answers_the_next_pull(tmp_path):
    """A consumer that ignores RESET_CONSUMER_CLIENT_OFFSET (a Java client too old, or none online):
    its stale commit is ignored and its next pull is told where to go."""
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p, Admin(c.addr) as admin:
            await admin.create_topic("Moved", queues=1)
            for i in range(6):
                await p.send(Message("Moved", f"m{i}".encode()), queue=MessageQueue("Moved", "broker-a", 0))
            api, addr, mq = admin.api, c.brokers[0].address, MessageQueue("Moved", "broker-a", 0)
            await api.update_offset(addr, "GID_OLD", mq, 6)
            c.brokers[0].groups.get("GID_OLD", create=True)
            before = time.time() * 1000
            assert (await admin.reset_offset("GID_OLD", "Moved", int(before) - 60_000)) == {mq: 0}
            await api.update_offset(addr, "GID_OLD", mq, 6)                  # stale: ignored
            assert await api.query_offset(addr, "GID_OLD", mq) == 0
            r = await api.pull(addr, mq, "GID_OLD", 6)
            assert r.status.name == "OFFSET_ILLEGAL" and r.next_begin_offset == 0
            r = await api.pull(addr, mq, "GID_OLD", 0)                        # there now: served
            assert [m.body for m in r.messages] == [f"m{i}".encode() for i in range(6)]
            await api.update_offset(addr, "GID_OLD", mq, 6)                  # the reset is done: commits count
            assert await api.query_offset(addr, "GID_OLD", mq) == 6
            for bad, code in [({"group": "GID_NOBODY"}, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
                              ({"topic": "Nowhere"}, ResponseCode.TOPIC_NOT_EXIST)]:
                header = {"topic": "Moved", "group": "GID_OLD", "timestamp": 0, "isForce": True, **bad}
                resp = await api.client(addr).invoke(RemotingCommand.create_request(
                    RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header), timeout_s=5)
                assert resp.code == code, resp.remark
    asyncio.run(main())


def test_a_reset_moves_pop_consumers_too(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p, Admin(c.addr) as admin, \
                PopConsumer("GID_POPRESET", c.addr) as pc:
            await admin.create_topic("Popped", queues=2)
            await _fill(p, "Popped", 4)
            got = await pc.receive("Popped", 32, invisible_s=60)
            await pc.ack_all(got)
            assert len(got) == 4 and await pc.receive("Popped", 32, invisible_s=60) == []
            await admin.reset_offset("GID_POPRESET", "Popped", 0)
            again = await pc.receive("Popped", 32, invisible_s=60)
            assert sorted(m.body for m in again) == sorted(m.body for m in got)
    asyncio.run(main())


def test_broker_config_get_and_set(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p, Admin(c.addr) as admin:
            addr = c.brokers[0].address
            [(_, cfg)] = (await admin.broker_configs()).items()
            assert cfg["enablePropertyFilter"] == "false" and cfg["brokerName"] == "broker-a"
            assert cfg["flushDiskType"] == "ASYNC_FLUSH" and "transactionTimeOut" in cfg
            mq = MessageQueue("Cfg", "broker-a", 0)
            await p.send(Message("Cfg", b"x", properties={"a": "1"}), queue=mq)
            try:
                await admin.api.pull(addr, mq, "G", 0, expression="a = '1'", expression_type="SQL92")
                raise AssertionError("SQL served with enablePropertyFilter off")
            except MQClientError as exc:
                assert "filter message by SQL92" in exc.remark     # RocketMQ's words
            answers = await admin.update_broker_config({"enablePropertyFilter": "true", "flushDiskType": "SYNC_FLUSH"})
            assert answers == {addr: "applied now: enablePropertyFilter; saved, takes effect after a restart: "
                                     "flushDiskType"}
            r = await admin.api.pull(addr, mq, "G", 0, expression="a = '1'", expression_type="SQL92")
            assert [m.body for m in r.messages] == [b"x"]                     # in effect without a restart
            cfg = (await admin.broker_configs(addr))[addr]
            assert cfg["enablePropertyFilter"] == "true" and cfg["flushDiskType"] == "ASYNC_FLUSH"
            saved = (Path(c.brokers[0].store.config.store_path) / "config" / "broker.properties").read_text()
            assert "enablePropertyFilter=true" in saved and "flushDiskType=SYNC_FLUSH" in saved
            for bad, says in [({"colour": "red"}, "colour is not a broker or store setting"),
                              ({"transactionCheckMax": "many"}, "transactionCheckMax=many"),
                              ({"defaultMessageRequestMode": "PUSH"}, "is not PULL or POP")]:
                try:
                    await admin.update_broker_config(bad)
                    raise AssertionError(f"{bad} accepted")
                except MQClientError as exc:
                    assert exc.code == ResponseCode.INVALID_PARAMETER and says in exc.remark, exc
    asyncio.run(main())


def test_saved_settings_are_read_at_the_next_start(tmp_path):
    from rocketq.cli.serve_cmd import load_config
    store = tmp_path / "store"
    (store / "config").mkdir(parents=True)
    (store / "config" / "broker.properties").write_text("enablePropertyFilter=true\nflushDiskType=SYNC_FLUSH\n")
    conf = tmp_path / "broker.conf"
    conf.write_text("enablePropertyFilter=false\nbrokerName=broker-z\n")
    cfg = load_config(conf, store, None, None, None, None, ())
    assert cfg.broker.enable_property_filter and cfg.store.flush_disk_type == "SYNC_FLUSH"    # saved wins over the file
    assert cfg.broker.broker_name == "broker-z"
    cfg = load_config(conf, store, None, None, "ASYNC_FLUSH", None, ())
    assert cfg.store.flush_disk_type == "ASYNC_FLUSH"                                       # flags win over saved


def test_the_command_line(tmp_path):
    from click.testing import CliRunner

    from rocketq.cli.main import cli
    loop = asyncio.new_event_loop()
    started, box = threading.Event(), {}

    async def up(stop: asyncio.Event):
        async with cluster(tmp_path) as c, Producer("PG", c.addr) as p, Admin(c.addr) as admin:
            await admin.create_topic("CliReplay", queues=1)
            for i in range(3):
                await p.send(Message("CliReplay", f"m{i}".encode()), queue=MessageQueue("CliReplay", "broker-a", 0))
            await admin.api.update_offset(c.brokers[0].address, "GID_CLI", MessageQueue("CliReplay", "broker-a", 0), 3)
            c.brokers[0].groups.get("GID_CLI", create=True)
            box["addr"] = c.addr
            started.set()
            await stop.wait()

    stop = asyncio.Event()
    t = threading.Thread(target=loop.run_until_complete, args=(up(stop),), daemon=True)
    t.start()
    assert started.wait(30)
    try:
        runner = CliRunner(env={"COLUMNS": "240"})
        ns = ["--namesrv", box["addr"]]
        r = runner.invoke(cli, ["group", "reset-offset", "GID_CLI", "--topic", "CliReplay", "--to", "earliest",
                                "--json", *ns])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["queues"] == [{"broker": "broker-a", "queue_id": 0, "offset": 0}]
        r = runner.invoke(cli, ["group", "reset-offset", "GID_CLI", "--topic", "CliReplay", "--to", "yesterday", *ns])
        assert r.exit_code == 2 and "is not earliest, latest" in r.output
        r = runner.invoke(cli, ["broker", "config", "set", "maxFilterMessageSize=32000", *ns])
        assert r.exit_code == 0 and "applied now: maxFilterMessageSize" in r.stdout, r.output
        r = runner.invoke(cli, ["broker", "config", "get", "maxFilterMessageSize", "--json", *ns])
        assert r.exit_code == 0, r.output
        assert list(json.loads(r.stdout).values()) == [{"maxFilterMessageSize": "32000"}]
    finally:
        loop.call_soon_threadsafe(stop.set)
        t.join(30)
