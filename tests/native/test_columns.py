"""The native Arrow columns of records against :class:`StoredMessage`, field by field.

Records come from the reference encoder: any properties (odd items without a separator, empty
values, a UNIQ_KEY or none), IPv4/IPv6 hosts, compressed bodies.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import Rec, encode_log

pa = pytest.importorskip("pyarrow")

from rocketq.common.properties import decode_properties  # noqa: E402
from rocketq.spark.decode import decode  # noqa: E402
from rocketq.store.record import StoredMessage  # noqa: E402
from rocketq.store.scan import split_records  # noqa: E402

TEXT = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), max_size=6)


@st.composite
def records(draw):
    items = draw(st.lists(st.sampled_from(["pair", "odd", "tags", "keys", "uniq", "empty_uniq"]), max_size=5))
    text = ""
    for item in items:
        if item == "pair":
            text += f"{draw(TEXT)}\x01{draw(TEXT)}\x02"
        elif item == "odd":
            text += f"{draw(TEXT)}\x02"
        else:
            name = {"tags": "TAGS", "keys": "KEYS", "uniq": "UNIQ_KEY", "empty_uniq": "UNIQ_KEY"}[item]
            text += f"{name}\x01{'' if item == 'empty_uniq' else draw(TEXT)}\x02"
    body = draw(st.binary(max_size=60))
    flag = draw(st.sampled_from([0, 0x1]))
    if flag:
        body = zlib.compress(body)
    ip = draw(st.sampled_from([bytes([10, 0, 0, 1]), bytes(15) + b"\x01"]))
    return Rec(draw(st.sampled_from(["T", "Topic_2"])), draw(st.integers(0, 3)), 0, flag, draw(st.integers(1, 1 << 41)),
               ip, 7, draw(st.integers(0, 5)), 0, body, text.encode())


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(records(), min_size=1, max_size=20), store_ip=st.sampled_from([bytes(4), bytes(16)]))
def test_columns_equal_stored_messages(recs, store_ip):
    log, _ = encode_log(recs, phys=4096, store_ts=1_800_000_000_250, store_ip=store_ip, store_port=10911,
                        next_offsets={})
    positions, sizes, _ = split_records(log)
    (batch,) = decode(log, 0, positions, sizes, broker="b1", store_columns=True)
    got = batch.to_pylist()
    for row, pos in zip(got, positions.tolist()):
        m = StoredMessage(log, pos)
        props = decode_properties(m.properties_string)
        body = zlib.decompress(m.body) if m.sys_flag & 1 else m.body
        want = {"topic": m.topic, "broker": "b1", "queue_id": m.queue_id, "queue_offset": m.queue_offset,
                "keys": props.get("KEYS"), "tags": props.get("TAGS"), "body": body,
                "properties": list(props.items()), "msg_id": props.get("UNIQ_KEY") or m.msg_id,
                "reconsume_times": m.reconsume_times, "physical_offset": m.physical_offset, "sysflag": m.sys_flag}
        assert {k: row[k] for k in want} == want
        assert row["born_timestamp"].timestamp() * 1000 == pytest.approx(m.born_timestamp)
        assert row["store_timestamp"].timestamp() * 1000 == pytest.approx(m.store_timestamp)


def test_columns_name_a_position_that_is_no_record():
    log, _ = encode_log([Rec("T", 0, 0, 0, 1, bytes(4), 1, 0, 0, b"x", b"")] * 2, phys=0, store_ts=5,
                        store_ip=bytes(4), store_port=1, next_offsets={})
    from rocketq.spark.decode import DecodeError
    with pytest.raises(DecodeError, match="position 3"):
        decode(log, 0, np.array([0, 3]), np.array([0, 0]), broker=None, store_columns=False)
