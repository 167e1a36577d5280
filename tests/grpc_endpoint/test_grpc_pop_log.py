"""The pop log and timer buckets (golden bytes, torn tails, replay), and the timer."""

import asyncio
import time

import pytest
from broker_helpers import store_config

from rocketq.broker.timer import Timer, decode_entries, encode_entry
from rocketq.broker.timer_messages import PROPERTY_TIMER_DELIVER_MS
from rocketq.common.message import Message
from rocketq.broker.pop.pop_log import ACKED, NEXT, POPPED, RENEWING, PopLog, PopLogCorrupt, PopRecord, decode_all, encode
from rocketq.broker.pop.pop_state import Handle, PopState, QueueKey
from rocketq.store import MessageStore

GOLDEN_POPPED = bytes.fromhex(
    "00000027" "a5563d12"                 # payload length 39, CRC-32 of the payload
    "01" "00000003"                       # POPPED, queue 3
    "0000000000000011"                    # queue offset 17
    "0000000000000005"                    # version 5
    "0000018bcfe56800"                    # invisible until 1700000000000 ms
    "00000002"                            # attempt 2
    "000147" "000154")                    # group "G", topic "T"


def test_pop_record_golden_bytes():
    r = PopRecord(POPPED, "G", "T", 3, 17, 5, 1_700_000_000_000, 2)
    assert encode(r) == GOLDEN_POPPED
    assert decode_all(GOLDEN_POPPED) == ([r], len(GOLDEN_POPPED))


GOLDEN_RENEWING = bytes.fromhex(
    "0000002a" "891a5edd"                 # payload length 42, CRC-32 of the payload
    "04" "00000003"                       # RENEWING, queue 3
    "0000000000000011"                    # queue offset 17
    "0000000000000005"                    # version 5
    "0000018bcfe56800"                    # renewed since 1700000000000 ms
    "00000000"                            # (attempt: unused)
    "000147" "000154" "000163")           # group "G", topic "T", client "c"


def test_renewing_record_golden_bytes_and_long_names():
    r = PopRecord(RENEWING, "G", "T", 3, 17, 5, 1_700_000_000_000, 0, "c")
    assert encode(r) == GOLDEN_RENEWING
    assert decode_all(GOLDEN_RENEWING) == ([r], len(GOLDEN_RENEWING))
    # a name of 128..255 bytes has a length whose low byte is not UTF-8 on its own
    long = PopRecord(POPPED, "G" * 200, "T" * 200, 1, 2, 3, 4, 5)
    blob = encode(long) + GOLDEN_RENEWING
    assert decode_all(blob) == ([long, r], len(blob))


def test_timer_entry_golden_bytes():
    golden = bytes.fromhex("0000018bcfe5687b" "0000000000001000" "000000d2" "a5646622")
    assert encode_entry(1_700_000_000_123, 4096, 210) == golden
    assert decode_entries(golden + golden[:7], path="b") == [(1_700_000_000_123, 4096, 210)]   # torn tail dropped


def test_torn_tail_is_cut_and_damage_in_the_middle_is_reported(tmp_path):
    a = encode(PopRecord(NEXT, "G", "T", 0, 4))
    b = encode(PopRecord(ACKED, "G", "T", 0, 3, 9))
    assert decode_all(a + b[:10]) == ([PopRecord(NEXT, "G", "T", 0, 4)], len(a))
    bad = bytearray(a + b)
    bad[12] ^= 0xFF
    with pytest.raises(PopLogCorrupt, match="byte 0: CRC mismatch"):
        decode_all(bytes(bad))
    path = tmp_path / "pop.log"
    path.write_bytes(a + b[:10])
    assert PopLog(path).load() == [PopRecord(NEXT, "G", "T", 0, 4)]
    assert path.read_bytes() == a                      # the torn record is gone for good


def test_pop_state_replays_to_what_was_in_flight(tmp_path):
    now = [1_000_000]
    log = PopLog(tmp_path / "pop.log")
    state = PopState(log, clock_ms=lambda: now[0])
    state.load()
    key = QueueKey("G", "T", 1)
    state.queue(key, lambda: 10)
    e10 = state.pop(key, 10, invisible_ms=5000, attempt=1)
    e11 = state.pop(key, 11, invisible_ms=5000, attempt=1)
    state.pop(key, 12, invisible_ms=5000, attempt=3)
    state.advance(key, 15)                              # 13 and 14 filtered out
    state.ack(key, e10)
    e11b = state.change(key, e11, 60_000)
    assert state.find(key, Handle(False, 1, 11, e11.version, e11.deadline_ms)) is None     # replaced
    assert state.find(key, Handle(False, 1, 11, e11b.version, e11b.deadline_ms)) is e11b
    log.close()
    again = PopState(PopLog(tmp_path / "pop.log"), clock_ms=lambda: now[0])
    again.load()
    q = again.queues[key]
    assert q.next_offset == 15 and sorted(q.inflight) == [11, 12] and q.commit_offset() == 11
    assert (q.inflight[11].version, q.inflight[11].deadline_ms) == (e11b.version, e11b.deadline_ms)
    assert q.inflight[12].attempt == 3
    now[0] += 10_000
    assert [(k, e.offset) for k, e in again.due()] == [(key, 12)]        # 11 got more time
    assert again.pop(key, 16, invisible_ms=1, attempt=1).version > e11b.version      # versions never repeat


def test_renewals_survive_a_restart_until_acked_nacked_or_ended(tmp_path):
    now = [1_000_000]
    log = PopLog(tmp_path / "pop.log")
    state = PopState(log, clock_ms=lambda: now[0])
    state.load()
    key = QueueKey("G", "T", 0)
    state.queue(key, lambda: 0)
    es = [state.pop(key, o, invisible_ms=5000, attempt=1) for o in range(5)]
    for e in es:
        state.own(key, e, "push-1", 999_000)
    state.renew(key, es[0], 9000)                       # renewed in place: still renewing
    state.ack(key, es[1])                               # acked
    state.change(key, es[2], 7000)                      # nacked: a new version, no renewal
    state.disown(key, 3)                                # its client was gone
    log.close()
    again = PopState(PopLog(tmp_path / "pop.log"), clock_ms=lambda: now[0])
    again.load()
    assert {o: (r.client_id, r.since_ms) for (k, o), r in again.renewing.items()} == \
        {0: ("push-1", 999_000), 4: ("push-1", 999_000)}
    again.compact()                                     # the rewrite keeps them too
    third = PopState(PopLog(tmp_path / "pop.log"), clock_ms=lambda: now[0])
    third.load()
    assert sorted(o for _, o in third.renewing) == [0, 4]


def test_batched_changes_are_written_once_with_the_same_bytes(tmp_path):
    def run(path, batched: bool) -> tuple[bytes, int]:
        log = PopLog(path)
        state = PopState(log, clock_ms=lambda: 1_000_000)
        state.load()
        key = QueueKey("G", "T", 0)
        state.queue(key, lambda: 0)
        writes = []
        real = log._f.write
        log._f.write = lambda blob: writes.append(blob) or real(blob)
        if batched:
            with state.batched():
                for offset in range(3):
                    state.pop(key, offset, invisible_ms=5000, attempt=1)
                state.advance(key, 4)
                assert writes == []                     # nothing written inside the block
        else:
            for offset in range(3):
                state.pop(key, offset, invisible_ms=5000, attempt=1)
            state.advance(key, 4)
        log.close()
        return path.read_bytes(), len(writes)
    one, one_writes = run(tmp_path / "a.log", batched=True)
    many, many_writes = run(tmp_path / "b.log", batched=False)
    assert one == many and (one_writes, many_writes) == (1, 4)


def test_receipt_handle_round_trip_and_rejects():
    h = Handle(True, 2, 345, 6, 1_700_000_000_000)
    assert Handle.parse(h.encode()) == h
    for bad in ("", "x:1:2:3:4", "n:1:2:3", "n:a:2:3:4", "n:-1:2:3:4"):
        assert Handle.parse(bad) is None


def test_timer_delivers_due_messages_and_keeps_far_ones_on_disk(tmp_path):
    async def scenario():
        store = MessageStore(store_config(tmp_path)).start()
        timer = Timer(store, tmp_path / "timer", bucket_ms=200)
        store.arrival_listeners.append(timer.on_arrival)
        timer.start()
        try:
            now_ms = int(time.time() * 1000)
            due = {f"soon-{i}": now_ms + 300 + 30 * i for i in range(40)}
            due.update({f"far-{i}": now_ms + 3_600_000 + i for i in range(10)})
            for body, at in due.items():
                m = Message("Dest", body.encode(), queue_id=1, properties={PROPERTY_TIMER_DELIVER_MS: str(at)})
                assert store.put_message(timer.wrap(m)).ok
            deadline = time.monotonic() + 30
            while store.max_offset("Dest", 1) < 40:
                assert time.monotonic() < deadline, f"{store.max_offset('Dest', 1)} of 40 delivered"
                await asyncio.sleep(0.02)
            got = store.get_messages("Dest", 1, 0, 64).messages
            lateness = sorted(m.store_timestamp - due[m.body.decode()] for m in got)
            print(f"timer lateness ms: p50 {lateness[len(lateness) // 2]} max {lateness[-1]}")
            assert all(m.store_timestamp >= due[m.body.decode()] for m in got)       # never early
            assert {m.body.decode() for m in got} == {k for k in due if k.startswith("soon")}
            assert timer.pending_in_memory == 0                # the far ones wait in their bucket file
            assert any(p.name.isdigit() for p in (tmp_path / "timer").iterdir())
        finally:
            await timer.close()
            store.shutdown()
    asyncio.run(scenario())
