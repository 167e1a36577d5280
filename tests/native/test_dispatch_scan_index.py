"""The native dispatch walk, index insert and segment scan against the reference, on generated logs.

Logs are built by the reference encoder from hypothesis-generated records (tags, keys, unique keys,
delay levels in the schedule topic, prepared and rolled-back transaction records, IPv6 hosts, a
blank record at the end), then damaged at random for the scanner: flipped bytes, torn tails,
truncation.
"""

from __future__ import annotations

import struct

import pytest

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import Rec, dispatch, encode_log, find_record_start, index_put, scan

from rocketq import _native

DELAYS = [1000, 5000, 10000, 30000]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WORD = st.text(st.characters(blacklist_characters="\x01\x02 ", blacklist_categories=("Cs",)), min_size=1, max_size=6)
IPS = [(bytes([10, 0, 0, 1]), 7), (bytes(15) + b"\x01", 9)]


@st.composite
def records(draw):
    topic = draw(st.sampled_from(["T", "U", "SCHEDULE_TOPIC_XXXX", "Tx_%|-9"]))
    props = {}
    if draw(st.booleans()):
        props["TAGS"] = draw(st.text(max_size=6).filter(lambda t: "\x01" not in t and "\x02" not in t))
    if draw(st.booleans()):
        props["KEYS"] = " ".join(draw(st.lists(WORD, max_size=3))) + draw(st.sampled_from(["", " ", "  x"]))
    if draw(st.booleans()):
        props["UNIQ_KEY"] = draw(st.sampled_from(["", "U1", "7F0000010001"]))
    if topic == "SCHEDULE_TOPIC_XXXX":
        props["DELAY"] = draw(st.sampled_from(["1", "3", "0", "99", "x", ""]))
    text = "".join(f"{k}\x01{v}\x02" for k, v in props.items()).encode()
    born_ip, born_port = draw(st.sampled_from(IPS))
    return Rec(topic, draw(st.integers(0, 3)), 0, draw(st.sampled_from([0, 0, 0x4, 0x8, 0xC])), 5, born_ip,
               born_port, 0, 0, draw(st.binary(max_size=40)), text)


def _log(recs, *, base: int, store_ip: bytes, blank: int) -> bytes:
    log, _ = encode_log(recs, phys=base, store_ts=1_800_000_000_250, store_ip=store_ip, store_port=10911,
                        next_offsets={("T", 1): 5})
    if blank:
        log += struct.pack(">iI", 8 + blank, 0xCBD43194) + bytes(blank)
    return log


def _native_units(run) -> dict:
    out: dict = {}
    for topic, qid, first, units, _end in run.queue_runs():
        rows = out.setdefault((topic, qid), [])
        rows.extend((first + i, units[20 * i:20 * i + 20]) for i in range(len(units) // 20))
    return out


@SETTINGS
@given(recs=st.lists(records(), max_size=25), base=st.integers(0, 1 << 35),
       store_ip=st.sampled_from([bytes(4), bytes(16)]), blank=st.sampled_from([0, 0, 24]))
def test_dispatch_scan_equals_the_reference(recs, base, store_ip, blank):
    log = _log(recs, base=base, store_ip=store_ip, blank=blank)
    run = _native.dispatch_scan(log, 0, len(log), base_offset=base, delay_levels_ms=DELAYS)
    units, index, end, is_blank = dispatch(log, base, 0, len(log), DELAYS)
    assert run.error is None and (run.end, run.blank) == (end, is_blank)
    assert _native_units(run) == units
    assert run.index_list() == index
    assert run.records == len(recs)
    for topic, qid, first, raw, phy_end in run.queue_runs():      # runs are consecutive and end right
        last = struct.unpack(">qiq", raw[-20:])
        assert phy_end == last[0] + last[1]


def test_a_delay_past_the_largest_store_time_wraps_as_a_java_long():
    """Only a damaged or forged record has such a store time; the walk computes the delivery time as
    RocketMQ does (long arithmetic) instead of failing (the dispatch_walk fuzzer's find)."""
    rec = Rec("SCHEDULE_TOPIC_XXXX", 2, 0, 0, 5, bytes([10, 0, 0, 1]), 7, 0, 0, b"b", b"DELAY\x013\x02")
    log, _ = encode_log([rec], phys=0, store_ts=(1 << 63) - 1000, store_ip=bytes(4), store_port=10911,
                        next_offsets={})
    run = _native.dispatch_scan(log, 0, len(log), base_offset=0, delay_levels_ms=DELAYS)
    units, _index, _end, _ = dispatch(log, 0, 0, len(log), DELAYS)
    assert _native_units(run) == units
    (_offset, unit), = units[("SCHEDULE_TOPIC_XXXX", 2)]
    assert struct.unpack(">qiq", unit)[2] == (1 << 63) - 1000 + DELAYS[2] - (1 << 64)


# properties as a producer may send them: stray separators, empty names and values, repeated names,
# multi-byte text, several spaces between keys (the split on separators is memchr2-based natively)
PROPS_TEXT = st.lists(st.sampled_from(["\x01", "\x02", "TAGS", "KEYS", "UNIQ_KEY", "DELAY", " ", "k", "é", "\U0001F600",
                                       "3"]), max_size=24).map("".join)


@SETTINGS
@given(texts=st.lists(PROPS_TEXT, min_size=1, max_size=12), topic=st.sampled_from(["T", "SCHEDULE_TOPIC_XXXX"]))
def test_dispatch_scan_reads_any_properties_string_as_the_reference(texts, topic):
    recs = [Rec(topic, 1, 0, 0, 5, bytes([10, 0, 0, 1]), 7, 0, 0, b"b", t.encode()) for t in texts]
    log = _log(recs, base=4096, store_ip=bytes(4), blank=0)
    run = _native.dispatch_scan(log, 0, len(log), base_offset=4096, delay_levels_ms=DELAYS)
    units, index, end, _ = dispatch(log, 4096, 0, len(log), DELAYS)
    assert run.error is None and run.end == end == len(log)
    assert _native_units(run) == units
    assert run.index_list() == index


@SETTINGS
@given(recs=st.lists(records(), min_size=1, max_size=25), cut=st.data())
def test_dispatch_scan_stops_at_bytes_that_are_no_record(recs, cut):
    log = bytearray(_log(recs, base=0, store_ip=bytes(4), blank=0))
    at = cut.draw(st.integers(0, len(log) - 1))
    log[at] ^= 0xFF
    run = _native.dispatch_scan(bytes(log), 0, len(log), base_offset=0, delay_levels_ms=DELAYS)
    walked = sum(len(u) for u in run.queue_runs())
    assert run.end <= len(log) and walked >= 0
    if run.error is not None:
        assert run.error.startswith(f"commitlog offset {run.end}:")


@SETTINGS
@given(entries=st.lists(st.tuples(st.integers(0, (1 << 31) - 1), st.integers(0, 1 << 40),
                                  st.integers(0, 1 << 42)), max_size=60),
       slots=st.integers(1, 13), max_entries=st.integers(2, 50), chunks=st.integers(1, 4))
def test_index_put_equals_putkey(entries, slots, max_entries, chunks):
    size = 40 + slots * 4 + max_entries * 20
    ref, nat = bytearray(size), bytearray(size)
    struct.pack_into(">i", ref, 36, 1)
    struct.pack_into(">i", nat, 36, 1)
    step = max(1, len(entries) // chunks)
    ref_n = nat_n = 0
    for i in range(0, len(entries), step):
        ref_n += index_put(ref, slots, max_entries, entries[i:i + step])
        nat_n += _native.index_put(nat, slots, max_entries, entries[i:i + step])
    assert nat_n == ref_n and bytes(nat) == bytes(ref)



@SETTINGS
@given(recs=st.lists(records(), max_size=25), slots=st.integers(1, 13), max_entries=st.integers(2, 40),
       data=st.data())
def test_index_put_run_puts_the_runs_entries_as_putkey_does(recs, slots, max_entries, data):
    log = _log(recs, base=0, store_ip=bytes(4), blank=0)
    run = _native.dispatch_scan(log, 0, len(log), base_offset=0, delay_levels_ms=DELAYS)
    entries = run.index_list()
    start = data.draw(st.integers(0, len(entries) + 1))
    size = 40 + slots * 4 + max_entries * 20
    ref, nat = bytearray(size), bytearray(size)
    struct.pack_into(">i", ref, 36, 1)
    struct.pack_into(">i", nat, 36, 1)
    assert _native.index_put_run(nat, slots, max_entries, run, start) == \
        index_put(ref, slots, max_entries, entries[start:])
    assert bytes(nat) == bytes(ref)


@SETTINGS
@given(units=st.binary(max_size=100), size=st.integers(0, 120), pos=st.integers(0, 130))
def test_cq_write_copies_units_in_place_or_refuses_a_range_past_the_end(units, size, pos):
    dest = bytearray(b"\xee" * size)
    if pos + len(units) > size:
        with pytest.raises(ValueError, match="cq_write"):
            _native.cq_write(dest, pos, units)
        assert dest == b"\xee" * size                               # nothing written
        return
    _native.cq_write(dest, pos, units)
    assert dest == b"\xee" * pos + units + b"\xee" * (size - pos - len(units))


@SETTINGS
@given(recs=st.lists(records(), min_size=1, max_size=20), data=st.data(),
       store_ip=st.sampled_from([bytes(4), bytes(16)]))
def test_scan_segment_equals_the_reference_on_damaged_logs(recs, data, store_ip):
    base = 1 << 20
    log = bytearray(_log(recs, base=base, store_ip=store_ip, blank=0))
    log += bytes(data.draw(st.integers(0, 40)))                       # unwritten space after the data
    if data.draw(st.booleans()):
        log += struct.pack(">iI", 0, 0)
    for _ in range(data.draw(st.integers(0, 2))):
        at = data.draw(st.integers(0, len(log) - 1))
        log[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        log = log[:data.draw(st.integers(0, len(log)))]
    buf = bytes(log)
    check_crc = data.draw(st.booleans())
    torn_from = data.draw(st.sampled_from([None, base, base + 200]))
    start = 0
    pos, sizes, end, blank, error = _native.scan_segment(buf, base, start, len(buf), check_crc=check_crc,
                                                         torn_from=torn_from)
    r_pos, r_sizes, r_end, r_blank, r_error = scan(buf, base, start, len(buf), check_crc=check_crc,
                                                   torn_from=torn_from)
    positions = list(struct.unpack(f"={len(pos) // 8}q", pos))
    assert (positions, list(struct.unpack(f"={len(sizes) // 8}q", sizes)), end, blank) == \
        (r_pos, r_sizes, r_end, r_blank)
    assert (error[0] if error else None) == r_error



@SETTINGS
@given(recs=st.lists(records(), min_size=1, max_size=8), data=st.data())
def test_find_record_start_equals_the_reference_after_damage(recs, data):
    prefix = data.draw(st.binary(max_size=30))
    base = data.draw(st.integers(0, 1 << 40))
    records_log = _log(recs, base=base + len(prefix), store_ip=bytes(4), blank=0)
    log, starts, at = bytearray(prefix + records_log), [], len(prefix)
    while at < len(log):
        starts.append(at)
        at += struct.unpack_from(">i", log, at)[0]
    for start in data.draw(st.lists(st.sampled_from(starts), max_size=2)):     # a record's magic or offset hit
        log[start + data.draw(st.sampled_from([4, 7, 28, 35]))] ^= 0x40
    for _ in range(data.draw(st.integers(0, 2))):
        log[data.draw(st.integers(0, len(log) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.one_of(st.none(), st.builds(lambda s, k: s + k, st.sampled_from(starts), st.integers(34, 38))))
    buf = bytes(log[:cut]) + (data.draw(st.binary(max_size=40)) if cut is None else b"")
    lo = data.draw(st.one_of(st.sampled_from([s for s in starts if s <= len(buf)]), st.integers(0, len(buf))))
    hi = data.draw(st.integers(lo, len(buf) + 50))
    assert _native.find_record_start(buf, base, lo, hi) == find_record_start(buf, base, lo, hi)

def test_dispatch_run_survives_pickling():
    import pickle
    recs = [Rec("T", 1, 0, 0, 5, bytes(4), 1, 0, 0, b"x", b"TAGS\x01a\x02KEYS\x01k1 k2\x02")] * 3
    log = _log(recs, base=100, store_ip=bytes(4), blank=0)
    run = _native.dispatch_scan(log, 0, len(log), base_offset=100, delay_levels_ms=DELAYS)
    back = pickle.loads(pickle.dumps(run))
    assert back.queue_runs() == run.queue_runs() and back.index_list() == run.index_list()
    assert (back.end_offset, back.records, back.max_store_timestamp) == (run.end_offset, 3, 1_800_000_000_250)


def test_native_module_reports_a_release_build():
    assert _native.BUILD_PROFILE == "release", "tests and benchmarks expect the release build pip install makes"
