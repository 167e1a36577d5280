"""``SinglePut.append``: the single put with the segment's bookkeeping and the result made natively.

``CommitLog.append_message`` hands it a real ``MappedFile`` and the store's clock; it must write the
bytes ``SinglePut.put`` writes (itself held against the reference encoder in test_single_put.py),
move the segment as ``MappedFile.advance`` does, and return the ``PutMessageResult`` that the Python
path built before: same fields, same type, an ordinary (mutable, collectable) object.  A message it
refuses, or one that does not fit, leaves the segment and the queue-offset table as they were.
"""

from __future__ import annotations

import gc
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_record_batch import SETTINGS, STORE_HOSTS, messages

from rocketq import _native
from rocketq.common.message import Message
from rocketq.common.validation import topic_error
from rocketq.store.mapped_file import MappedFile
from rocketq.store.results import PutMessageResult, PutStatus

STORE_TS = 1_800_000_000_250
SEGMENT = 1 << 20
BASE = 3 << 30                      # the segment's file_from_offset


def _single_put(table: dict, store, *, segment: int = SEGMENT, result_type=PutMessageResult):
    return _native.SinglePut(table, max_body_bytes=4 << 20, store_ip=store.ip, store_port=store.port,
                             segment_bytes=segment, check_topic=topic_error, result_type=result_type,
                             put_ok=PutStatus.PUT_OK)


def _segment(directory: str, size: int = SEGMENT) -> MappedFile:
    return MappedFile(Path(directory) / f"{BASE:020d}", size)


def _fixed_clock() -> float:
    return STORE_TS / 1000


@SETTINGS
@given(msgs=st.lists(messages.filter(lambda m: not m.delay_level), min_size=1, max_size=8),
       store=st.sampled_from(STORE_HOSTS),
       offsets=st.dictionaries(st.tuples(st.just("T"), st.integers(0, 7)), st.integers(0, 99)))
def test_append_writes_what_put_writes_and_returns_the_result(msgs, store, offsets):
    put_table, append_table = dict(offsets), dict(offsets)
    by_put = _single_put(put_table, store)
    by_append = _single_put(append_table, store)
    want = bytearray(SEGMENT)
    with tempfile.TemporaryDirectory() as directory:
        mf = _segment(directory)
        try:
            for m in msgs:
                pos = mf.wrote
                msg_id, queue_offset, size = by_put.put(m, want, pos, BASE + pos, STORE_TS)
                result = by_append.append(m, mf, _fixed_clock)
                assert type(result) is PutMessageResult
                assert result == PutMessageResult(PutStatus.PUT_OK, msg_id, BASE + pos, queue_offset, m.queue_id,
                                                  size, STORE_TS, None)
                assert (mf.wrote, mf.committed, mf.store_timestamp) == (pos + size, pos + size, STORE_TS)
            assert mf.read(0, mf.wrote) == bytes(want[:mf.wrote])
            assert append_table == put_table
        finally:
            mf.close()


def test_the_wall_clock_is_read_natively_as_int_time_time_ms():
    with tempfile.TemporaryDirectory() as directory:
        mf = _segment(directory)
        try:
            before = int(time.time() * 1000)
            result = _single_put({}, STORE_HOSTS[0]).append(Message(topic="T", body=b"x"), mf, time.time)
            after = int(time.time() * 1000)
            assert before <= result.store_timestamp <= after
            assert mf.store_timestamp == result.store_timestamp
        finally:
            mf.close()


def test_the_result_is_an_ordinary_object():
    with tempfile.TemporaryDirectory() as directory:
        mf = _segment(directory)
        try:
            result = _single_put({}, STORE_HOSTS[0]).append(Message(topic="T", body=b"x"), mf, _fixed_clock)
        finally:
            mf.close()
    assert result.ok and result.error is None and gc.is_tracked(result)
    result.status = PutStatus.FLUSH_DISK_TIMEOUT           # what put_message does when the flush times out
    assert not result.ok and "FLUSH_DISK_TIMEOUT" in repr(result)


def test_a_result_type_of_another_layout_is_called():
    @dataclass
    class Plain:                                            # no slots: made by calling it
        status: object
        msg_id: str
        physical_offset: int
        queue_offset: int
        queue_id: int
        wrote_bytes: int
        store_timestamp: int
        error: object

    with tempfile.TemporaryDirectory() as directory:
        mf = _segment(directory)
        try:
            result = _single_put({}, STORE_HOSTS[0], result_type=Plain).append(
                Message(topic="T", body=b"x", queue_id=2), mf, _fixed_clock)
        finally:
            mf.close()
    assert isinstance(result, Plain)
    assert (result.status, result.physical_offset, result.queue_id, result.store_timestamp) == \
        (PutStatus.PUT_OK, BASE, 2, STORE_TS)


@pytest.mark.parametrize("msg", [Message(topic="bad/topic", body=b"x"), Message(topic="T", body=b"x" * 2500)],
                         ids=["refused", "segment-full"])
def test_nothing_moves_when_the_message_is_not_written(msg):
    table = {("T", 0): 4}
    put = _single_put(table, STORE_HOSTS[0], segment=4096)
    with tempfile.TemporaryDirectory() as directory:
        mf = _segment(directory, 4096)
        try:
            put.append(Message(topic="T", body=b"y" * 1500), mf, _fixed_clock)
            state = (mf.wrote, mf.committed, mf.store_timestamp, dict(table), mf.read(0, 4096))
            with pytest.raises((_native.BatchError, _native.SegmentFull)):
                put.append(msg, mf, lambda: STORE_TS / 1000 + 5)
            assert (mf.wrote, mf.committed, mf.store_timestamp, dict(table), mf.read(0, 4096)) == state
        finally:
            mf.close()


def test_append_needs_the_result_type():
    put = _native.SinglePut({}, max_body_bytes=1024, store_ip=bytes(4), store_port=1, segment_bytes=4096,
                            check_topic=topic_error)
    with tempfile.TemporaryDirectory() as directory:
        mf = _segment(directory, 4096)
        try:
            with pytest.raises(ValueError, match="result_type"):
                put.append(Message(topic="T", body=b"x"), mf, _fixed_clock)
        finally:
            mf.close()
