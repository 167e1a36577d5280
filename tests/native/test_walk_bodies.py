"""Several pulled bodies decoded in place into one set of columns (`_native.walk_bodies_columns`, the
topic source's chunk of pulls) against the reference: the reference walk (:func:`reference.scan`) of
each body, then the decoder at the positions it found; bodies of generated records cut at random
record boundaries, decoded in chunks of any size; damage is refused naming the body and the byte.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import Rec, encode_log, scan
from test_walk_columns import STORE_MS, records

pa = pytest.importorskip("pyarrow")

from rocketq import _native  # noqa: E402
from rocketq.spark.decode import TOPIC_SCHEMA, DecodeError, decode, decode_bodies  # noqa: E402


def _bodies(recs, cuts) -> list[bytes]:
    """The records' log split into bodies at record boundaries *cuts* (indexes into *recs*)."""
    out, start = [], 0
    for cut in sorted(set(cuts)) + [len(recs)]:
        body, _ = encode_log(recs[start:cut], phys=0, store_ts=STORE_MS, store_ip=bytes(4), store_port=1,
                             next_offsets={})
        out.append(body)
        start = cut
    return out


def _reference(bodies) -> pa.Table:
    want = []
    for body in bodies:
        r_pos, _sizes, _end, _blank, _error = scan(body, 0, 0, len(body), check_crc=False, torn_from=None)
        want += decode(body, 0, np.array(r_pos, dtype=np.int64), np.zeros(len(r_pos)), broker="b",
                       store_columns=False)
    return pa.Table.from_batches(want, schema=TOPIC_SCHEMA)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(recs=st.lists(records(), min_size=0, max_size=14), data=st.data(), max_rows=st.integers(1, 20))
def test_bodies_decode_as_the_reference_decodes_each_of_them(recs, data, max_rows):
    cuts = data.draw(st.lists(st.integers(0, len(recs)), max_size=4))
    bodies = _bodies(recs, cuts)
    batches = decode_bodies(bodies, broker="b", max_rows=max_rows)
    assert all(0 < b.num_rows <= max_rows for b in batches)
    assert pa.Table.from_batches(batches, schema=TOPIC_SCHEMA).equals(_reference(bodies))


def test_bytes_that_are_no_record_are_refused_naming_the_body_and_the_byte():
    rec = Rec("T", 0, 0, 0, 1, bytes(4), 1, 0, 0, b"x", b"KEYS\x01k\x02")
    one, _ = encode_log([rec] * 2, phys=0, store_ts=5, store_ip=bytes(4), store_port=1, next_offsets={})
    half = len(one) // 2
    with pytest.raises(DecodeError, match=f"pulled body 2 of 3 .*record at byte {half}"):
        decode_bodies([one, one[:half] + b"\xff" * half, one], broker=None, max_rows=10)
    with pytest.raises(DecodeError, match=f"pulled body 1 of 2 .*byte {len(one)}: the last 3 bytes are no record"):
        decode_bodies([one + b"\0\0\0", one], broker=None, max_rows=10)


def test_a_start_outside_the_bodies_is_refused():
    with pytest.raises(ValueError, match="outside 1 bodies"):
        _native.walk_bodies_columns([b"abc"], 0, 4, 1)
    with pytest.raises(ValueError, match="outside 1 bodies"):
        _native.walk_bodies_columns([b"abc"], 2, 0, 1)
    assert _native.walk_bodies_columns([b"abc"], 1, 0, 1)["rows"] == 0        # past the last: nothing left


def test_the_pull_body_fuzz_corpus_gives_columns_or_an_error_never_a_crash():
    """native/fuzz/corpus/pull_body (the pull decoder's fuzzer corpus), each input whole and cut in two
    bodies anywhere: columns or a named error, the walk's end inside the bodies."""
    from pathlib import Path
    corpus = Path(__file__).resolve().parents[2] / "native" / "fuzz" / "corpus" / "pull_body"
    inputs = sorted(corpus.glob("*"))
    assert inputs, f"no corpus in {corpus}"
    for path in inputs:
        data = path.read_bytes()
        for cut in sorted({0, len(data) // 3, len(data) // 2, len(data)}):
            bodies = [data[:cut], data[cut:]]
            cols = _native.walk_bodies_columns(bodies, 0, 0, 1 << 16)
            body, at = cols["end"]
            assert body <= 2 and (body == 2 or at <= len(bodies[body])), path.name
            if cols["error"] is not None:
                err_body, err_at, reason = cols["error"]
                assert err_at <= len(bodies[err_body]) and reason, path.name
