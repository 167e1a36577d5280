"""Replay the fuzzers' corpus (native/fuzz/corpus, grown by ``native/fuzz/run.sh``) through the Python
entry points of the same decoders: every input gives a result or the decoder's own error, never a
crash, a hang or an out-of-bounds read."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from rocketq import _native

CORPUS = Path(__file__).resolve().parents[2] / "native" / "fuzz" / "corpus"


def _inputs(target: str) -> list[Path]:
    files = sorted((CORPUS / target).glob("*")) if (CORPUS / target).is_dir() else []
    if not files:
        pytest.skip(f"no corpus for {target} in {CORPUS}")
    return files


def test_wire_batch_corpus():
    for path in _inputs("wire_batch"):
        data = path.read_bytes()
        try:
            batch = _native.RecordBatch.from_wire(data, "T", 0, sys_flag=0, born_timestamp=1, born_ip=bytes(4),
                                                  born_port=0, reconsume_times=0, max_body_bytes=1 << 22,
                                                  store_v6=False)
        except (_native.BatchFormatError, _native.BatchError):
            continue
        if batch is not None and len(batch):
            out = bytearray(batch.total_bytes)
            batch.append_to(out, 0, {}, physical_offset=0, store_timestamp=1, store_ip=bytes(4), store_port=1)
            positions, sizes, end, _blank, error = _native.scan_segment(bytes(out), 0, 0, len(out), check_crc=True)
            assert end == len(out) and error is None, path.name


def test_segment_scan_corpus():
    for path in _inputs("segment_scan"):
        data = path.read_bytes()
        if not data:
            continue
        flags, seg = data[0], data[1:]
        positions, sizes, end, _blank, _error = _native.scan_segment(
            seg, 0 if flags & 1 else None, 0, len(seg), check_crc=bool(flags & 4), torn_from=0 if flags & 2 else None)
        assert end <= len(seg) and sum(struct.unpack(f"={len(sizes) // 8}q", sizes)) == end, path.name


def test_dispatch_walk_corpus():
    for path in _inputs("dispatch_walk"):
        data = path.read_bytes()
        run = _native.dispatch_scan(data, 0, len(data), base_offset=0, delay_levels_ms=[1000, 5000])
        assert run.end <= len(data), path.name
        for _topic, _qid, _first, units, _end in run.queue_runs():
            assert len(units) % 20 == 0


def test_index_put_corpus():
    for path in _inputs("index_put"):
        data = path.read_bytes()
        if len(data) < 3:
            continue
        slots, max_entries = 1 + data[0] % 17, 2 + data[1] % 40
        size = 40 + slots * 4 + max_entries * 20
        file = bytearray(size)
        head = data[2:]
        file[:min(len(head), size)] = head[:size]
        entries = [(struct.unpack(">i", c[:4])[0], struct.unpack(">q", c[4:12])[0], struct.unpack(">q", c[4:12])[0] >> 3)
                   for c in (head[i:i + 12] for i in range(0, len(head) - 11, 12))]
        done = _native.index_put(file, slots, max_entries, entries)
        assert 0 <= done <= len(entries) and len(file) == size, path.name


def test_frames_corpus():
    from rocketq.remoting import FrameDecoder, RemotingProtocolError
    for path in _inputs("frames"):
        decoder = FrameDecoder(max_frame_bytes=1 << 16)
        decoder.receive_data(path.read_bytes())
        try:
            for _ in range(len(path.read_bytes()) // 8 + 1):
                if decoder.next_command() is None:
                    break
        except RemotingProtocolError:
            pass


def test_pull_body_corpus():
    for path in _inputs("pull_body"):
        data = path.read_bytes()
        try:
            views = _native.pulled_messages(data)
        except ValueError:
            continue
        at = 0
        for v in views:                       # the records tile the body, each part inside its record
            assert v.raw == data[at:at + v.total_size] and len(v.body) < v.total_size, path.name
            at += v.total_size
        assert at == len(data), path.name
