"""What a consumer is handed for a pulled record, end to end: a real broker, real sends, a
LitePullConsumer; every attribute of every message polled equals what the pure-Python reader
(``StoredMessage``, the reference) reads from the broker's own CommitLog at that offset."""

import asyncio
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402

from rocketq.client import ConsumeFrom, LitePullConsumer, Message, Producer  # noqa: E402
from rocketq.common.sysflag import COMPRESSED, MAX_INFLATED_BODY_BYTES, plain_body  # noqa: E402

FIELDS = ("total_size", "magic", "body_crc", "queue_id", "flag", "queue_offset", "physical_offset", "sys_flag",
          "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
          "prepared_transaction_offset", "raw", "body", "topic", "properties_string", "properties", "tags", "keys",
          "uniq_key", "msg_id")


def test_polled_messages_read_as_the_store_reads_them(tmp_path):
    async def main():
        async with cluster(tmp_path) as c, Producer("PG_DEC", c.addr) as p:
            sent = {}
            for i in range(40):
                msg = Message("Dec", bytes(range(1 + i % 7)) * (i + 1), tags=f"t{i % 3}" if i % 4 else None,
                              keys=[f"k{i}", "shared"] if i % 2 else None,
                              properties={"region": "eu", "ключ": "значение"} if i % 5 == 0 else {})
                r = await p.send(msg)
                sent[r.offset_msg_id] = (msg.body, r.msg_id)
            await p.send_batch([Message("Dec", f"b{i}".encode(), tags="batch") for i in range(30)])
            consumer = LitePullConsumer("GID_DEC", c.addr, consume_from=ConsumeFrom.FIRST, pull_batch_size=16)
            consumer.subscribe("Dec")
            await consumer.start()
            got, deadline = [], time.monotonic() + 30
            while len(got) < 70 and time.monotonic() < deadline:
                got += await consumer.poll(0.5)
            await consumer.shutdown()
            assert len(got) == 70
            store = c.brokers[0].store
            for m in got:
                ref = store.read_message(m.physical_offset)
                for name in FIELDS:
                    assert getattr(m, name) == getattr(ref, name), name
                assert m.crc_ok() and m.to_dict() == ref.to_dict()
                if m.msg_id in sent:
                    assert (m.body, m.uniq_key) == sent[m.msg_id]
            assert sum(m.tags == "batch" for m in got) == 30
    asyncio.run(main())


def test_a_compressed_body_reaches_the_consumer_inflated(tmp_path):
    """A body a RocketMQ client deflated (sysFlag COMPRESSED; the 4.x clients leave the codec bits 0, the 5.x
    ones set ZLIB 0x300) is handed to the application inflated, as the Java consumer hands it on; the stored
    bytes stay at hand (``stored_body``). A body flagged with a codec not read here (LZ4) or that is no zlib
    stream despite the flag is handed on as stored."""
    plain = b"a body over the 4 KiB a Java producer compresses from; " * 100
    deflated = zlib.compress(plain, 5)
    cases = {"v4": (deflated, COMPRESSED, plain), "v5": (deflated, COMPRESSED | 0x300, plain),
             "lz4": (b"\x04\"M\x18 not zlib", COMPRESSED | 0x100, b"\x04\"M\x18 not zlib"),
             "junk": (b"no zlib stream", COMPRESSED, b"no zlib stream"), "plain": (plain, 0, plain)}

    async def main():
        async with cluster(tmp_path) as c, Producer("PG_ZIP", c.addr) as p:
            for key, (stored, flag, _) in cases.items():
                msg = Message("Zip", stored, keys=[key])
                msg.sys_flag = flag
                await p.send(msg)
            consumer = LitePullConsumer("GID_ZIP", c.addr, consume_from=ConsumeFrom.FIRST)
            consumer.subscribe("Zip")
            await consumer.start()
            got, deadline = [], time.monotonic() + 30
            while len(got) < len(cases) and time.monotonic() < deadline:
                got += await consumer.poll(0.5)
            await consumer.shutdown()
            assert sorted(m.keys[0] for m in got) == sorted(cases)
            for m in got:
                stored, flag, seen = cases[m.keys[0]]
                assert (m.body, m.stored_body, m.sys_flag & 0x701) == (seen, stored, flag), m.keys[0]
                assert m.crc_ok()
    asyncio.run(main())


def test_inflation_is_bounded():
    """A zlib bomb (a small stored body inflating past the bound) is handed on as stored, never inflated
    whole; a stream cut short too."""
    bomb = zlib.compress(bytes(1 << 20))
    assert len(bomb) < 2048
    assert plain_body(bomb, COMPRESSED, limit=1 << 20) == bytes(1 << 20)
    assert plain_body(bomb, COMPRESSED, limit=(1 << 20) - 1) == bomb
    assert plain_body(bomb[:-4], COMPRESSED) == bomb[:-4]
    assert MAX_INFLATED_BODY_BYTES >= 4 << 20          # a body a producer with default limits deflated
