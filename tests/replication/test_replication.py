"""Master/slave replication in one process: SYNC_MASTER acknowledgements, the slave's copy, reads
from the slave when the master is gone, and config/offset synchronisation."""

import asyncio
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "client"))
from cluster import small_store  # noqa: E402
from waiting import until  # noqa: E402

from rocketq.broker.broker import Broker, BrokerSettings  # noqa: E402
from rocketq.client import ConsumeFrom, LitePullConsumer, Message, MQClientError, Producer  # noqa: E402
from rocketq.namesrv.server import NameServer  # noqa: E402
from rocketq.remoting import ResponseCode  # noqa: E402


async def _pair(tmp_path, role="SYNC_MASTER", with_slave=True):
    namesrv = await NameServer("127.0.0.1", 0, kv_path=tmp_path / "kv.json").start()
    addr = f"127.0.0.1:{namesrv.port}"
    master = await Broker(BrokerSettings(broker_name="broker-a", port=0, namesrv_addr=addr, broker_role=role,
                                         ha_listen_port=0), small_store(tmp_path / "m")).start()
    slave = None
    if with_slave:
        slave = await Broker(BrokerSettings(broker_name="broker-a", broker_id=1, port=0, namesrv_addr=addr,
                                            broker_role="SLAVE"), small_store(tmp_path / "s")).start()
        await until(lambda: master.replication.master.slaves, 20, "the slave to connect")
    return namesrv, addr, master, slave


async def _close(*parts):
    for p in parts:
        if p is not None:
            await p.close()


def test_sync_master_acknowledges_what_the_slave_has(tmp_path):
    async def main():
        namesrv, addr, master, slave = await _pair(tmp_path)
        try:
            async with Producer("PG", addr) as p:
                results = [await p.send(Message("Rep", f"r{i}".encode(), keys=[f"k{i}"])) for i in range(20)]
                batch = await p.send_batch([Message("Rep", b"b%d" % i) for i in range(10)])
            assert all(r.status.value == "SEND_OK" for r in results) and batch.status.value == "SEND_OK"
            end = master.store.max_physical_offset()
            assert slave.store.max_physical_offset() == end            # acknowledged => on the slave
            await asyncio.to_thread(slave.store.wait_dispatched)
            await until(lambda: sum(slave.store.max_offset("Rep", q) for q in range(4)) == 30, 10, "slave queues")
            same = slave.store.read_message(results[5].queue_offset * 0 + master.store.query_by_key("Rep", "k5")[0]
                                            .physical_offset)
            assert same.body == b"r5" and same.msg_id == results[5].offset_msg_id
            # the slave refuses writes
            from rocketq.client.api import MQClientAPI
            from rocketq.client.model import MessageQueue
            api = MQClientAPI()
            with pytest.raises(MQClientError) as e:
                await api.send(slave.address, MessageQueue("Rep", "broker-a", 0), Message("Rep", b"x"), "PG")
            assert e.value.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in e.value.remark
            await api.close()
        finally:
            await _close(slave, master, namesrv)
    asyncio.run(main())


def test_sync_master_without_a_slave_says_so(tmp_path):
    async def main():
        namesrv, addr, master, _ = await _pair(tmp_path, with_slave=False)
        try:
            async with Producer("PG", addr, retries=0) as p:
                r = await p.send(Message("Alone", b"x"))
            assert r.status.value == "SLAVE_NOT_AVAILABLE"
        finally:
            await _close(master, namesrv)
    asyncio.run(main())


def test_consumers_read_from_the_slave_when_the_master_is_gone(tmp_path):
    async def main():
        namesrv, addr, master, slave = await _pair(tmp_path, role="ASYNC_MASTER")
        try:
            async with Producer("PG", addr) as p:
                for i in range(40):
                    await p.send(Message("Fail", f"f{i}".encode()))
            await until(lambda: slave.store.max_physical_offset() == master.store.max_physical_offset(), 20,
                        "the slave to catch up")
            await until(lambda: slave.topics.get("Fail") is not None, 20, "topic config on the slave")
            await master.close()
            master = None
            consumer = LitePullConsumer("GID_F", addr, consume_from=ConsumeFrom.FIRST)
            consumer.subscribe("Fail")
            await consumer.start()
            got = []
            for _ in range(100):
                got += await consumer.poll(0.3)
                if len(got) >= 40:
                    break
            assert sorted(m.body for m in got) == sorted(f"f{i}".encode() for i in range(40))
            await consumer.shutdown()
        finally:
            await _close(slave, master, namesrv)
    asyncio.run(main())


def test_slave_copies_offsets_groups_and_delay_progress(tmp_path):
    async def main():
        namesrv, addr, master, slave = await _pair(tmp_path, role="ASYNC_MASTER")
        try:
            master.offsets.commit("GID_X", "T", 0, 17)
            from rocketq.broker.subscription_groups import SubscriptionGroupConfig
            master.groups.update(SubscriptionGroupConfig("GID_X", retry_max_times=3))
            async with Producer("PG", addr) as p:                # a delayed message the master delivers
                await p.send(Message("TD", b"later", delay_level=1))
            await until(lambda: master.store.schedule.offsets.get(1) == 1, 20, "the delayed message delivered")
            await slave.replication.sync.sync_once()
            assert slave.offsets.query("GID_X", "T", 0) == 17 and slave.groups.get("GID_X").retry_max_times == 3
            # delay-level progress too, on disk, so a promoted slave does not deliver it again
            assert slave.store.schedule.offsets == {1: 1}
            assert '"1": 1' in (tmp_path / "s" / "config" / "delayOffset.json").read_text()
        finally:
            await _close(slave, master, namesrv)
    asyncio.run(main())


def test_slave_read_enable_sends_cold_reads_to_the_slave(tmp_path):
    """slaveReadEnable with accessMessageInMemoryMaxRatio=0 (every record counts as cold): the master
    answers suggestWhichBrokerId=1, the consumer's next pulls go to the slave, everything is read once."""
    async def main():
        namesrv = await NameServer("127.0.0.1", 0, kv_path=tmp_path / "kv.json").start()
        addr = f"127.0.0.1:{namesrv.port}"
        cold = dict(slave_read_enable=True, access_message_in_memory_max_ratio=0)
        master = await Broker(BrokerSettings(broker_name="broker-a", port=0, namesrv_addr=addr, ha_listen_port=0,
                                             **cold), small_store(tmp_path / "m")).start()
        slave = await Broker(BrokerSettings(broker_name="broker-a", broker_id=1, port=0, namesrv_addr=addr,
                                            broker_role="SLAVE", **cold), small_store(tmp_path / "s")).start()
        try:
            async with Producer("PG", addr) as p:
                sent = {(await p.send(Message("Cold", b"c%d" % i))).msg_id for i in range(200)}
            end = master.store.max_physical_offset()
            await until(lambda: slave.store.max_physical_offset() == end, 20, "the slave to catch up")
            await asyncio.to_thread(slave.store.wait_dispatched)
            c = LitePullConsumer("COLD", addr, consume_from=ConsumeFrom.FIRST, pull_batch_size=8)
            c.subscribe("Cold")
            await c.start()
            got = []
            while len(got) < 200:
                msgs = await c.poll(5.0)
                assert msgs, f"stalled after {len(got)} messages"
                got += msgs
            await c.shutdown()
            assert {m.uniq_key for m in got} == sent and len(got) == 200
            assert slave.stats.got_messages > 0, "the slave served the cold reads"
            assert master.stats.got_messages < 200
        finally:
            await _close(slave, master, namesrv)
    asyncio.run(main())


def test_closing_the_ha_master_drops_its_slaves_connections(tmp_path):
    async def main():
        namesrv, addr, master, slave = await _pair(tmp_path, role="ASYNC_MASTER")
        try:
            assert slave.replication.slave.connected
            await master.replication.master.close()
            assert master.replication.master.slaves == {}
            await until(lambda: not slave.replication.slave.connected, 10, "the slave to see its connection closed")
        finally:
            await _close(slave, master, namesrv)
    asyncio.run(main())
