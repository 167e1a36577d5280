"""Dispatch reads the log back: single puts and one batch of the same messages leave byte-identical
consume queues and index files."""

import shutil

from store_helpers import T0_S, FakeClock, small_config

from rocketq.store import Message, MessageStore


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


def test_a_rebuild_in_one_long_run_writes_the_same_files_as_live_dispatch(tmp_path):
    """Rebuilding consume queues and index from the log walks it as one run: 6,000 units (120 kB) and
    12,000 index entries in one call each, past the sizes from which the native kernels copy units and
    link entries without the GIL.  The files must come out byte for byte as live dispatch of 64-message
    batches wrote them."""
    root = tmp_path / "store"
    cfg = small_config(root, message_index_enable=True, commitlog_file_size=8 << 20, consume_queue_entries=10_000,
                       index_slots=5_003, index_max_entries=12_000)
    msgs = [Message(topic="L", body=b"%d" % i, queue_id=0, tags=f"t{i % 3}", keys=[f"k{i}", f"j{i % 7}"])
            for i in range(6000)]
    with MessageStore(cfg, clock=FakeClock(T0_S)) as store:
        for i in range(0, len(msgs), 64):
            assert store.put_messages(msgs[i:i + 64]).status == "PUT_OK"
        assert store.wait_dispatched(30)
    live = _derived_files(root)
    assert sum(k.startswith("index") for k in live) == 2          # 11,999 entries fill the first file
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    with MessageStore(cfg, clock=FakeClock(T0_S)) as store:        # no queues: rebuilt from the log's start
        assert store.wait_dispatched(30)
        assert [m.body for m in store.get_messages("L", 0, 5990, 10).messages] == [b"%d" % i for i in range(5990, 6000)]
    rebuilt = _derived_files(root)
    assert rebuilt.keys() == live.keys()
    for name in live:
        assert rebuilt[name] == live[name], name
