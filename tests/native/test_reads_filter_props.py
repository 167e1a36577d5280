"""A pull's walk over consume-queue units (``read_units``) and the SQL92 prefilter's property columns
(``property_codes``) against the reference, on generated segments and units.

A segment holds reference-encoded records (IPv4 and IPv6 hosts, V1 magic) and sometimes garbage after
them; the units point at its records, at blanks, at expired offsets, at other segments, inside records
and past the readable end, with tags codes some filters want and some do not.
"""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import BLANK_SIZE, UNIT, Rec, encode_log, property_codes, read_units

from rocketq import _native

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
IPS = [(bytes([10, 0, 0, 1]), 7), (bytes(15) + b"\x01", 9)]
NAMES = ["region", "TAGS", "a", "é"]
VALUES = st.one_of(st.sampled_from(["", "eu", "us", "é", "x\x01y"]),
                   st.binary(max_size=4).filter(lambda b: b"\x01" not in b and b"\x02" not in b))


@st.composite
def props(draw) -> bytes:
    items = draw(st.lists(st.tuples(st.sampled_from([*NAMES, "", "other"]), VALUES), max_size=5))
    out = b""
    for name, value in items:
        value = value.encode() if isinstance(value, str) else value
        out += name.encode() + draw(st.sampled_from([b"\x01", b""])) + value + b"\x02"
    return out[:-1] if out and draw(st.booleans()) else out          # with or without the last separator


@st.composite
def segments(draw):
    """``(segment bytes, seg_base, readable, [(phys, size) of each record])``."""
    recs = [Rec("T", 0, 0, 0, 5, *draw(st.sampled_from(IPS)), 0, 0, draw(st.binary(max_size=30)), draw(props()))
            for _ in range(draw(st.integers(0, 12)))]
    base = draw(st.integers(0, 1 << 33))
    log, _ = encode_log(recs, phys=base, store_ts=1_800_000_000_250, store_ip=bytes([127, 0, 0, 1]),
                        store_port=10911, next_offsets={})
    spans, at = [], base
    while at < base + len(log):
        size = struct.unpack_from(">i", log, at - base)[0]
        spans.append((at, size))
        at += size
    segment = log + draw(st.binary(max_size=40))
    readable = draw(st.sampled_from([len(segment), len(log), max(0, len(log) - 7)]))
    return segment, base, readable, spans


@st.composite
def units_for(draw, seg):
    segment, base, _readable, spans = seg
    choices = [
        st.sampled_from(spans) if spans else st.just((base, 91)),                        # a record
        st.tuples(st.just(base), st.sampled_from([BLANK_SIZE, 0, -5])),                    # blank, no size
        st.tuples(st.integers(0, max(0, base - 1)), st.integers(1, 200)),                 # expired / below
        st.tuples(st.integers(base, base + len(segment) + 50), st.integers(1, 300)),       # anywhere, garbage
        st.tuples(st.integers(-(1 << 62), 1 << 62), st.integers(-(1 << 31), (1 << 31) - 1)),   # nonsense
    ]
    picked = draw(st.lists(st.one_of(choices), max_size=20))
    raw = b"".join(UNIT.pack(phys, size, draw(st.sampled_from([0, 7, -3]))) for phys, size in picked)
    return raw + draw(st.sampled_from([b"", b"\x00" * 7]))                              # a torn last unit


@SETTINGS
@given(data=st.data(), seg=segments(), max_bytes=st.integers(0, 2000),
       tag_codes=st.one_of(st.none(), st.lists(st.sampled_from([0, 7, -3]), max_size=2)),
       answered=st.sampled_from([0, 1, 500, 2000]))
def test_read_units_equals_the_reference(data, seg, max_bytes, tag_codes, answered):
    segment, base, readable, _ = seg
    units = data.draw(units_for(seg))
    log_min = data.draw(st.sampled_from([0, base, base + 1]))
    got = _native.read_units(units, segment, base, readable, log_min=log_min, max_bytes=max_bytes,
                             tag_codes=tag_codes, answered=answered)
    assert got == read_units(units, segment, base, readable, log_min=log_min, max_bytes=max_bytes,
                             tag_codes=tag_codes, answered=answered)


@SETTINGS
@given(data=st.data(), seg=segments(), names=st.lists(st.sampled_from([*NAMES, "none"]), max_size=4))
def test_property_codes_equal_the_reference(data, seg, names):
    segment, base, readable, _ = seg
    units = data.draw(units_for(seg))
    times, cols = _native.property_codes(units, segment, base, readable, names)
    want_times, want_cols = property_codes(units, segment, base, readable, names)
    n = len(units) // 20
    assert list(struct.unpack(f"<{n}q", times)) == want_times
    assert [(values, list(struct.unpack(f"<{n}i", codes))) for values, codes in cols] == want_cols
