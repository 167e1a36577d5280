"""The client's own codec pieces: reading PULL_MESSAGE / QUERY_MESSAGE bodies (records in place,
malformed bodies refused), batch bodies, and message keys."""

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


def test_unique_keys_of_a_batch_are_distinct_hex_and_do_not_repeat_single_keys():
    from rocketq.client.ids import unique_key, unique_keys
    keys = unique_keys(1000) + [unique_key()] + unique_keys(3)
    assert len(set(keys)) == len(keys) and all(len(k) == 32 and k == k.upper() for k in keys)
    assert all(int(k, 16) >= 0 for k in keys) and unique_keys(0) == []
    counters = [int(k[-4:], 16) for k in keys]
    assert all((b - a) % 0x10000 == 1 for a, b in zip(counters, counters[1:]))


def test_batch_body_golden_bytes_and_round_trip_through_the_broker_decoder():
    import random

    from rocketq.broker.send import decode_batch, encode_batch
    props = b"UNIQ_KEY\x01K\x02"
    assert encode_batch([(7, b"hi", props.decode())]) == (
        (20 + 2 + 2 + len(props)).to_bytes(4, "big") + bytes(8) + (7).to_bytes(4, "big") + (2).to_bytes(4, "big")
        + b"hi" + len(props).to_bytes(2, "big") + props)
    assert encode_batch([]) == b""
    seed = random.randrange(2**32)
    print(f"seed {seed}")
    rnd = random.Random(seed)
    msgs = [(rnd.randrange(-2**31, 2**31), rnd.randbytes(rnd.randrange(1, 300)),
             "".join(f"k{j}\x01{'é' * rnd.randrange(3)}v{j}\x02" for j in range(rnd.randrange(4))))
            for _ in range(rnd.randrange(1, 50))]
    cols = decode_batch(encode_batch(msgs))
    assert list(zip(cols.flags, cols.bodies, cols.texts)) == msgs
