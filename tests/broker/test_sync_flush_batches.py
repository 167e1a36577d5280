"""SYNC_FLUSH batches over the wire: every batch in flight waits for the same group commit.

A batch used to wait for its fsync on a thread of asyncio's default pool, so no more batches than
that pool has threads (at most 32) could be appended before an fsync: RocketMQ's BatchProducer with
64 threads got 0.32x of Apache RocketMQ's rate under SYNC_FLUSH. Here the group commit is held at a
gate while more batches than that are sent, and all of them must be in the CommitLog before it opens.
"""

import asyncio
import threading

from broker_helpers import send_v2, store_config
from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.broker.send import encode_batch
from rocketq.remoting import RemotingClient, RequestCode, ResponseCode

BATCHES = 40                    # more than asyncio's default pool ever has threads (min(32, cpus + 4))
PER_BATCH = 8


def test_batches_in_flight_share_the_group_commit(tmp_path):
    async def scenario():
        broker = await Broker(BrokerSettings(port=0), store_config(tmp_path, flush_disk_type="SYNC_FLUSH")).start()
        gc, gate = broker.store.group_commit, threading.Event()
        flush = gc._flush
        gc._flush = lambda: (gate.wait(30), flush())[1]          # the fsync waits until every batch is in
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            gate.set()
            start = broker.store.commitlog.max_offset()
            first = await client.invoke(_batch(0), timeout_s=10)   # creates the topic; sizes one batch
            assert first.code == ResponseCode.SUCCESS, first.remark
            await _until(lambda: gc.flushed >= broker.store.commitlog.max_offset())
            gate.clear()
            before, syncs = broker.store.commitlog.max_offset(), gc.syncs
            one = before - start
            sends = [asyncio.ensure_future(client.invoke(_batch(i), timeout_s=30)) for i in range(1, BATCHES + 1)]
            appended = lambda: broker.store.commitlog.max_offset() - before   # noqa: E731
            await _until(lambda: appended() >= BATCHES * one, what=lambda: f"{appended()} bytes appended")
            assert not any(s.done() for s in sends)               # none answered before its fsync
            gate.set()
            answers = await asyncio.gather(*sends)
            assert [a.code for a in answers] == [ResponseCode.SUCCESS] * BATCHES
            assert gc.syncs - syncs <= 3                             # one fsync for all (plus stragglers)
        finally:
            gate.set()
            await client.close()
            await broker.close()
    asyncio.run(scenario())


def _batch(i: int):
    req = send_v2("SyncBatches", encode_batch([(0, b"%04d-%02d" % (i, j), "") for j in range(PER_BATCH)]))
    req.code = RequestCode.SEND_BATCH_MESSAGE
    return req


async def _until(cond, timeout_s: float = 20.0, what=lambda: "") -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, f"timed out: {what()}"
        await asyncio.sleep(0.01)
