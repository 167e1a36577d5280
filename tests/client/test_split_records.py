"""The client's reader of PULL_MESSAGE / QUERY_MESSAGE bodies: records in place, malformed bodies refused."""

import struct

import pytest

from rocketq.client import MQClientError
from rocketq.client.api import split_records
from rocketq.store import Message, MessageStore, StoreConfig


def _pulled_body(tmp_path, n: int) -> bytes:
    store = MessageStore(StoreConfig(store_path=tmp_path / "store", commitlog_file_size=1 << 20)).start()
    try:
        store.put_messages([Message(topic="T", body=f"body-{i}".encode(), tags="a", keys=[f"k{i}"]) for i in range(n)])
        assert store.wait_dispatched(5)
        return store.get_messages("T", 0, 0, n).raw
    finally:
        store.shutdown()


def test_records_of_a_pulled_body_are_read_in_order(tmp_path):
    msgs = split_records(_pulled_body(tmp_path, 5))
    assert [(m.body, m.queue_offset, m.keys) for m in msgs] == [(f"body-{i}".encode(), i, [f"k{i}"]) for i in range(5)]


@pytest.mark.parametrize("size, where", [(0, 0), (-5, 0), (90, 0), (10_000, 0)])
def test_a_record_size_that_cannot_be_right_is_refused_naming_the_byte(tmp_path, size, where):
    body = _pulled_body(tmp_path, 2)
    bad = struct.pack(">i", size) + body[4:]
    with pytest.raises(MQClientError, match=f"malformed message record at byte {where} of a {len(body)}-byte body"):
        split_records(bad)


def test_a_torn_second_record_is_named_by_its_position(tmp_path):
    body = _pulled_body(tmp_path, 2)
    first = struct.unpack_from(">i", body)[0]
    with pytest.raises(MQClientError, match=f"at byte {first} of a {len(body) - 1}-byte body"):
        split_records(body[:-1])
