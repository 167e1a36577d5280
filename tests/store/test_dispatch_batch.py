"""DispatchBatch.from_appended: the one-single-put shortcut equals the general merge, field by field;
the sinks' few-rows paths (struct, Python ints) write the same bytes as their numpy paths."""

from store_helpers import T0_S, FakeClock, small_config

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


def _derived_files(root) -> dict[str, bytes]:
    files = sorted(p for sub in ("consumequeue", "index") for p in (root / sub).rglob("*") if p.is_file())
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def test_few_row_dispatch_writes_the_same_files_as_the_numpy_path(tmp_path):
    """Single puts reach the sinks a few rows at a time; one batch of 24 reaches them in groups of 8 and
    24 keys: consume queues and index files must come out byte for byte the same."""
    msgs = [Message(topic="D", body=b"m%d" % i, queue_id=i % 3, tags=f"t{i % 4}" if i % 5 else None,
                    keys=[f"k{i}"], properties={"UNIQ_KEY": f"U{i:04d}"}) for i in range(24)]
    roots = {name: tmp_path / name for name in ("single", "batch")}
    for name, root in roots.items():
        cfg = small_config(root, message_index_enable=True, store_host="10.0.0.2:10911")
        with MessageStore(cfg, clock=FakeClock(T0_S)) as store:
            if name == "single":
                for m in msgs:                        # dispatched one by one: the few-rows paths
                    assert store.put_message(m).ok and store.wait_dispatched(10)
            else:
                assert store.put_messages(msgs).status == "PUT_OK"
            assert store.wait_dispatched(10)
    single, batch = (_derived_files(roots[n]) for n in ("single", "batch"))
    assert single.keys() == batch.keys() and any(k.startswith("index") for k in single)
    for name in single:
        assert single[name] == batch[name], name


class _NoLoop:
    """A loop that never runs what it is given."""

    def call_soon(self, fn, *args):
        pass

    call_soon_threadsafe = call_soon
