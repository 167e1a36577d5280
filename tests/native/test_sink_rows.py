"""The Spark sink's row encoder (``encode_sink_rows``) against the reference, on generated Arrow batches.

Rows have binary bodies (some empty or null), tags and keys columns with nulls, empty strings and the
separators, a properties map with null values, and the batch is sometimes a slice (Arrow offsets).
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import sink_rows

from rocketq.spark.sink_encode import encode_rows

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEXT = st.one_of(st.none(), st.text(st.characters(blacklist_categories=("Cs",)), max_size=6),
                 st.sampled_from(["a\x01b", "x\x02"]))
PREFIX = bytes(range(1, 11))
COUNTER = (1 << 48) - 2                    # wraps within a few rows


def _column(values, typ):
    return None if values is None else pa.array(values, typ)


def _utf8(values):
    return None if values is None else [None if v is None else v.encode() for v in values]


@SETTINGS
@given(data=st.data(), n=st.integers(1, 8), max_body=st.sampled_from([4, 64]), sliced=st.integers(0, 2))
def test_sink_rows_equal_the_reference(data, n, max_body, sliced):
    total = n + sliced
    bodies = data.draw(st.lists(st.one_of(st.binary(min_size=1, max_size=8), st.sampled_from([b"", None])),
                                min_size=total, max_size=total))
    tags, keys = (data.draw(st.one_of(st.none(), st.lists(TEXT, min_size=total, max_size=total))) for _ in "tk")
    props = data.draw(st.one_of(st.none(), st.lists(st.one_of(st.none(), st.lists(
        st.tuples(st.sampled_from(["p", "q", "a\x01"]), TEXT), max_size=3)), min_size=total, max_size=total)))
    columns = {"body": _column(bodies, pa.binary()), "tags": _column(tags, pa.string()),
               "keys": _column(keys, pa.string()), "properties": _column(props, pa.map_(pa.string(), pa.string()))}
    batch = pa.RecordBatch.from_pydict({name: c for name, c in columns.items() if c is not None})
    batch = batch.slice(sliced, n)
    view = slice(sliced, sliced + n)
    want_props = None if props is None else [
        None if row is None else [(k.encode(), None if v is None else v.encode()) for k, v in row] for row in props[view]]
    try:
        want = sink_rows(bodies[view], _utf8(tags[view]) if tags else None, _utf8(keys[view]) if keys else None,
                         want_props, uniq_prefix=PREFIX, first_counter=COUNTER, max_body_bytes=max_body)
    except ValueError as exc:
        want = exc
    encode = lambda: encode_rows(batch, uniq_prefix=PREFIX, first_counter=COUNTER, max_body_bytes=max_body)
    if isinstance(want, ValueError):
        with pytest.raises(ValueError) as got:
            encode()
        assert str(got.value).split(":")[0] == str(want).split(":")[0]          # the same row is named
        return
    entries, offsets, lens = encode()
    at = struct.unpack(f"<{n + 1}q", offsets)
    assert [entries[at[i]:at[i + 1]] for i in range(n)] == want
    assert list(struct.unpack(f"<{n}q", lens)) == [len(b) for b in bodies[view]]
