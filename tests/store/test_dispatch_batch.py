"""DispatchBatch.from_appended: the one-single-put shortcut equals the general merge, field by field."""

from store_helpers import small_config

from rocketq.store import Message, MessageStore
from rocketq.store.dispatcher import DispatchBatch


def _fields(batch: DispatchBatch, i: int) -> tuple:
    return (int(batch.phys[i]), int(batch.sizes[i]), batch.queue_offsets[i], int(batch.store_ts[i]), batch.topics[i],
            batch.queue_ids[i], batch.sys_flags[i], batch.tags[i], batch.keys[i], batch.uniq_keys[i],
            batch.props_text[i])


def test_single_put_shortcut_matches_the_general_merge(tmp_path):
    with MessageStore(small_config(tmp_path)) as store:
        store.dispatcher.drive_from(_NoLoop())           # nobody drains: the appended batches stay queued
        msgs = [Message(topic="T", body=b"a", tags="x", keys=["k1", "k2"], queue_id=1),
                Message(topic="U", body=b"bb", properties={"UNIQ_KEY": "ID1", "p": "v"}, queue_id=0),
                Message(topic="T", body=b"ccc", queue_id=1)]
        for m in msgs:
            store.put_message(m)
        queued = list(store.dispatcher._queue)
        merged = DispatchBatch.from_appended(queued)
        for i, b in enumerate(queued):
            alone = DispatchBatch.from_appended([b])
            assert len(alone) == 1 and _fields(alone, 0) == _fields(merged, i)
        store.dispatcher.wait_dispatched()


class _NoLoop:
    """A loop that never runs what it is given."""

    def call_soon(self, fn, *args):
        pass

    call_soon_threadsafe = call_soon
