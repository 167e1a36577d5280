"""The SQL92 bit-map prefilter in the store (issue 19): the ext file's bytes, bits against the evaluator,
prefiltered reads against plain ones, filters registered late or changed, restarts."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from store_helpers import small_config

from rocketq.broker import filtered_reads
from rocketq.common.message import Message
from rocketq.filter import subscription
from rocketq.store import MessageStore
from rocketq.store import filter_bitmap
from rocketq.store.bloom import BloomFilter, murmur3_x64_128
from rocketq.store.consume_queue import CQ_DTYPE
from rocketq.store.consume_queue_ext import ConsumeQueueExt, decorate, encode_units, undecorate

SCAN = 800
EXPRESSIONS = ["region = 'eu'", "amount > 500", "region IN ('eu', 'ap') AND amount <= 100", "sku IS NULL",
               "TAGS = 'b'", "amount BETWEEN 10 AND 20 OR region <> 'us'", "NOT (amount < 900)", "TRUE"]


def cfg(path, **kw):
    base = {"commitlog_file_size": 1 << 20, "consume_queue_entries": 3000, "enable_consume_queue_ext": True,
            "enable_calc_filter_bitmap": True, "mapped_file_size_consume_queue_ext": 8192}
    return small_config(path, **{**base, **kw})


def random_message(rng: random.Random, topic="T", queue_id=0) -> Message:
    props = {}
    if rng.random() < 0.9:
        props["region"] = rng.choice(["eu", "us", "ap", "EU", ""])
    if rng.random() < 0.9:
        props["amount"] = rng.choice([str(rng.randrange(1000)), "x", "1.5", "-3", "12"])
    if rng.random() < 0.5:
        props["sku"] = f"s{rng.randrange(5)}"
    return Message(topic=topic, body=b"b", queue_id=queue_id, tags=rng.choice([None, "a", "b"]), properties=props)


def read_all(store, sub, group, topic="T", queue_id=0):
    """Every message a consumer gets through *sub* from offset 0, pull by pull (32 at a time)."""
    out, offset = [], 0
    while offset < store.max_offset(topic, queue_id):
        r = filtered_reads.read(store, topic, queue_id, offset, 32, sub, scan_units=SCAN, group=group)
        out += [(m.queue_offset, m.body) for m in r.messages]
        assert r.next_begin_offset > offset
        offset = r.next_begin_offset
    return out


def unit_bits(store, topic="T", queue_id=0):
    """(unit, ext ok, bit map) per unit of the queue, from every one of its files (one ``get_units``
    stops at the end of a consume-queue file)."""
    cq = store.consume_queue(topic, queue_id)
    parts, offset = [], 0
    while offset < cq.max_offset():
        part = cq.get_units(offset, cq.max_offset() - offset)
        assert len(part), f"{topic}/{queue_id}: no unit at {offset}, below the queue's end {cq.max_offset()}"
        parts.append(part)
        offset += len(part)
    units = np.concatenate(parts) if parts else np.zeros(0, dtype=CQ_DTYPE)
    ok, _tags, bits = cq.ext.read(units["tag"], store.filter_bitmaps.bloom.bytes_len)
    return units, ok, bits


# -- formats -----------------------------------------------------------------------------------

def test_ext_unit_golden_bytes():
    """RocketMQ's CqExtUnit: int16 size | int64 tagsCode | int64 storeTime | int16 bitMapSize | bitmap."""
    bits = np.zeros((1, 14), dtype=np.uint8)
    bits[0, 0], bits[0, 13] = 0x01, 0x80
    unit = encode_units(np.array([5]), np.array([1_700_000_000_000]), bits)
    assert unit.tobytes().hex() == ("0022" "0000000000000005" "0000018bcfe56800" "000e"
                                    "01000000000000000000000000" "80")


def test_ext_file_layout_addresses_and_end_mark(tmp_path):
    ext = ConsumeQueueExt(tmp_path, "T", 0, file_size=4096)
    units = encode_units(np.arange(121), np.zeros(121, dtype=np.int64), np.zeros((121, 14), dtype=np.uint8))
    addresses = ext.put(units)
    assert addresses[0] == -(1 << 63) and addresses[1] == -(1 << 63) + 34     # Long.MIN_VALUE + offset
    assert (addresses <= -(1 << 31) - 1).all()                                # never a tags code
    # 120 units fit before the last 4 bytes; the 121st goes to the next file after an int16 -1
    assert undecorate(int(addresses[120])) == 4096
    first = (tmp_path / "T" / "0" / "00000000000000000000").read_bytes()
    assert first[120 * 34:120 * 34 + 2] == b"\xff\xff"
    assert (tmp_path / "T" / "0" / "00000000000000004096").read_bytes()[:2] == b"\x00\x22"
    ok, tags, _bits = ext.read(addresses, 14)
    assert ok.all() and tags.tolist() == list(range(121))
    ok, _tags, _bits = ext.read(np.array([decorate(3)]), 14)                 # not a unit's start
    assert not ok.any()
    ext.truncate_after(int(addresses[9]))
    assert ext.files.max_offset() == 10 * 34 and len(ext.files.files) == 1
    ext.close()


def test_bloom_sizes_hash_and_bit_order():
    """RocketMQ's defaults (f=20 %, n=32): k=3, m=112; Guava's murmur3_128 (a public test vector);
    bit p is bit p % 8 of byte p // 8 (BitsArray)."""
    assert murmur3_x64_128(b"The quick brown fox jumps over the lazy dog").hex() == "6c1b07bc7bbc4be347939ac4a93c437a"
    bloom = BloomFilter.create(20, 32)
    assert (bloom.k, bloom.m, bloom.bytes_len) == (3, 112, 14)
    assert BloomFilter.create(10, 64).m % 8 == 0
    assert bloom.positions("G#T") == (24, 26, 83)          # pinned: positions decide which units are skipped
    assert bloom.bit_map([0, 9, 111]) == b"\x01\x02" + bytes(11) + b"\x80"


# -- bits against the evaluator ------------------------------------------------------------------

@settings(max_examples=12, deadline=None, print_blob=True)
@given(seed=st.integers(0, 2**32 - 1))
def test_bit_maps_are_exactly_the_evaluators_matches(tmp_path_factory, seed):
    print(f"seed {seed}")
    rng = random.Random(seed)
    exprs = rng.sample(EXPRESSIONS, rng.randrange(1, 5))
    with MessageStore(cfg(tmp_path_factory.mktemp("bits"))) as store:
        fb = store.filter_bitmaps
        for i, e in enumerate(exprs):
            assert fb.register(f"G{i}", "T", e, "SQL92", 1)
        for _ in range(rng.randrange(1, 6)):
            store.put_messages([random_message(rng) for _ in range(rng.randrange(1, 300))])
        assert store.wait_dispatched()
        units, ok, bits = unit_bits(store)
        assert ok.all(), f"seed {seed}"
        subs = [subscription(e, "SQL92").sql for e in exprs]
        for u, row in zip(units, bits):
            msg = store.read_message(int(u["phy"]), int(u["size"]))
            want = fb.bloom.bit_map(p for i, s in enumerate(subs) if s.matches(msg.properties)
                                    for p in fb.bloom.positions(f"G{i}#T"))
            assert row.tobytes() == want, f"seed {seed}: {msg.properties} under {exprs}"
        for i, e in enumerate(exprs):
            sub = subscription(e, "SQL92")
            assert read_all(store, sub, f"G{i}") == read_all(store, sub, None), f"seed {seed}: {e}"


def test_the_prefilter_skips_unread_what_cannot_match(tmp_path):
    with MessageStore(cfg(tmp_path)) as store:
        store.filter_bitmaps.register("G", "T", "region = 'eu'", "SQL92", 1)
        store.put_message(Message(topic="T", body=b"first", properties={"region": "eu"}))   # births the filter
        assert store.wait_dispatched()
        store.put_messages([Message(topic="T", body=b"%d" % i, properties={"region": "eu" if i % 100 == 0 else "us"})
                            for i in range(1000)])
        assert store.wait_dispatched()
        cq = store.consume_queue("T", 0)
        pre = store.filter_bitmaps.prefilter("G", "T", "region = 'eu'")
        assert pre is not None and store.filter_bitmaps.prefilter("G", "T", "region = 'us'") is None
        units, kept = filter_bitmap.window(cq, cq.get_unit_bytes(1, 800), tag_codes=None, prefilter=pre)
        # 8 matches in the window; other units may only pass as bloom false positives (none here: one filter)
        assert len(kept) == 8 and len(units) == 8 * 20
        # tag subscriptions still see the tags codes behind the ext addresses
        assert len(store.get_messages("T", 0, 0, 2000, tag_codes=set()).messages) == 0
        assert len(store.get_messages("T", 0, 0, 2000, tag_codes={0}).messages) == 1001


# -- late, changed, restarted ----------------------------------------------------------------------

def test_late_and_changed_filters_fall_back_to_reading(tmp_path):
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    path = tmp_path / "s"
    eu, us = subscription("region = 'eu'", "SQL92"), subscription("region = 'us'", "SQL92")
    with MessageStore(cfg(path)) as store:
        store.put_messages([random_message(rng) for _ in range(300)])        # before any filter: no bits
        assert store.wait_dispatched()
        store.filter_bitmaps.register("G", "T", eu.expression, "SQL92", 1)
        store.put_messages([random_message(rng) for _ in range(300)])
        assert store.wait_dispatched()
        assert read_all(store, eu, "G") == read_all(store, eu, None), f"seed {seed}"
        # the group changes its expression: the bits at its positions were computed for 'eu'
        assert store.filter_bitmaps.register("G", "T", us.expression, "SQL92", 2)
        assert store.filter_bitmaps.register("G", "T", eu.expression, "SQL92", 1) is False   # an older heartbeat
        store.put_messages([random_message(rng) for _ in range(300)])
        assert store.wait_dispatched()
        assert store.filter_bitmaps.prefilter("G", "T", eu.expression) is None
        assert read_all(store, us, "G") == read_all(store, us, None), f"seed {seed}"
        before = read_all(store, us, None)
    with MessageStore(cfg(path)) as store:                                  # restart: filters and bits reload
        assert store.filter_bitmaps.prefilter("G", "T", us.expression) is not None
        assert read_all(store, us, "G") == before, f"seed {seed}"
        store.put_messages([random_message(rng) for _ in range(100)])
        assert store.wait_dispatched()
        assert read_all(store, us, "G") == read_all(store, us, None), f"seed {seed}"


def test_changed_bloom_sizes_drop_saved_filters(tmp_path):
    with MessageStore(cfg(tmp_path)) as store:
        store.filter_bitmaps.register("G", "T", "region = 'eu'", "SQL92", 1)
        store.put_message(Message(topic="T", body=b"x", properties={"region": "eu"}))
        assert store.wait_dispatched()
    with MessageStore(cfg(tmp_path, expect_consumer_num_use_filter=64)) as store:
        assert store.filter_bitmaps.prefilter("G", "T", "region = 'eu'") is None
        sub = subscription("region = 'eu'", "SQL92")
        assert [b for _o, b in read_all(store, sub, "G")] == [b"x"]


def test_off_by_default_and_both_switches_needed(tmp_path):
    with MessageStore(small_config(tmp_path / "a")) as store:
        assert store.filter_bitmaps is None
    with MessageStore(small_config(tmp_path / "b", enable_calc_filter_bitmap=True)) as store:
        assert store.filter_bitmaps is None                                  # no ext files to put them in


def test_ext_is_cut_back_with_its_consume_queue(tmp_path):
    """A consume queue cut on recovery (its records were lost) takes its ext units with it."""
    with MessageStore(cfg(tmp_path)) as store:
        store.filter_bitmaps.register("G", "T", "region = 'eu'", "SQL92", 1)
        store.put_messages([Message(topic="T", body=b"%d" % i, properties={"region": "eu"}) for i in range(50)])
        assert store.wait_dispatched()
        cq = store.consume_queue("T", 0)
        units = cq.get_units(0, 50)
        cut_at = int(units[30]["phy"])
        cq.truncate_dirty(cut_at)                                            # as recovery does after a cut log
        assert cq.max_offset() == 30
        last = int(cq.get_units(29, 1)[0]["tag"])
        assert cq.ext.files.max_offset() == undecorate(last) + cq.ext.unit_size_at(last)
        assert np.frombuffer(cq.get_unit_bytes(0, 30), dtype=CQ_DTYPE)["tag"].max() <= last


def test_a_lagging_checkpoint_replays_no_ext_unit_twice(tmp_path):
    """Recovery dispatches again from the checkpoint's logicsFlushedOffset: records whose units the
    queues hold get no second ext unit, an ext unit a crash left with no unit pointing at it is cut,
    and the ext files end where the last unit's ext unit ends - with queues over several files."""
    from rocketq.store.checkpoint import CheckpointFile
    from rocketq.store.store_files import StorePaths, create_abort_marker
    rng = random.Random(7)
    config = cfg(tmp_path, consume_queue_entries=300)
    with MessageStore(config) as store:
        for i, e in enumerate(EXPRESSIONS[:3]):
            store.filter_bitmaps.register(f"G{i}", "T", e, "SQL92", 1)
        store.put_messages([random_message(rng, queue_id=q) for q in (0, 1) for _ in range(700)])
        assert store.wait_dispatched()
        assert len(store.consume_queue("T", 0).files.files) == 3
        check_agreement(store, 7)
        ends = {q: store.consume_queue("T", q).ext.files.max_offset() for q in (0, 1)}
        bits = store.filter_bitmaps.bloom.bytes_len
    # as a SIGKILL between an ext write and its consume-queue write leaves queue 0: one ext unit more
    stray = encode_units(np.array([5]), np.array([6]), np.zeros((1, bits), dtype=np.uint8)).tobytes()
    ext_file = tmp_path / "consumequeue_ext" / "T" / "0" / f"{ends[0] - ends[0] % 8192:020d}"
    assert ends[0] % 8192 + len(stray) + 4 <= 8192
    with open(ext_file, "r+b") as f:
        f.seek(ends[0] % 8192)
        f.write(stray)
    paths = StorePaths(tmp_path)
    cp = CheckpointFile(paths.checkpoint)                 # the queues' flush never reached the checkpoint
    cp.value.logics_flushed_offset = 0
    cp.flush()
    cp.close()
    create_abort_marker(paths.abort)
    with MessageStore(config) as store:
        assert store.recovery.abnormal and store.recovery.redispatched_records == 1400
        assert {q: store.consume_queue("T", q).ext.files.max_offset() for q in (0, 1)} == ends
        check_agreement(store, 7)
        store.put_messages([random_message(rng, queue_id=q) for q in (0, 1) for _ in range(50)])
        assert store.wait_dispatched()
        check_agreement(store, 7)


# -- a crash ----------------------------------------------------------------------------------------

CRASH_CQ_ENTRIES = 500       # small consume-queue files: the writer's queues span several of them

WRITER = """
import random, sys
sys.path[:0] = sys.argv[3].split("|")
from test_filter_bitmap import CRASH_CQ_ENTRIES, EXPRESSIONS, cfg, random_message
from rocketq.store import MessageStore
store = MessageStore(cfg(sys.argv[1], consume_queue_entries=CRASH_CQ_ENTRIES,
                         prefault_mapped_file_enable=sys.argv[4] == "1")).start()
rng = random.Random(int(sys.argv[2]))
for i, e in enumerate(EXPRESSIONS[:3]):
    store.filter_bitmaps.register(f"G{i}", "T", e, "SQL92", 1)
store.put_messages([random_message(rng, queue_id=q) for q in (0, 1)])
assert store.wait_dispatched()           # the filters are born (and saved) before the kill can come
print("ready", flush=True)
while True:
    store.put_messages([random_message(rng, queue_id=rng.randrange(2)) for _ in range(rng.randrange(1, 40))])
    print("put", flush=True)
"""


@pytest.mark.parametrize("prefault", [True, False], ids=["prefault", "no-prefault"])
def test_sigkill_leaves_ext_and_consume_queue_agreeing(tmp_path, prefault):
    """SIGKILL a writer mid-dispatch; after recovery every unit's ext address resolves to the bits the
    evaluator gives, the ext files end where the last unit's ext unit ends, and prefiltered reads
    return exactly what plain reads return - also after writing on."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    rng = random.Random(seed)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    here = str(Path(__file__).parent)
    for round_ in range(3):
        path = tmp_path / f"s{round_}"
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(seed + round_), here + "|" +
                                 "|".join(sys.path), "1" if prefault else "0"], stdout=subprocess.PIPE, env=env)
        try:
            assert proc.stdout.readline().strip() == b"ready"
            for _ in range(rng.randrange(5, 120)):
                assert proc.stdout.readline(), f"seed {seed}: the writer died"
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait(timeout=30)
        for _ in range(2):
            with MessageStore(cfg(path, consume_queue_entries=CRASH_CQ_ENTRIES,
                                  prefault_mapped_file_enable=prefault)) as store:
                assert store.recovery.abnormal or _ > 0
                check_agreement(store, seed)
                store.put_messages([random_message(rng, queue_id=q) for q in (0, 1) for _ in range(30)])
                assert store.wait_dispatched()
                check_agreement(store, seed)


def check_agreement(store, seed):
    fb = store.filter_bitmaps
    subs = [subscription(e, "SQL92") for e in EXPRESSIONS[:3]]
    for qid in (0, 1):
        cq = store.consume_queue("T", qid)
        if cq is None:
            continue
        assert cq.ext is not None, f"seed {seed}"
        units, ok, bits = unit_bits(store, queue_id=qid)
        assert len(units) == cq.max_offset(), f"seed {seed}"
        ext_at = np.flatnonzero(units["tag"] <= -(1 << 31) - 1)
        assert len(ext_at) == len(units), f"seed {seed}: every unit was dispatched with the filters"
        assert ok[ext_at].all(), f"seed {seed}: a unit points at no ext unit"
        if len(ext_at):
            last = int(units["tag"][ext_at[-1]])
            assert cq.ext.files.max_offset() == undecorate(last) + cq.ext.unit_size_at(last), f"seed {seed}"
        for at in ext_at.tolist():
            u = units[at]
            msg = store.read_message(int(u["phy"]), int(u["size"]))
            want = fb.bloom.bit_map(p for i, s in enumerate(subs) if s.sql.matches(msg.properties)
                                    for p in fb.bloom.positions(f"G{i}#T"))
            assert bits[at].tobytes() == want, f"seed {seed}: unit {at} of queue {qid}"
        for i, sub in enumerate(subs):
            assert read_all(store, sub, f"G{i}", queue_id=qid) == read_all(store, sub, None, queue_id=qid), \
                f"seed {seed}"


def test_verify_and_rebuild_understand_ext_addresses(tmp_path):
    """The offline tools read tags codes behind ext addresses, and a rebuild drops the ext files with
    the consume queues (the next start writes them again)."""
    from rocketq.store.tools import rebuild_store, verify_store
    sub = subscription("region = 'eu'", "SQL92")
    with MessageStore(cfg(tmp_path)) as store:
        store.filter_bitmaps.register("G", "T", sub.expression, "SQL92", 1)
        store.put_messages([Message(topic="T", body=b"%d" % i, tags="t%d" % (i % 3),
                                    properties={"region": "eu" if i % 4 == 0 else "us"}) for i in range(200)])
        assert store.wait_dispatched()
        before = read_all(store, sub, None)
    assert verify_store(tmp_path).ok
    rebuild_store(tmp_path)
    assert verify_store(tmp_path).ok
    with MessageStore(cfg(tmp_path)) as store:
        assert read_all(store, sub, "G") == before


def test_a_filter_is_born_only_once_saved(tmp_path):
    """When the filter file cannot be written (a full disk), dispatch stalls and the filter stays
    unborn: no bit is ever trusted that a restart would not know the filter of."""
    import os
    with MessageStore(cfg(tmp_path)) as store:
        fb = store.filter_bitmaps
        fb.register("G", "T", "region = 'eu'", "SQL92", 1)
        target = tmp_path / "config" / "consumerFilter.json.tmp"
        target.mkdir()                          # write_json cannot write its temporary file: an OSError
        store.put_message(Message(topic="T", body=b"x", properties={"region": "eu"}))
        assert not store.wait_dispatched(timeout_s=1.0, while_stalled=False)
        assert fb.prefilter("G", "T", "region = 'eu'") is None
        assert fb._by_topic["T"]["G"].born is None
        os.rmdir(target)
        store.dispatcher.retry_now()
        assert store.wait_dispatched()
        assert fb.prefilter("G", "T", "region = 'eu'") is not None
