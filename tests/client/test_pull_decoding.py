"""What a consumer is handed for a pulled record, end to end: a real broker, real sends, a
LitePullConsumer; every attribute of every message polled equals what the pure-Python reader
(``StoredMessage``, the reference) reads from the broker's own CommitLog at that offset."""

import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from cluster import cluster  # noqa: E402

from rocketq.client import ConsumeFrom, LitePullConsumer, Message, Producer  # noqa: E402

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
