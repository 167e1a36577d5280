"""The sink's native batch encoder against the broker's batch decoder, and golden bytes."""

from __future__ import annotations

import pyarrow as pa
import pytest

from rocketq.broker.send import decode_batch
from rocketq.spark import sink_encode
from rocketq.spark.sink_encode import RowError, chunks, encode


@pytest.fixture
def fixed_ids(monkeypatch):
    """Ids 000...0, 000...1, ... for the rows of each batch."""
    monkeypatch.setattr(sink_encode, "_PREFIX", bytes(10))
    monkeypatch.setattr(sink_encode, "_reserve_ids", lambda n: 0)


def test_one_row_golden_bytes(fixed_ids):
    batch = pa.RecordBatch.from_pydict({"topic": ["T"], "body": [b"hi"], "tags": ["a"]})
    [group] = encode(batch, None)
    [(body, count, nbytes)] = list(chunks(group, 10, 1 << 20))
    props = b"UNIQ_KEY\x01" + b"0" * 32 + b"\x02TAGS\x01a\x02"
    assert body == ((20 + 2 + 2 + len(props)).to_bytes(4, "big") + bytes(12) + (2).to_bytes(4, "big") + b"hi"
                    + len(props).to_bytes(2, "big") + props)
    assert (count, nbytes) == (1, 2)


def test_rows_round_trip_through_the_broker_decoder_and_split_into_chunks(fixed_ids):
    rows = {"topic": ["T"] * 5, "body": [b"x" * i for i in range(1, 6)], "keys": ["k1 k2", None, "k3", None, None],
            "properties": [[("a", "1")], None, [], [("b", "2"), ("c", "3")], None]}
    [group] = encode(pa.RecordBatch.from_pydict(rows, schema=pa.schema([
        ("topic", pa.string()), ("body", pa.binary()), ("keys", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string()))])), None)
    parts = list(chunks(group, 2, 1 << 20))
    assert [c for _, c, _ in parts] == [2, 2, 1]
    decoded = [m for body, _, _ in parts for m in zip(*decode_batch(body))]
    assert [m[1] for m in decoded] == rows["body"]
    assert decoded[0][2] == "UNIQ_KEY\x01" + "0" * 32 + "\x02KEYS\x01k1 k2\x02a\x011\x02"
    assert decoded[3][2].endswith("b\x012\x02c\x013\x02")


def test_rows_that_cannot_be_messages_are_named():
    with pytest.raises(RowError, match="row 11: the body is null or empty"):
        encode(pa.RecordBatch.from_pydict({"topic": ["T", "T"], "body": [b"x", None]}), None, row0=10)
    with pytest.raises(RowError, match="row 0: no topic"):
        encode(pa.RecordBatch.from_pydict({"body": [b"x"]}), None)
    with pytest.raises(RowError, match="topic 'bad topic!'"):
        encode(pa.RecordBatch.from_pydict({"body": [b"x"]}), "bad topic!")
    with pytest.raises(RowError, match="separator"):
        encode(pa.RecordBatch.from_pydict({"body": [b"x"], "properties": [[("k", "a\x01b")]]},
                                          schema=pa.schema([("body", pa.binary()),
                                                            ("properties", pa.map_(pa.string(), pa.string()))])), "T")


def test_unique_keys_are_unique_and_hex():
    ids = []
    for n in (70_000, 10):
        [group] = encode(pa.RecordBatch.from_pydict({"body": [b"x"] * n}), "T")
        for body, _, _ in chunks(group, 100_000, 1 << 30):
            ids += [text.split("\x01")[1].split("\x02")[0] for text in decode_batch(body).texts]
    assert len(ids) == 70_010 and len(set(ids)) == len(ids)
    assert all(len(k) == 32 and int(k, 16) >= 0 for k in ids)


def test_sliced_batches_encode_their_own_rows(fixed_ids):
    """Spark hands over slices: every column's Arrow offset must be honoured (validity bits included)."""
    rows = {"body": [b"b%d" % i for i in range(8)], "tags": [None if i % 3 else f"t{i}" for i in range(8)],
            "properties": [[("p", str(i)), ("q", None)] for i in range(8)]}
    schema = pa.schema([("body", pa.binary()), ("tags", pa.string()), ("properties", pa.map_(pa.string(), pa.string()))])
    whole = pa.RecordBatch.from_pydict(rows, schema=schema)
    [group] = encode(whole.slice(3, 4), "T")
    [(body, count, _)] = list(chunks(group, 10, 1 << 20))
    decoded = decode_batch(body)
    assert count == 4 and decoded.bodies == [b"b3", b"b4", b"b5", b"b6"]
    assert [t.split("\x02", 1)[1] for t in decoded.texts] == [
        "TAGS\x01t3\x02p\x013\x02", "p\x014\x02", "p\x015\x02", "TAGS\x01t6\x02p\x016\x02"]


@pytest.mark.parametrize("maps", [[[], None], [[("a", None)], []], [[("a", None), ("b", None)], None]],
                         ids=["every map empty or null", "every value null", "null values and a null map"])
def test_properties_maps_without_any_value_encode(fixed_ids, maps):
    batch = pa.RecordBatch.from_pydict({"topic": ["T", "T"], "body": [b"x", b"y"]} | {
        "properties": pa.array(maps, pa.map_(pa.string(), pa.string()))})
    [group] = encode(batch, None)
    [(body, count, _)] = list(chunks(group, 10, 1 << 20))
    assert count == 2
    assert decode_batch(body).texts == ["UNIQ_KEY\x01" + "0" * 32 + "\x02",
                                         "UNIQ_KEY\x01" + "0" * 31 + "1\x02"]
