"""Start-up recovery: clean restarts, torn tails, corruption inside flushed data, lost derived state,
and every flush mode writing a store that reopens to the same contents."""

from __future__ import annotations

import hashlib
import random
import shutil
import struct
import threading
from pathlib import Path

import numpy as np
import pytest

from rocketq.common.msgid import HostAddress
from rocketq.store.scan import scan_segment
from store_helpers import (
    FakeClock,
    new_seed,
    read_queue,
    segment_files,
    small_config,
    wait_until,
)

from rocketq.store import CorruptionError, Message, MessageStore, PutStatus
from rocketq.store.record import Blank, StoredMessage, check_record

SEG = 64 * 1024


def fill(store, n: int, *, topics=("T",), queues=2, size=120, seed=0) -> list[tuple]:
    """Put *n* messages (singles and small batches); returns (result, body) in log order."""
    rng = random.Random(seed)
    out = []
    i = 0
    while i < n:
        if i % 5 == 4 and n - i >= 3:
            msgs = [Message(topic=topics[(i + j) % len(topics)], body=b"%05d|" % (i + j) * (size // 6),
                            queue_id=(i + j) % queues, keys=[f"k{i + j}"], tags=rng.choice(["a", "b"]))
                    for j in range(3)]
            rs = store.put_messages(msgs)
            assert rs.ok
            out += [(r, m.body) for r, m in zip(rs, msgs)]
            i += 3
        else:
            m = Message(topic=topics[i % len(topics)], body=b"%05d|" % i * (size // 6), queue_id=i % queues,
                        keys=[f"k{i}"], tags=rng.choice(["a", "b"]))
            r = store.put_message(m)
            assert r.ok
            out.append((r, m.body))
            i += 1
    return out


def snapshot(store, topics=("T",), queues=2) -> dict:
    store.wait_dispatched()
    return {(t, q): [m.raw for m in read_queue(store, t, q)] for t in topics for q in range(queues)}


def log_end(results) -> int:
    r = max((r for r, _ in results), key=lambda r: r.physical_offset)
    return r.physical_offset + r.wrote_bytes


def rocketq_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("rocketq-")}


# ---- clean restarts -----------------------------------------------------------------------------

def test_clean_restart_scans_only_the_tail_and_keeps_everything(tmp_path):
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        assert store.recovery.abnormal is False and store.recovery.end_offset == 0
        results = fill(store, 1500)                  # ~ 3.3 segments
        before = snapshot(store)
    assert not (tmp_path / "abort").exists()
    with MessageStore(cfg) as store:
        rec = store.recovery
        assert rec.abnormal is False and rec.truncated_bytes == 0 and rec.redispatched_records == 0
        assert rec.end_offset == log_end(results)
        assert rec.scanned_bytes <= 3 * SEG           # only the last three segments are walked
        assert snapshot(store) == before
        assert (tmp_path / "abort").exists()          # present while open
    assert not (tmp_path / "abort").exists()


def test_interrupted_segment_creation_leaves_only_a_tmp_file_that_is_removed(tmp_path):
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        results = fill(store, 100)
    stray = tmp_path / "commitlog" / "00000000000000065536.tmp"
    stray.write_bytes(b"\x00" * 100)                  # a crash during reserve/rename of the next segment
    (tmp_path / "abort").write_text("1")
    with MessageStore(cfg) as store:
        assert not stray.exists()
        assert store.recovery.end_offset == log_end(results)
        assert len(read_queue(store, "T", 0)) + len(read_queue(store, "T", 1)) == 100


@pytest.mark.parametrize("crashed", [False, True], ids=["clean", "crash"])
def test_a_log_that_ends_with_a_blank_record(tmp_path, crashed):
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        first = store.put_message(Message(topic="T", body=b"a" * 60_000))
        store.put_message(Message(topic="T", body=b"b" * (SEG - first.wrote_bytes - 8 - 92)))   # leaves 8 bytes
        assert store.commitlog.max_offset() == SEG - 8
    seg0 = segment_files(tmp_path)[0]
    data = bytearray(seg0.read_bytes())
    data[SEG - 8:] = struct.pack(">iI", 8, 0xCBD43194)   # closed, as the next put would have left it
    seg0.write_bytes(bytes(data))
    for extra in segment_files(tmp_path)[1:]:
        extra.unlink()
    if crashed:
        (tmp_path / "abort").write_text("1")
    with MessageStore(cfg) as store:
        assert store.recovery.end_offset == SEG and store.recovery.truncated_bytes == 0
        r = store.put_message(Message(topic="T", body=b"next"))
        assert (r.physical_offset, r.queue_offset) == (SEG, 2)
        store.wait_dispatched()
        assert read_queue(store, "T", 0)[-1].body == b"next"


def test_crash_snapshot_with_the_index_finds_every_key_exactly_once(tmp_path):
    """Copy a live store's files after the last put (what SIGKILL leaves) and open the copy."""
    cfg = small_config(tmp_path / "live", message_index_enable=True, index_max_entries=150,
                       flush_interval_consume_queue_ms=20)
    with MessageStore(cfg) as store:                 # a first run, shut down cleanly
        fill(store, 200)
    store = MessageStore(cfg).start()
    try:
        more = fill(store, 400)
        store.wait_dispatched()
        shutil.copytree(tmp_path / "live", tmp_path / "copy")
    finally:
        store.shutdown()
    copy = cfg.replace(store_path=tmp_path / "copy")
    with MessageStore(copy) as store:
        assert store.recovery.abnormal is True and store.recovery.end_offset == log_end(more)
        for i in range(400):
            hits = store.query_by_key("T", f"k{i}", 32)
            assert len(hits) == (2 if i < 200 else 1), (i, len(hits))       # k0..k199 were put in both runs
            assert all(m.keys == [f"k{i}"] for m in hits)
        assert sum(len(read_queue(store, "T", q)) for q in (0, 1)) == 600


# ---- torn tails ---------------------------------------------------------------------------------

def _torn_bytes(kind: str, rng: random.Random, record: bytes, end: int) -> bytes:
    if kind == "garbage":
        return bytes(rng.randrange(1, 256) for _ in range(rng.randrange(8, 400)))
    if kind == "size-only":
        return struct.pack(">i", len(record))
    # the first part of a record that was being written at `end`, as a crash leaves it: cut inside
    # the body (the body CRC fails) or, "tail-only", inside its topic / properties tail, which passes
    # magic, size, offset and body CRC - recovery sees the never-written last byte instead
    patched = bytearray(record)
    patched[28:36] = struct.pack(">q", end)
    m = StoredMessage(record)
    body_end = len(record) - 1 - len(m.topic.encode()) - 2 - len(m.properties_string.encode())
    if kind == "tail-only":        # keep the properties length, lose 1.. bytes of the properties
        return bytes(patched[:rng.randrange(len(record) - len(m.properties_string.encode()), len(record))])
    return bytes(patched[:rng.randrange(9, body_end)])


@pytest.mark.parametrize("kind", ["garbage", "half-record", "tail-only", "size-only"])
def test_torn_tail_is_cut_and_writing_continues(tmp_path, kind):
    seed = new_seed()
    rng = random.Random(seed)
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        results = fill(store, rng.randrange(50, 700), seed=seed)
        before = snapshot(store)
    end = log_end(results)
    seg = segment_files(tmp_path)[-1]
    base = int(seg.name)
    data = bytearray(seg.read_bytes())
    last_r = max((r for r, _ in results), key=lambda r: r.physical_offset)
    record = bytes(data[last_r.physical_offset - base:last_r.physical_offset - base + last_r.wrote_bytes])
    torn = _torn_bytes(kind, rng, record, end)
    torn = torn[:SEG - (end - base)]
    data[end - base:end - base + len(torn)] = torn
    seg.write_bytes(bytes(data))
    (tmp_path / "abort").write_text("12345")           # the writer died

    with MessageStore(cfg) as store:
        rec = store.recovery
        assert rec.abnormal is True, f"seed {seed}"
        assert rec.end_offset == end, f"seed {seed} {kind}"
        assert rec.truncated_bytes > 0, f"seed {seed} {kind}"
        assert snapshot(store) == before, f"seed {seed}"          # earlier messages intact, queues agree
        for r, body in results[-5:]:
            assert store.read_message(r.physical_offset).body == body
        nxt = [store.put_message(Message(topic="T", body=b"next%d" % q, queue_id=q)) for q in (0, 1)]
        # with too little room left after the cut the next record closes the segment with a blank
        # and goes to the next one, as RocketMQ does; otherwise it lands exactly at the cut
        fits = SEG - (end - base) >= nxt[0].wrote_bytes + nxt[1].wrote_bytes + 8
        if fits:
            assert nxt[0].physical_offset == end, f"seed {seed}"
            assert nxt[1].physical_offset == end + nxt[0].wrote_bytes
        else:
            assert nxt[1].physical_offset == base + SEG or nxt[0].physical_offset == base + SEG, f"seed {seed}"
        assert [r.queue_offset for r in nxt] == [len(before[("T", 0)]), len(before[("T", 1)])], f"seed {seed}"
        after = snapshot(store)
    if fits:
        assert (Path(seg).read_bytes()[end - base + nxt[0].wrote_bytes + nxt[1].wrote_bytes:]
                == bytes(SEG - (end - base) - nxt[0].wrote_bytes - nxt[1].wrote_bytes)), "garbage was not zeroed"
    with MessageStore(cfg) as store:                         # and it stays that way
        assert store.recovery.truncated_bytes == 0 and snapshot(store) == after


def test_torn_last_record_with_a_queue_unit_pointing_at_it(tmp_path):
    """The last record was appended and dispatched but never flushed, then damaged: its queue unit goes too."""
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        results = fill(store, 40)
        before = snapshot(store)
    last = results[-1][0]
    seg = segment_files(tmp_path)[-1]
    data = bytearray(seg.read_bytes())
    data[last.physical_offset - int(seg.name) + 88 + 3] ^= 0x40                   # inside its body
    seg.write_bytes(bytes(data))
    with open(tmp_path / "checkpoint", "r+b") as fh:       # durable only up to the record before it
        fh.seek(40)
        fh.write(struct.pack(">q", last.physical_offset))
    (tmp_path / "abort").write_text("1")
    with MessageStore(cfg) as store:
        assert store.recovery.end_offset == last.physical_offset
        qid = last.queue_id
        assert store.max_offset("T", qid) == last.queue_offset                   # the unit was dropped
        assert [m.raw for m in read_queue(store, "T", qid)] == before[("T", qid)][:-1]
        r = store.put_message(Message(topic="T", body=b"instead", queue_id=qid))
        assert (r.physical_offset, r.queue_offset) == (last.physical_offset, last.queue_offset)
        store.wait_dispatched()
        assert read_queue(store, "T", qid)[-1].body == b"instead"


def test_segments_after_a_torn_tail_are_removed(tmp_path):
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        results = fill(store, 200)                   # within the first segment
    end = log_end(results)
    assert end < SEG
    later = tmp_path / "commitlog" / f"{SEG:020d}"   # a next segment with bytes in it, beyond the end
    later.write_bytes(b"\xab" * 100 + bytes(SEG - 100))
    (tmp_path / "abort").write_text("1")
    with MessageStore(cfg) as store:
        assert store.recovery.end_offset == end
        assert not later.exists()
        assert store.put_message(Message(topic="T", body=b"x")).physical_offset == end


# ---- corruption inside flushed data -------------------------------------------------------------

@pytest.mark.parametrize("crashed", [False, True], ids=["after-clean-shutdown", "after-crash"])
def test_flipped_byte_in_a_flushed_body_stops_start_up(tmp_path, crashed):
    seed = new_seed()
    rng = random.Random(seed)
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        results = fill(store, 800, seed=seed)
    victim, _ = rng.choice([x for x in results[-300:-1]])          # in one of the last segments
    seg = next(p for p in segment_files(tmp_path) if int(p.name) <= victim.physical_offset < int(p.name) + SEG)
    pos = victim.physical_offset - int(seg.name) + 88 + rng.randrange(0, 20)
    data = bytearray(seg.read_bytes())
    data[pos] ^= 1 << rng.randrange(8)
    seg.write_bytes(bytes(data))
    if crashed:
        (tmp_path / "abort").write_text("1")
    damaged = seg.read_bytes()
    threads = rocketq_threads()
    with pytest.raises(CorruptionError) as info:
        MessageStore(cfg).start()
    text = str(info.value)
    assert seg.name in text and str(seg) in text, f"seed {seed}"
    assert f"offset {victim.physical_offset}" in text, f"seed {seed}"
    assert "rocketq store repair" in text and f"--truncate-at {victim.physical_offset}" in text
    assert info.value.offset == victim.physical_offset and "CRC" in info.value.reason
    assert seg.read_bytes() == damaged, "a refused start must not change the log"
    assert rocketq_threads() <= threads, "a failed start left threads running"
    with pytest.raises(CorruptionError):               # the lock was released: the same answer again
        MessageStore(cfg).start()


def test_damaged_header_inside_flushed_data_is_corruption_too(tmp_path):
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        results = fill(store, 100)
    victim = results[50][0]
    seg = segment_files(tmp_path)[0]
    data = bytearray(seg.read_bytes())
    data[victim.physical_offset + 30] ^= 0x01             # PHYSICALOFFSET field
    seg.write_bytes(bytes(data))
    with pytest.raises(CorruptionError) as info:
        MessageStore(cfg).start()
    assert info.value.offset == victim.physical_offset


@pytest.mark.parametrize("crashed", [False, True], ids=["after-clean-shutdown", "after-crash"])
def test_zeroed_page_inside_flushed_data_is_corruption_not_the_end_of_the_log(tmp_path, crashed):
    """A run of zeros where flushed records were (a lost page, a hole) must not read as 'end of data':
    everything after it was acknowledged and flushed, and would be deleted without a word."""
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        results = fill(store, 200)
    end = log_end(results)
    victim = results[50][0]
    seg = segment_files(tmp_path)[0]
    data = bytearray(seg.read_bytes())
    data[victim.physical_offset:victim.physical_offset + 4096] = bytes(4096)
    seg.write_bytes(bytes(data))
    if crashed:
        (tmp_path / "abort").write_text("1")
    try:
        store = MessageStore(cfg).start()
    except CorruptionError as exc:
        assert exc.offset == victim.physical_offset and "rocketq store repair" in str(exc)
        return
    try:
        kept = store.recovery.end_offset
        assert kept == end, (f"recovery cut the log at {kept} instead of {end}: "
                             f"{end - kept} flushed bytes dropped silently (truncated_bytes="
                             f"{store.recovery.truncated_bytes})")
    finally:
        store.shutdown()


def test_an_empty_last_queue_file_does_not_hide_units_past_the_log_end(tmp_path):
    """A crash while a consume queue rolls leaves an empty newest queue file; units in the older
    file that point past the recovered log end must still be dropped."""
    cfg = small_config(tmp_path, consume_queue_entries=100)
    with MessageStore(cfg) as store:
        results = [store.put_message(Message(topic="T", body=b"%03d" % i * 30)) for i in range(100)]
        store.wait_dispatched()
    cut = results[90]
    qdir = tmp_path / "consumequeue" / "T" / "0"
    (qdir / f"{100 * 20:020d}").write_bytes(bytes(100 * 20))        # the queue's next file, created, empty
    seg = segment_files(tmp_path)[0]
    data = bytearray(seg.read_bytes())
    data[cut.physical_offset + 88] ^= 0xFF                           # record 90 was torn ...
    seg.write_bytes(bytes(data))
    with open(tmp_path / "checkpoint", "r+b") as fh:                  # ... and never flushed
        fh.seek(40)
        fh.write(struct.pack(">q", cut.physical_offset))
    (tmp_path / "abort").write_text("1")
    with MessageStore(cfg) as store:
        assert store.recovery.end_offset == cut.physical_offset
        assert store.max_offset("T", 0) == 90, "queue units pointing past the log end survived recovery"
        r = store.put_message(Message(topic="T", body=b"new"))
        assert (r.physical_offset, r.queue_offset) == (cut.physical_offset, 90)
        store.wait_dispatched()
        got = read_queue(store, "T", 0)
        assert [m.queue_offset for m in got] == list(range(91)) and got[-1].body == b"new"


# ---- derived state rebuilt from the log ---------------------------------------------------------

@pytest.mark.parametrize("crashed", [True, False], ids=["with-abort", "clean"])
def test_consume_queues_and_checkpoint_deleted_are_rebuilt(tmp_path, crashed):
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        results = fill(store, 700, topics=("A", "B"), queues=3)
        before = snapshot(store, ("A", "B"), 3)
        cq_bytes = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "consumequeue").rglob("0*")
                    if p.is_file()}
    shutil.rmtree(tmp_path / "consumequeue")
    (tmp_path / "checkpoint").unlink()
    if crashed:
        (tmp_path / "abort").write_text("1")
    with MessageStore(cfg) as store:
        assert store.recovery.redispatched_records == len(results)
        assert snapshot(store, ("A", "B"), 3) == before
        rebuilt = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "consumequeue").rglob("0*")
                   if p.is_file()}
        assert rebuilt == cq_bytes                                  # the same units, byte for byte
        r = store.put_message(Message(topic="A", body=b"next", queue_id=0))
        assert r.queue_offset == len(before[("A", 0)])


def test_consume_queues_deleted_after_a_clean_shutdown_are_rebuilt(tmp_path):
    """Queues are derived state: losing them must not lose messages nor reuse queue offsets."""
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        fill(store, 300)
        before = snapshot(store)
    shutil.rmtree(tmp_path / "consumequeue")
    with MessageStore(cfg) as store:
        r = store.put_message(Message(topic="T", body=b"next", queue_id=0))
        assert r.queue_offset == len(before[("T", 0)]), "a queue offset already in the log was handed out again"
        after = snapshot(store)
        assert after[("T", 1)] == before[("T", 1)]
        assert after[("T", 0)][:-1] == before[("T", 0)] and StoredMessage(after[("T", 0)][-1]).body == b"next"


def test_crash_with_a_zeroed_checkpoint_walks_and_redispatches_the_whole_log(tmp_path):
    cfg = small_config(tmp_path)
    with MessageStore(cfg) as store:
        results = fill(store, 900)
        before = snapshot(store)
    (tmp_path / "abort").write_text("1")
    (tmp_path / "checkpoint").write_bytes(bytes(4096))      # the crash came before the first checkpoint
    with MessageStore(cfg) as store:
        rec = store.recovery
        assert rec.abnormal and rec.truncated_bytes == 0 and rec.end_offset == log_end(results)
        assert rec.scanned_bytes >= log_end(results) - SEG     # every segment was walked
        assert snapshot(store) == before                        # re-dispatch is idempotent


def test_checkpoint_never_claims_queue_units_that_were_not_flushed(tmp_path):
    """``logicsFlushedOffset`` says "queues are on disk up to here; re-dispatch from here after a
    crash".  Drive one interleaving deterministically: the periodic queue flush runs after the
    dispatcher has looked up (and marked dirty) a queue but before it wrote the unit, then runs
    again after the batch is done.  The second checkpoint must not cover a unit never flushed."""
    cfg = small_config(tmp_path, flush_interval_consume_queue_ms=3_600_000)    # no background flush
    with MessageStore(cfg) as store:
        sink = store.dispatcher._sinks[0]
        lookup = sink._queue_for

        def lookup_then_flush(topic, qid):
            cq = lookup(topic, qid)
            store._flush_logics()                # the flush thread gets the CPU right here
            return cq

        sink._queue_for = lookup_then_flush
        r = store.put_message(Message(topic="T", body=b"x"))
        assert store.wait_dispatched()
        sink._queue_for = lookup
        store._flush_logics()                    # the next periodic flush
        claimed = store.checkpoint.value.logics_flushed_offset
        cq = store.consume_queue("T", 0)
        assert claimed == r.physical_offset + r.wrote_bytes
        assert cq.files.flushed_offset() >= 20, (
            f"checkpoint says queues are flushed up to log offset {claimed}, but the unit of the record "
            f"at {r.physical_offset} was never flushed (queue flushed to byte {cq.files.flushed_offset()})")


# ---- flush modes --------------------------------------------------------------------------------

MODES = {
    "ASYNC_FLUSH": {"flush_disk_type": "ASYNC_FLUSH"},
    "SYNC_FLUSH": {"flush_disk_type": "SYNC_FLUSH"},
    "TRANSIENT_POOL": {"transient_store_pool_enable": True, "transient_store_pool_size": 2,
                       "commit_interval_commitlog_ms": 20},
}


def _write_fixed_workload(path: Path, mode: dict) -> dict:
    cfg = small_config(path, commitlog_file_size=16 * 1024, consume_queue_entries=50, **mode)
    rng = random.Random(7)
    with MessageStore(cfg, clock=FakeClock()) as store:
        for i in range(500):
            if i % 9 == 0:
                rs = store.put_messages([Message(topic=f"T{j % 3}", body=rng.randbytes(rng.randrange(0, 300)),
                                                 queue_id=j % 2, tags=f"t{j}") for j in range(4)])
                assert rs.ok
            else:
                r = store.put_message(Message(topic=f"T{i % 3}", body=rng.randbytes(rng.randrange(0, 300)),
                                              queue_id=i % 2, keys=[f"k{i}"]))
                assert r.ok
        contents = snapshot(store, ("T0", "T1", "T2"))
    return contents


def _log_digest(path: Path) -> dict:
    """Per segment, a digest of its bytes up to the end of its records (blank header included)."""
    out = {}
    for seg in segment_files(path):
        data = seg.read_bytes()
        pos = 0
        while pos + 8 <= len(data) and data[pos:pos + 8] != bytes(8):
            r = check_record(data, pos, len(data), offset=int(seg.name) + pos)
            pos += 8 if isinstance(r, Blank) else r
            if isinstance(r, Blank):
                break
        out[seg.name] = hashlib.sha256(data[:pos]).hexdigest()
    return out


@pytest.mark.parametrize("mode", list(MODES))
def test_each_flush_mode_reopens_with_identical_contents(tmp_path, mode):
    written = _write_fixed_workload(tmp_path, MODES[mode])
    cfg = small_config(tmp_path, commitlog_file_size=16 * 1024, consume_queue_entries=50, **MODES[mode])
    with MessageStore(cfg) as store:
        assert store.recovery.abnormal is False and store.recovery.truncated_bytes == 0
        assert snapshot(store, ("T0", "T1", "T2")) == written
        r = store.put_message(Message(topic="T0", body=b"more"))
        assert r.status == PutStatus.PUT_OK and r.queue_offset == len(written[("T0", 0)])


def test_transient_pool_commits_a_small_tail_within_the_commit_thorough_interval(tmp_path):
    """With the transient pool, acknowledged bytes live in process memory until committed to the
    file.  Less than ``commitCommitLogLeastPages`` pages still go within RocketMQ's
    ``commitCommitLogThoroughInterval`` (200 ms), not the 10 s flush thorough interval."""
    cfg = small_config(tmp_path, transient_store_pool_enable=True)        # RocketMQ's commit defaults
    with MessageStore(cfg) as store:
        rs = [store.put_message(Message(topic="T", body=b"tail %d" % i)) for i in range(3)]
        end = rs[-1].physical_offset + rs[-1].wrote_bytes
        seg = segment_files(tmp_path)[0]

        def in_the_file() -> bool:          # what the page cache holds: what a killed process leaves
            with open(seg, "rb") as fh:
                return fh.read(end)[rs[-1].physical_offset:] == store.read_message(rs[-1].physical_offset).raw

        assert wait_until(in_the_file, 3.0), "the acknowledged tail stayed out of the file for over 3 s"


def test_all_flush_modes_write_the_same_bytes(tmp_path):
    digests = {}
    queues = {}
    for name, mode in MODES.items():
        _write_fixed_workload(tmp_path / name, mode)
        digests[name] = _log_digest(tmp_path / name)
        queues[name] = {p.relative_to(tmp_path / name): p.read_bytes()
                        for p in (tmp_path / name / "consumequeue").rglob("0*") if p.is_file()}
    assert len(digests["ASYNC_FLUSH"]) > 10
    assert digests["SYNC_FLUSH"] == digests["ASYNC_FLUSH"] == digests["TRANSIENT_POOL"]
    assert queues["SYNC_FLUSH"] == queues["ASYNC_FLUSH"] == queues["TRANSIENT_POOL"]


def test_torn_tail_check_sees_the_last_byte_of_topic_or_properties(tmp_path):
    """Pinned per record shape: properties or none, IPv4 or IPv6 hosts (the slow path)."""
    v6 = HostAddress.parse("[::1]:1234")
    msgs = [Message(topic="T", body=b"with props", tags="a", keys=["k"]),
            Message(topic="Tx", body=b"no props"),
            Message(topic="T6", body=b"v6 with props", properties={"a": "b"}, born_host=v6),
            Message(topic="T6", body=b"v6 no props", born_host=v6)]
    with MessageStore(small_config(tmp_path)) as store:
        raws = [bytes(store.read_message(store.put_message(m).physical_offset).raw) for m in msgs]
    for raw in raws:
        buf = bytearray(raw)
        tail_last = len(raw) - 1 if not raw.endswith(b"\0\0") else len(raw) - 3
        phys = int.from_bytes(raw[28:36], "big")
        whole = scan_segment(bytes(buf), phys, 0, len(buf), check_crc=True, torn_from=phys)
        assert whole.error is None and whole.positions.tolist() == [0], raw[-24:]
        buf[tail_last] = 0
        torn = scan_segment(bytes(buf), phys, 0, len(buf), check_crc=True, torn_from=phys)
        assert torn.positions.tolist() == [] and "never written" in torn.error.reason, raw[-24:]
        before = scan_segment(bytes(buf), phys, 0, len(buf), check_crc=True, torn_from=phys + 1)
        assert before.error is None, "only records at or after the flushed offset are judged"
