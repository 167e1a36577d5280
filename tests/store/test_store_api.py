"""The store through its public API: put/get, batches, queues, status rules, time search, rolling,
ids, keys, reopening, and delay levels driven by a fake clock."""

from __future__ import annotations

import json
import random

from store_helpers import (
    T0_MS,
    new_seed,
    read_queue,
    segment_files,
    small_config,
    wait_until,
)

from rocketq.common.javahash import tag_hash
from rocketq.common.msgid import HostAddress
from rocketq.store import GetStatus, Message, MessageStore, PutStatus


def test_round_trip_keeps_every_field(tmp_path, clock):
    with MessageStore(small_config(tmp_path, store_host="10.1.2.3:10911"), clock=clock) as store:
        sent = Message(topic="Orders", body=bytes(range(256)) * 3, queue_id=5, tags="TagA", keys=["k1", "k 2"],
                       properties={"UNIQ_KEY": "U-1", "color": "blue", "empty": ""}, flag=0x1234, sys_flag=0,
                       born_timestamp=T0_MS - 5000, born_host=HostAddress.parse("192.168.7.8:4321"),
                       reconsume_times=2, prepared_transaction_offset=0)
        r = store.put_message(sent)
        assert r.status == PutStatus.PUT_OK and r.ok and r.error is None
        assert (r.queue_id, r.queue_offset, r.physical_offset, r.store_timestamp) == (5, 0, 0, T0_MS)
        store.wait_dispatched()
        got = store.get_messages("Orders", 5, 0, 10)
        assert got.status == GetStatus.FOUND and len(got) == 1
        assert (got.next_begin_offset, got.min_offset, got.max_offset) == (1, 0, 1)
        m = got[0]
        assert m.topic == "Orders" and m.body == sent.body and m.queue_id == 5 and m.queue_offset == 0
        assert m.tags == "TagA" and m.keys == ["k1", "k", "2"]       # KEYS is space-separated on disk
        assert m.properties == {"UNIQ_KEY": "U-1", "color": "blue", "empty": "", "TAGS": "TagA", "KEYS": "k1 k 2"}
        assert m.uniq_key == "U-1" and m.flag == 0x1234 and m.sys_flag == 0
        assert m.born_timestamp == T0_MS - 5000 and str(m.born_host) == "192.168.7.8:4321"
        assert m.store_timestamp == T0_MS and str(m.store_host) == "10.1.2.3:10911"
        assert m.reconsume_times == 2 and m.prepared_transaction_offset == 0
        assert m.physical_offset == 0 and m.total_size == r.wrote_bytes and m.crc_ok()
        assert m.msg_id == r.msg_id == "0A010203" "00002A9F" "0000000000000000"
        assert store.view_by_id(r.msg_id).raw == m.raw == store.read_message(0).raw
        assert got.raw == m.raw


def test_put_after_shutdown_is_service_not_available(tmp_path):
    store = MessageStore(small_config(tmp_path)).start()
    store.shutdown()
    assert store.put_message(Message(topic="T", body=b"x")).status == PutStatus.SERVICE_NOT_AVAILABLE
    rs = store.put_messages([Message(topic="T", body=b"x")] * 2)
    assert rs.status == PutStatus.SERVICE_NOT_AVAILABLE and len(rs) == 2


def test_batches_assign_offsets_per_topic_and_queue(store):
    store.put_message(Message(topic="A", body=b"pre", queue_id=1))
    msgs = [Message(topic="A", body=b"a0", queue_id=1), Message(topic="B", body=b"b0", queue_id=1),
            Message(topic="A", body=b"a1", queue_id=0), Message(topic="A", body=b"a2", queue_id=1),
            Message(topic="B", body=b"b1", queue_id=1, tags="x")]
    rs = store.put_messages(msgs)
    assert rs.status == PutStatus.PUT_OK and rs.ok and len(rs) == 5
    assert [(r.queue_id, r.queue_offset) for r in rs] == [(1, 1), (1, 0), (0, 0), (1, 2), (1, 1)]
    offsets = [r.physical_offset for r in rs]
    assert all(b == a + r.wrote_bytes for a, b, r in zip(offsets, offsets[1:], rs))   # back to back
    assert rs.msg_ids == [r.msg_id for r in rs] and len(set(rs.msg_ids)) == 5
    assert all(r.status == PutStatus.PUT_OK for r in rs)
    store.wait_dispatched()
    assert [m.body for m in read_queue(store, "A", 1)] == [b"pre", b"a0", b"a2"]
    assert [m.body for m in read_queue(store, "A", 0)] == [b"a1"]
    assert [m.body for m in read_queue(store, "B", 1)] == [b"b0", b"b1"]
    for r, m in zip(rs, msgs):
        assert store.view_by_id(r.msg_id).body == m.body
    empty = store.put_messages([])
    assert empty.status == PutStatus.PUT_OK and len(empty) == 0


def test_random_traffic_over_topics_and_queues(tmp_path):
    seed = new_seed()
    rng = random.Random(seed)
    expected: dict[tuple[str, int], list[bytes]] = {}
    with MessageStore(small_config(tmp_path)) as store:
        for step in range(300):
            n = rng.choice([1, 1, 1, rng.randrange(2, 20)])
            msgs = []
            for _ in range(n):
                key = (rng.choice(["T1", "T2", "%RETRY%g", "a|b"]), rng.randrange(4))
                body = rng.randbytes(rng.randrange(0, 600))
                msgs.append(Message(topic=key[0], body=body, queue_id=key[1], tags=rng.choice([None, "A", "B"])))
            results = [store.put_message(msgs[0])] if n == 1 else list(store.put_messages(msgs))
            for m, r in zip(msgs, results):
                assert r.status == PutStatus.PUT_OK, f"seed {seed} step {step}"
                q = expected.setdefault((m.topic, m.queue_id), [])
                assert r.queue_offset == len(q), f"seed {seed} step {step}"
                q.append(m.body)
        store.wait_dispatched()
        for (topic, qid), bodies in expected.items():
            got = read_queue(store, topic, qid)
            assert [m.body for m in got] == bodies, f"seed {seed} {topic}/{qid}"
            assert [m.queue_offset for m in got] == list(range(len(bodies))), f"seed {seed}"
            assert store.max_offset(topic, qid) == len(bodies) and store.min_offset(topic, qid) == 0
        assert set(store.topics()) == {t for t, _ in expected}


def test_prepared_and_rolled_back_records_get_no_queue_entry(store):
    half = store.put_message(Message(topic="T", body=b"half", sys_flag=0x4))        # PREPARED
    back = store.put_message(Message(topic="T", body=b"gone", sys_flag=0xC))        # ROLLBACK
    done = store.put_message(Message(topic="T", body=b"commit", sys_flag=0x8))      # COMMIT
    plain = store.put_message(Message(topic="T", body=b"plain"))
    store.wait_dispatched()
    assert [r.queue_offset for r in (half, back, done, plain)] == [0, 0, 0, 1]
    assert [m.body for m in read_queue(store, "T", 0)] == [b"commit", b"plain"]
    assert store.read_message(half.physical_offset).body == b"half"
    assert store.view_by_id(back.msg_id).sys_flag == 0xC


def test_ipv6_hosts_round_trip(tmp_path):
    with MessageStore(small_config(tmp_path, store_host="[::1]:10911")) as store:
        r = store.put_message(Message(topic="T", body=b"v6", born_host=HostAddress.parse("[fe80::2]:1")))
        rs = store.put_messages([Message(topic="T", body=b"b%d" % i) for i in range(3)])
        store.wait_dispatched()
        got = read_queue(store, "T", 0)
        assert [m.body for m in got] == [b"v6", b"b0", b"b1", b"b2"]
        assert got[0].sys_flag & 0x30 == 0x30 and all(m.sys_flag & 0x30 == 0x20 for m in got[1:])
        assert {str(m.store_host) for m in got} == {"[::1]:10911"} and str(got[0].born_host) == "[fe80::2]:1"
        assert len(r.msg_id) == 56 and store.view_by_id(r.msg_id).body == b"v6"
        assert [store.view_by_id(x.msg_id).body for x in rs] == [b"b0", b"b1", b"b2"]


# ---- get_messages status rules ------------------------------------------------------------------

def test_get_status_rules_and_next_begin_offset(tmp_path):
    (tmp_path / "consumequeue" / "Empty" / "0").mkdir(parents=True)     # a queue with no units yet
    with MessageStore(small_config(tmp_path)) as store:
        assert (store.get_messages("Nope", 0, 0).status, store.get_messages("Nope", 0, 0).next_begin_offset) == \
            (GetStatus.NO_MATCHED_LOGIC_QUEUE, 0)
        none = store.get_messages("Empty", 0, 5)
        assert (none.status, none.next_begin_offset, none.messages) == (GetStatus.NO_MESSAGE_IN_QUEUE, 0, [])
        for i in range(10):
            store.put_message(Message(topic="T", body=b"%d" % i, tags="odd" if i % 2 else "even"))
        store.put_message(Message(topic="T", body=b"other queue", queue_id=1))
        store.wait_dispatched()
        assert store.get_messages("T", 7, 0).status == GetStatus.NO_MATCHED_LOGIC_QUEUE   # known topic, unknown queue

        found = store.get_messages("T", 0, 3, 4)
        assert found.status == GetStatus.FOUND
        assert [m.body for m in found] == [b"3", b"4", b"5", b"6"]
        assert (found.next_begin_offset, found.min_offset, found.max_offset) == (7, 0, 10)
        tail = store.get_messages("T", 0, 8, 32)
        assert [m.queue_offset for m in tail] == [8, 9] and tail.next_begin_offset == 10

        one = store.get_messages("T", 0, 10)
        assert (one.status, one.next_begin_offset, one.messages) == (GetStatus.OFFSET_OVERFLOW_ONE, 10, [])
        badly = store.get_messages("T", 0, 11)
        assert (badly.status, badly.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, 10)  # the max (RocketMQ 5)
        small = store.get_messages("T", 0, -1)
        assert (small.status, small.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, 0)

        odd = store.get_messages("T", 0, 0, 10, tag_codes={tag_hash("odd")})
        assert odd.status == GetStatus.FOUND and [m.body for m in odd] == [b"1", b"3", b"5", b"7", b"9"]
        assert odd.next_begin_offset == 10
        nothing = store.get_messages("T", 0, 0, 10, tag_codes={tag_hash("none")})
        assert (nothing.status, nothing.next_begin_offset) == (GetStatus.NO_MATCHED_MESSAGE, 10)
        capped = store.get_messages("T", 0, 0, 10, max_bytes=1)          # at least one message
        assert len(capped) == 1 and capped.next_begin_offset == 1


def test_offsets_after_old_segments_expire(tmp_path):
    cfg = small_config(tmp_path, commitlog_file_size=8192, consume_queue_entries=50, file_reserved_time_hours=0)
    with MessageStore(cfg) as store:
        for i in range(120):
            store.put_message(Message(topic="T", body=b"%03d" % i * 60))
        store.wait_dispatched()
        assert store.delete_expired_files() >= 1
        low, high = store.min_offset("T", 0), store.max_offset("T", 0)
        assert 0 < low < high == 120
        small = store.get_messages("T", 0, low - 1)
        assert (small.status, small.next_begin_offset, small.min_offset) == (GetStatus.OFFSET_TOO_SMALL, low, low)
        badly = store.get_messages("T", 0, high + 5)
        assert (badly.status, badly.next_begin_offset) == (GetStatus.OFFSET_OVERFLOW_BADLY, high)   # min > 0
        first = store.get_messages("T", 0, low, 1)
        assert first.status == GetStatus.FOUND and first[0].body == b"%03d" % low * 60


def test_search_offset_by_time_with_an_injected_clock(tmp_path, clock):
    with MessageStore(small_config(tmp_path), clock=clock) as store:
        # store times (s after T0): 0 1 2 3 3 3 4 ... ; three messages share second 3
        times = []
        for i in range(10):
            store.put_message(Message(topic="T", body=b"%d" % i))
            times.append(clock.ms)
            if i not in (3, 4):
                clock.advance(1)
        store.wait_dispatched()
        assert times[3] == times[4] == times[5]
        assert store.search_offset_by_time("T", 0, times[0]) == 0
        assert store.search_offset_by_time("T", 0, times[2]) == 2
        assert store.search_offset_by_time("T", 0, times[3]) == 3                 # first of the equal ones
        assert store.search_offset_by_time("T", 0, times[3], upper=True) == 5     # last of them
        assert store.search_offset_by_time("T", 0, times[6] - 500) == 6           # between: the next one
        assert store.search_offset_by_time("T", 0, times[6] - 500, upper=True) == 5
        assert store.search_offset_by_time("T", 0, times[0] - 10_000) == 0        # before everything: min
        assert store.search_offset_by_time("T", 0, times[-1] + 10_000, upper=True) == 9
        assert store.search_offset_by_time("Nope", 0, times[0]) == 0
        assert store.earliest_store_time("T", 0) == times[0]


# ---- segments -----------------------------------------------------------------------------------

def test_many_small_segments_and_reads_across_them(tmp_path):
    seed = new_seed()
    rng = random.Random(seed)
    cfg = small_config(tmp_path, commitlog_file_size=8192, consume_queue_entries=64)
    sent = []
    with MessageStore(cfg) as store:
        for i in range(400):
            if i % 10 == 9:
                rs = store.put_messages([Message(topic="R", body=rng.randbytes(rng.randrange(1, 500)), queue_id=0)
                                         for _ in range(3)])
                sent += [(r, None) for r in rs]
            else:
                body = rng.randbytes(rng.randrange(1, 900))
                sent.append((store.put_message(Message(topic="R", body=body, queue_id=0)), body))
        store.wait_dispatched()
        files = segment_files(tmp_path)
        assert len(files) >= 20, f"seed {seed}"
        assert [int(p.name) for p in files] == [i * 8192 for i in range(len(files))]
        for r, _ in sent:                       # no record straddles two segments
            assert r.physical_offset // 8192 == (r.physical_offset + r.wrote_bytes - 1) // 8192, f"seed {seed}"
        got = read_queue(store, "R", 0, page=1000)
        assert [m.physical_offset for m in got] == [r.physical_offset for r, _ in sent], f"seed {seed}"
        assert all(m.crc_ok() for m in got)
        for (r, body), m in zip(sent, got):
            if body is not None:
                assert m.body == body, f"seed {seed}"
            assert store.view_by_id(r.msg_id).raw == m.raw
        big = store.get_messages("R", 0, 0, 10_000)     # one call stops at a consume-queue segment end
        assert big.next_begin_offset == len(big) <= 64


# ---- keys ---------------------------------------------------------------------------------------

def test_query_by_key_keys_uniq_key_time_range_and_max_num(tmp_path, clock):
    cfg = small_config(tmp_path, message_index_enable=True, index_max_entries=1000)
    with MessageStore(cfg, clock=clock) as store:
        for i in range(10):                             # one message every 10 s
            store.put_message(Message(topic="T", body=b"%d" % i, keys=["common", f"k{i}"],
                                      properties={"UNIQ_KEY": f"U{i}"}))
            clock.advance(10)
        store.put_message(Message(topic="Other", body=b"other", keys=["common"]))
        store.wait_dispatched()
        bodies = lambda ms: [m.body for m in ms]
        assert bodies(store.query_by_key("T", "common", 32)) == [b"%d" % i for i in range(9, -1, -1)]   # newest first
        assert bodies(store.query_by_key("T", "common", 3)) == [b"9", b"8", b"7"]
        assert bodies(store.query_by_key("T", "k4")) == [b"4"]
        assert bodies(store.query_by_key("T", "U7")) == [b"7"]
        assert bodies(store.query_by_key("Other", "common")) == [b"other"]
        assert store.query_by_key("T", "k99") == [] and store.query_by_key("Nope", "common") == []
        begin, end = T0_MS + 20_000, T0_MS + 50_000
        assert bodies(store.query_by_key("T", "common", 32, begin, end)) == [b"5", b"4", b"3", b"2"]
        assert bodies(store.query_by_key("T", "k1", 32, begin, end)) == []
        m = store.query_by_key("T", "k3")[0]
        assert m.keys == ["common", "k3"] and m.uniq_key == "U3" and m.queue_offset == 3


def test_reopen_after_clean_shutdown_keeps_everything(tmp_path, clock):
    cfg = small_config(tmp_path, message_index_enable=True, index_max_entries=1000)
    with MessageStore(cfg, clock=clock) as store:
        first = [store.put_message(Message(topic=f"T{i % 3}", body=b"m%d" % i * 50, queue_id=i % 2,
                                           keys=[f"k{i}"], tags="t")) for i in range(200)]
        store.wait_dispatched()
        before = {(t, q): [m.raw for m in read_queue(store, t, q)] for t in ("T0", "T1", "T2") for q in (0, 1)}
        end = store.commitlog.max_offset()
    with MessageStore(cfg, clock=clock) as store:
        assert store.recovery.abnormal is False and store.recovery.end_offset == end
        assert store.recovery.truncated_bytes == 0
        after = {(t, q): [m.raw for m in read_queue(store, t, q)] for t in ("T0", "T1", "T2") for q in (0, 1)}
        assert after == before
        for r in first:
            assert store.view_by_id(r.msg_id).physical_offset == r.physical_offset
        assert [m.body for m in store.query_by_key("T1", "k100")] == [b"m100" * 50]
        nxt = store.put_message(Message(topic="T0", body=b"next", queue_id=0))
        assert nxt.physical_offset == end and nxt.queue_offset == len(before[("T0", 0)])
        assert store.put_message(Message(topic="New", body=b"x")).queue_offset == 0


# ---- delay levels -------------------------------------------------------------------------------

def delay_config(path, **kw):
    return small_config(path, message_delay_level="1s 2s", schedule_poll_interval_ms=5, **kw)


def test_delay_level_parks_in_schedule_topic_then_is_re_put_when_due(tmp_path, clock):
    with MessageStore(delay_config(tmp_path), clock=clock) as store:
        r = store.put_message(Message(topic="Orders", body=b"later", queue_id=3, tags="TagA", keys=["k"],
                                      delay_level=1, born_timestamp=T0_MS - 1))
        assert r.status == PutStatus.PUT_OK
        store.wait_dispatched()
        parked = store.get_messages("SCHEDULE_TOPIC_XXXX", 0, 0, 10)       # level 1 -> queue 0
        assert parked.status == GetStatus.FOUND and len(parked) == 1
        p = parked[0]
        assert (p.topic, p.queue_id, p.body) == ("SCHEDULE_TOPIC_XXXX", 0, b"later")
        assert p.properties["REAL_TOPIC"] == "Orders" and p.properties["REAL_QID"] == "3"
        assert p.properties["DELAY"] == "1" and p.tags == "TagA"
        assert store.consume_queue("SCHEDULE_TOPIC_XXXX", 0).get_unit(0)[2] == T0_MS + 1000   # due time
        assert store.max_offset("Orders", 3) == 0

        clock.advance(0.5)
        assert store.schedule.deliver_due() == 0                # not due: nothing moves (no waiting needed)
        assert store.max_offset("Orders", 3) == 0
        clock.advance(0.6)
        assert wait_until(lambda: store.max_offset("Orders", 3) == 1), "the due message was not re-put"
        store.wait_dispatched()
        d = store.get_messages("Orders", 3, 0, 10)[0]
        assert (d.topic, d.queue_id, d.queue_offset, d.body) == ("Orders", 3, 0, b"later")
        assert "DELAY" not in d.properties
        assert d.properties["REAL_TOPIC"] == "Orders" and d.properties["REAL_QID"] == "3"   # kept, as RocketMQ
        assert d.tags == "TagA" and d.keys == ["k"] and d.born_timestamp == T0_MS - 1
        assert d.store_timestamp == clock.ms
    table = json.loads((tmp_path / "config" / "delayOffset.json").read_text())["offsetTable"]
    assert table == {"1": 1}


def test_delay_level_is_clamped_and_progress_survives_a_restart(tmp_path, clock):
    with MessageStore(delay_config(tmp_path), clock=clock) as store:
        rs = store.put_messages([Message(topic="D", body=b"first", delay_level=9),      # clamped to level 2
                                 Message(topic="D", body=b"fast", delay_level=1, queue_id=1)])
        assert rs.status == PutStatus.PUT_OK
        store.wait_dispatched()
        parked = store.get_messages("SCHEDULE_TOPIC_XXXX", 1, 0, 10)[0]
        assert parked.properties["DELAY"] == "2" and parked.body == b"first"
        clock.advance(2.5)
        assert wait_until(lambda: store.max_offset("D", 0) == 1 and store.max_offset("D", 1) == 1)
    with MessageStore(delay_config(tmp_path), clock=clock) as store:
        store.put_message(Message(topic="D", body=b"second", delay_level=2))
        clock.advance(2.5)
        assert wait_until(lambda: store.max_offset("D", 0) >= 2)
        store.wait_dispatched()
        # delivered in order; had "first" been delivered again it would sit before "second"
        assert [m.body for m in read_queue(store, "D", 0)] == [b"first", b"second"]
        assert [m.body for m in read_queue(store, "D", 1)] == [b"fast"]
