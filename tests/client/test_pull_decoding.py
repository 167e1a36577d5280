"""What a consumer is handed for a pulled record, end to end: a real broker, real sends, a
LitePullConsumer; every attribute of every message polled equals what the pure-Python reader
(``StoredMessage``, the reference) reads from the broker's own CommitLog at that offset."""

import asyncio
import sys
import time
import zlib
from pathlib import Path

import lz4.frame
import pytest
import zstandard

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402

from rocketq.client import ConsumeFrom, LitePullConsumer, Message, Producer  # noqa: E402
from rocketq.common.sysflag import (COMPRESSED, COMPRESSION_LZ4, COMPRESSION_ZLIB, COMPRESSION_ZSTD,  # noqa: E402
                                   MAX_INFLATED_BODY_BYTES, plain_body)

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
    """A body a RocketMQ client compressed (sysFlag COMPRESSED: zlib with the codec bits 0 from 4.x clients,
    ZLIB 0x300 from 5.x ones, or the LZ4 / ZSTD frames of a 5.x producer set to them) is handed to the
    application inflated, as the Java consumer hands it on; the stored bytes stay at hand (``stored_body``).
    A body flagged with a codec RocketMQ does not have, or that is no stream of its codec, is handed on as
    stored."""
    plain = b"a body over the 4 KiB a Java producer compresses from; " * 100
    cases = {"v4": (zlib.compress(plain, 5), COMPRESSED, plain),
             "zlib": (zlib.compress(plain, 5), COMPRESSED | COMPRESSION_ZLIB, plain),
             "lz4": (lz4.frame.compress(plain), COMPRESSED | COMPRESSION_LZ4, plain),
             "zstd": (zstandard.ZstdCompressor(level=3).compress(plain), COMPRESSED | COMPRESSION_ZSTD, plain),
             "codec-7": (zlib.compress(plain), COMPRESSED | 0x700, zlib.compress(plain)),
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


@pytest.mark.parametrize("codec", [0, COMPRESSION_ZLIB, COMPRESSION_LZ4, COMPRESSION_ZSTD])
def test_inflation_is_bounded(codec):
    """A bomb (a small stored body inflating past the bound) is handed on as stored, never inflated whole;
    a stream cut short too."""
    deflate = {0: zlib.compress, COMPRESSION_ZLIB: zlib.compress, COMPRESSION_LZ4: lz4.frame.compress,
               COMPRESSION_ZSTD: zstandard.ZstdCompressor().compress}[codec]
    flag, plain = COMPRESSED | codec, bytes(1 << 20)
    bomb = deflate(plain)
    assert len(bomb) < 8192
    assert plain_body(bomb, flag, limit=1 << 20) == plain
    assert plain_body(bomb, flag, limit=(1 << 20) - 1) == bomb
    assert plain_body(bomb[:-4], flag) == bomb[:-4]
    assert MAX_INFLATED_BODY_BYTES >= 4 << 20          # a body a producer with default limits compressed
