"""The timer's hand-over between a master and its acting slave (rocketq.broker.acting_services), on one
real store with a fake clock: the slave, started from the master's copied checkpoint, escapes exactly
what the master had not delivered (also a message the master never read), writes nothing to the
store, takes no recall; the master, back, adopts the slave's checkpoint and delivers none of it again."""

import asyncio
import time

import pytest
from broker_helpers import store_config

from rocketq.broker.timer import RecallRefused, Timer
from rocketq.broker.timer_messages import PROPERTY_TIMER_DELIVER_MS, RecallHandle
from rocketq.common.message import Message
from rocketq.common.msgid import HostAddress
from rocketq.store import MessageStore

T0 = 1_800_000_000.0


async def _until(cond, what, timer, limit_s=30.0):
    deadline = time.monotonic() + limit_s
    while not cond():
        assert time.monotonic() < deadline, what
        timer._wake.set()
        await asyncio.sleep(0.01)


def _stored(store):
    store.wait_dispatched()                      # the delivered copies are in their queues
    return sorted(m.body.decode() for q in range(2) for m in store.get_messages("Dest", q, 0, 1000).messages)


def test_an_acting_slave_escapes_what_the_master_left_and_the_master_takes_its_progress(tmp_path):
    now = [T0]
    ms = int(T0 * 1000)

    def put(timer, body, due):
        m = Message("Dest", body.encode(), queue_id=len(body) % 2, properties={PROPERTY_TIMER_DELIVER_MS: str(due)})
        assert store.put_message(timer.wrap(m)).ok

    async def scenario():
        master = Timer(store, tmp_path / "master", bucket_ms=500, clock=lambda: now[0])
        master.start()
        store.arrival_listeners.append(master.on_arrival)
        early = {f"early{i}": ms + 1000 + i * 100 for i in range(5)}
        late = {f"late{i}": ms + 5000 + i * 100 for i in range(5)}
        for body, due in {**early, **late}.items():
            put(master, body, due)
        await _until(lambda: master.ingest_offset == 10, "master ingest", master)
        now[0] = T0 + 3
        await _until(lambda: master.watermark_ms > ms + 3000, "master delivers the early ones", master)
        assert _stored(store) == sorted(early)
        copied = master.checkpoint()                 # what the slave's SlaveSync copies
        store.arrival_listeners.remove(master.on_arrival)
        await master.close()                         # the master is gone
        put(master, "unseen", ms + 2500)             # stored, never read by the master, due already

        slave = Timer(store, tmp_path / "slave", bucket_ms=500, clock=lambda: now[0])
        slave.save_master_checkpoint(copied)
        escaped: list[str] = []

        async def escape(msg):
            escaped.append(msg.body.decode())
            return True
        slave.start(put=escape, fresh=True)
        with pytest.raises(RecallRefused):
            await slave.recall(RecallHandle("Dest", "b", ms + 5000, "K"), born_host=HostAddress(b"\x7f\0\0\1", 1))
        now[0] = T0 + 7
        await _until(lambda: slave.watermark_ms > ms + 7000 and slave.ingest_offset == 11, "slave escapes", slave)
        assert sorted(escaped) == sorted([*late, "unseen"])       # not the early ones again
        assert _stored(store) == sorted(early)                    # nothing written by the slave
        back = slave.checkpoint()
        await slave.close()

        again = Timer(store, tmp_path / "master", bucket_ms=500, clock=lambda: now[0])
        again.adopt(back["deliveredUntilMs"], back["ingestOffset"])
        again.start()
        now[0] = T0 + 8
        await _until(lambda: again.watermark_ms > ms + 8000 and again.ingest_offset == 11, "master back", again)
        assert _stored(store) == sorted(early)                    # the master delivered none again
        await again.close()

    store = MessageStore(store_config(tmp_path / "store")).start()
    try:
        asyncio.run(scenario())
    finally:
        store.shutdown()
