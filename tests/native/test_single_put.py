"""The native single put (``SinglePut``) against the reference encoder and against the batch path.

A run of generated messages is put one by one into a buffer, as ``CommitLog.append_message`` does
into a segment, and compared byte for byte with :func:`reference.encode_log` of the same records:
queue offsets from (and advancing) the same table, message ids, sizes.  A message the store refuses
is refused with the batch path's status and words (``RecordBatch.from_messages`` of a list of one).
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from reference import encode_log
from test_record_batch import (
    DELAY_LEVELS,
    SETTINGS,
    STORE_HOSTS,
    _rec,
    messages,
    topics,
)

from rocketq import _native
from rocketq.common.message import Message
from rocketq.common.msgid import HostAddress
from rocketq.common.validation import topic_error
from rocketq.store.prepare import Preparer
from rocketq.store.results import PutError

STORE_TS = 1_800_000_000_250
SEGMENT = 1 << 20
GUARD = 8                       # bytes before the first record that must stay untouched


def _single_put(table: dict, store: HostAddress, *, max_body: int = 4 << 20, segment: int = SEGMENT,
                check_topic=topic_error):
    return _native.SinglePut(table, max_body_bytes=max_body, store_ip=store.ip, store_port=store.port,
                             segment_bytes=segment, check_topic=check_topic)


@SETTINGS
@given(msgs=st.lists(messages.filter(lambda m: not m.delay_level), min_size=1, max_size=8),
       store=st.sampled_from(STORE_HOSTS), phys=st.integers(0, 1 << 40),
       offsets=st.dictionaries(st.tuples(topics, st.integers(0, 7)), st.integers(0, 99)))
def test_single_puts_write_the_reference_records(msgs, store, phys, offsets):
    table = dict(offsets)
    put = _single_put(table, store)
    out = bytearray(SEGMENT)
    pos, ids, qoffs = GUARD, [], []
    for m in msgs:
        msg_id, qoff, size = put.put(m, out, pos, phys + pos - GUARD, STORE_TS)
        ids.append(msg_id)
        qoffs.append(qoff)
        assert struct.unpack_from(">i", out, pos)[0] == size
        pos += size
    want_table = dict(offsets)
    want, want_qoffs = encode_log([_rec(m) for m in msgs], phys=phys, store_ts=STORE_TS, store_ip=store.ip,
                                  store_port=store.port, next_offsets=want_table)
    assert bytes(out[GUARD:pos]) == want
    assert out[:GUARD] == bytes(GUARD) and not any(out[pos:]), "wrote outside its records"
    assert qoffs == want_qoffs
    assert table == want_table
    starts, at = [], 0
    while at < len(want):
        starts.append(at)
        at += struct.unpack_from(">i", want, at)[0]
    assert ids == [(store.packed + struct.pack(">q", phys + s)).hex().upper() for s in starts]


# Fields that make the store refuse a message, one or two at a time (the first check that fails wins).
BAD_FIELDS = {
    "body": {"body": b"x" * 101},
    "queue": {"queue_id": -1},
    "queue_high": {"queue_id": 1 << 31},
    "flag": {"flag": 1 << 31},
    "sys_flag": {"sys_flag": -(1 << 31) - 1},
    "reconsume": {"reconsume_times": 1 << 32},
    "born_ts": {"born_timestamp": 1 << 63},
    "tags": {"tags": "a\x01b"},
    "keys": {"keys": ["k\x02"]},
    "props_sep": {"properties": {"k": "a\x02"}},
    "props_size": {"properties": {"p": "v" * 40_000}},
    "keys_size": {"keys": ["k" * 40_000]},
    "topic": {"topic": "bad/topic"},
    "topic_long": {"topic": "t" * 200},
    "topic_empty": {"topic": ""},
}


@SETTINGS
@given(bad=st.lists(st.sampled_from(sorted(BAD_FIELDS)), min_size=1, max_size=2, unique=True),
       store=st.sampled_from(STORE_HOSTS))
def test_refusals_are_the_batch_paths(bad, store):
    fields = {}
    for name in bad:
        fields.update(BAD_FIELDS[name])
    msg = Message(**{"topic": "T", "body": b"ok", **fields})
    prep = Preparer(max_message_size=100, delay_levels=DELAY_LEVELS, store_host=store)
    with pytest.raises(PutError) as ref:
        prep.messages([msg])
    table = {("T", 0): 5}
    put = _single_put(table, store, max_body=100)
    out = bytearray(4096)
    with pytest.raises(_native.BatchError) as got:
        put.put(msg, out, 0, 0, STORE_TS)
    assert got.value.args == (ref.value.status.value, ref.value.reason)
    assert not any(out) and table == {("T", 0): 5}


def test_a_record_past_the_segment_end_is_not_written():
    store = STORE_HOSTS[0]
    table: dict = {}
    put = _single_put(table, store, segment=1024)
    out = bytearray(1024)
    msg = Message(topic="T", body=b"x" * 300)
    _, _, size = put.put(msg, out, 0, 0, STORE_TS)
    assert size == 88 + 300 + 1 + 1 + 2        # header (IPv4 hosts), body, topic length + "T", properties length
    before = bytes(out)
    with pytest.raises(_native.SegmentFull) as full:
        put.put(msg, out, 1024 - size - 7, 0, STORE_TS)     # one byte short of the blank's 8
    assert full.value.args == (size,)
    assert bytes(out) == before and table == {("T", 0): 1}
    put.put(msg, out, 1024 - size - 8, 0, STORE_TS)          # exactly fits, the blank's 8 left over
    assert table == {("T", 0): 2}


def test_a_record_bigger_than_a_segment_is_refused_as_the_batch_path_refuses_it():
    put = _single_put({}, STORE_HOSTS[0], segment=1024)
    with pytest.raises(_native.BatchError) as err:
        put.put(Message(topic="T", body=b"x" * 1000), bytearray(1024), 0, 0, STORE_TS)
    assert err.value.args[0] == "MESSAGE_ILLEGAL"
    assert "does not fit in a 1024-byte commitlog segment" in err.value.args[1]


def test_the_topic_check_runs_once_per_distinct_topic_in_a_row():
    seen = []

    def check(topic):
        seen.append(topic)
        return topic_error(topic)

    put = _single_put({}, STORE_HOSTS[0], check_topic=check)
    out = bytearray(SEGMENT)
    pos = 0
    for topic in ["A", "A", "B", "A", "A"]:
        pos += put.put(Message(topic=topic, body=b"x"), out, pos, pos, STORE_TS)[2]
    assert seen == ["A", "B", "A"]
    with pytest.raises(_native.BatchError, match="contains characters"):
        put.put(Message(topic="bad/topic", body=b"x"), out, pos, pos, STORE_TS)
    with pytest.raises(_native.BatchError, match="contains characters"):     # a refusal is not remembered
        put.put(Message(topic="bad/topic", body=b"x"), out, pos, pos, STORE_TS)


def test_the_reused_queue_key_still_reads_the_table_and_matches_equal_topics():
    """A row of puts to one queue reuses its ``(topic, queue)`` key; the offsets still come from the
    table (which the batch path advances too), and an equal topic of another object is the same queue."""
    table = {}
    put = _single_put(table, STORE_HOSTS[0])
    out = bytearray(SEGMENT)
    pos = 0

    def queue_offset(topic: str, queue_id: int) -> int:
        nonlocal pos
        _msg_id, offset, size = put.put(Message(topic=topic, body=b"x", queue_id=queue_id), out, pos, pos, STORE_TS)
        pos += size
        return offset

    topic = "Orders"
    assert [queue_offset(topic, 0), queue_offset(topic, 0)] == [0, 1]
    assert queue_offset("".join(["Ord", "ers"]), 0) == 2
    table[(topic, 0)] = 10                                   # the batch path appended 8 meanwhile
    assert [queue_offset(topic, 0), queue_offset(topic, 1), queue_offset("Other", 1), queue_offset(topic, 1)] == \
        [10, 0, 0, 1]
    assert table == {(topic, 0): 11, (topic, 1): 2, ("Other", 1): 1}


def test_a_delay_level_is_not_taken():
    """The schedule topic is policy: CommitLog.append_message sends such messages down the batch path."""
    put = _single_put({}, STORE_HOSTS[0])
    with pytest.raises(ValueError, match="delay level"):
        put.put(Message(topic="T", body=b"x", delay_level=3), bytearray(1024), 0, 0, STORE_TS)


def test_a_big_body_is_copied_with_the_gil_released_and_still_matches():
    store = STORE_HOSTS[1]
    table: dict = {}
    body = bytes(range(256)) * 1024                          # 256 KiB: past DETACH_FROM_BYTES
    msg = Message(topic="Big", body=body, tags="t", keys=["k"])
    out = bytearray(SEGMENT)
    _, _, size = _single_put(table, store).put(msg, out, 0, 4096, STORE_TS)
    want, _ = encode_log([_rec(msg)], phys=4096, store_ts=STORE_TS, store_ip=store.ip, store_port=store.port,
                         next_offsets={})
    assert bytes(out[:size]) == want


_TWO_PUTS = """
import threading, time
from rocketq import _native
from rocketq.common.message import Message
from rocketq.common.validation import topic_error

entered = threading.Event()

def check(topic):
    if topic == "Slow":
        entered.set()
        time.sleep(0.2)                  # lets go of the GIL
    return topic_error(topic)

put = _native.SinglePut({}, max_body_bytes=1 << 20, store_ip=bytes(4), store_port=1, segment_bytes=1 << 16,
                        check_topic=check)
out = bytearray(1 << 16)
slow = threading.Thread(target=put.put, args=(Message(topic="Slow", body=b"x"), out, 0, 0, 1))
slow.start()
assert entered.wait(5)
put.put(Message(topic="Fast", body=b"y"), out, 4096, 4096, 1)
slow.join()
print("both stored")
"""


def test_a_topic_check_that_lets_go_of_the_gil_does_not_block_another_put():
    """The checker is Python: while it runs, another thread may take the GIL and put (here without the
    store's put lock), so no lock of the kernel may be held across it.  Run in a child process: when
    one was, the second put blocked on it holding the GIL and the process hung."""
    import subprocess
    import sys

    child = subprocess.run([sys.executable, "-c", _TWO_PUTS], capture_output=True, text=True, timeout=60)
    assert child.returncode == 0 and "both stored" in child.stdout, child.stderr
