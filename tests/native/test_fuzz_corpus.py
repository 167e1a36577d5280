"""Replay the fuzzers' corpus (native/fuzz/corpus, grown by ``native/fuzz/run.sh``) through the Python
entry points of the same decoders (grpc_frames: through a real native gRPC server, over a socket):
every input gives a result or the decoder's own error, never a crash, a hang or an out-of-bounds read."""

from __future__ import annotations

import struct
import sys
import time
from pathlib import Path

import pytest

from rocketq import _native

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "grpc_endpoint"))
from h2_raw import (
    DATA,
    END_HEADERS,
    END_STREAM,
    HEADERS,
    RST_STREAM,
    RawH2,
    frame,
    request_headers,
)

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


def test_json_header_corpus():
    """Each input as a frame's JSON header: the native decoder (its one-pass scanner or serde's path)
    gives the reference decoder's command, or the same error."""
    import reference_codec as ref
    from test_codec import _decode, _frame

    from rocketq.remoting import FrameDecoder
    for path in _inputs("json_header"):
        raw = path.read_bytes()
        assert _decode(FrameDecoder, _frame(raw)) == _decode(ref.FrameDecoder, _frame(raw)), path.name


GRPC_FUZZ_LIMIT = 1 << 12          # the grpc_frames target's message limit (native/fuzz/fuzz_targets/grpc_frames.rs)
GRPC_WINDOW_SAFE_BYTES = 60_000    # request bytes in flight per batch: under HTTP/2's initial 64 KiB window


def _grpc_messages(data: bytes, limit: int) -> tuple[list[bytes], bool]:
    """The gRPC messages of *data* parsed in one piece, and whether it ended cleanly (the target's reference)."""
    out, pos = [], 0
    while len(data) - pos >= 5:
        flag, n = data[pos], int.from_bytes(data[pos + 1:pos + 5], "big")
        if flag != 0 or n > limit or len(data) - pos - 5 < n:
            return out, False
        out.append(data[pos + 5:pos + 5 + n])
        pos += 5 + n
    return out, pos == len(data)


@pytest.mark.parametrize("streaming", [False, True], ids=["unary", "client-stream"])
def test_grpc_frames_corpus(streaming):
    """Each input (first byte: the DATA chunk size - 1, the rest: the request stream) goes to a real native
    gRPC server as one call on one connection. Unary: the call reaches Python exactly when the input is one
    whole message, with that message. Client stream: Python gets exactly the messages a parse of the whole
    input gives, then the half-close when it ended cleanly. Every stream ends with a status, and the
    connection stays up."""
    inputs = [p.read_bytes() for p in _inputs("grpc_frames")]
    n = len(inputs) + 1
    paths = [f"/fuzz/{i}" for i in range(len(inputs))]
    srv = _native.GrpcServer("127.0.0.1", 0, paths if streaming else [], max_connections=2, max_streams=n,
                             max_calls=n, max_message_bytes=GRPC_FUZZ_LIMIT, idle_timeout_s=0.0, keepalive_s=60.0,
                             max_queued_bytes=1 << 24, max_partial_bytes=1 << 24)
    raw = RawH2(srv.port)
    want, seen = {}, _Seen()
    try:
        batch: list[int] = []
        batch_bytes = 0
        for i, data in enumerate([*inputs, None]):
            if data is None or (batch and batch_bytes + len(data) > GRPC_WINDOW_SAFE_BYTES):
                _serve_until_ended(srv, raw, batch, seen)
                batch, batch_bytes = [], 0
            if not data:
                continue
            stream, chunk, body = 2 * i + 1, data[0] + 1, data[1:]
            parts = [body[j:j + chunk] for j in range(0, len(body), chunk)] or [b""]
            raw.send(frame(HEADERS, END_HEADERS, stream, request_headers(paths[i])) + b"".join(
                frame(DATA, END_STREAM if k == len(parts) - 1 else 0, stream, p) for k, p in enumerate(parts)))
            messages, clean = _grpc_messages(body, GRPC_FUZZ_LIMIT)
            if streaming:
                want[i] = (messages, clean)
            elif clean and len(messages) == 1:
                want[i] = ([messages[0]], True)
            batch.append(i)
            batch_bytes += len(data)
        assert seen.calls == want
        assert not raw.closed.is_set(), "the server closed the connection"
    finally:
        raw.close()
        srv.close(0.5)


class _Seen:
    """What Python was handed, per input index: (messages, whether the request ended cleanly)."""

    def __init__(self):
        self.calls: dict[int, tuple[list[bytes], bool]] = {}
        self._index: dict[int, int] = {}                 # call id -> input index

    def handle(self, srv, ev) -> None:
        kind, call_id = ev[0], ev[1]
        if kind == 0:                                     # (0, id, path, md, peer, timeout, body or None)
            i = int(ev[2].rsplit("/", 1)[1])
            self._index[call_id] = i
            self.calls[i] = ([ev[6]], True) if ev[6] is not None else ([], False)
            if ev[6] is not None:                         # unary: answered at once
                srv.respond([(call_id, None, 0, "", False)])
        elif kind == 1:                                   # a client-stream message
            self.calls[self._index[call_id]][0].append(ev[2])
        elif kind == 2:                                   # its half-close: a clean end
            i = self._index[call_id]
            self.calls[i] = (self.calls[i][0], True)
            srv.respond([(call_id, None, 0, "", False)])


def _serve_until_ended(srv, raw, batch, seen, timeout_s=30.0):
    """Hands the events to *seen* until the server has ended every stream of *batch* (input indices)."""
    pending = {2 * i + 1 for i in batch}
    deadline = time.monotonic() + timeout_s
    while pending:
        for ev in srv.drain():
            seen.handle(srv, ev)
        pending -= {s for k, f, s in list(raw.frames) if k == RST_STREAM or (k == HEADERS and f & END_STREAM)}
        assert not raw.closed.is_set(), f"the server closed the connection with streams {sorted(pending)[:5]} open"
        assert time.monotonic() < deadline, f"streams {sorted(pending)[:5]} never ended"
        time.sleep(0.005)
    for ev in srv.drain():                                # events queued with the last streams' ends
        seen.handle(srv, ev)


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


def test_columns_walk_corpus():
    """Each input (flags, rows a chunk, bytes) decoded as the target does, through the Spark sources'
    entry points: as a segment chunk after chunk (`walk_columns`: with or without log offsets, CRCs, a
    topic filter), and as one pull body and as two (`decode_bodies`). Every batch holds Arrow's layout
    (string values as binary: the decoder does not check UTF-8), the walk moves forward inside the
    bytes, and two bodies that decode cleanly give the rows of the one they were cut from."""
    pa = pytest.importorskip("pyarrow")
    from rocketq.spark.decode import DecodeError, decode_bodies, walked_batch

    def holds_layout(batch) -> None:
        batch.validate()
        for col in batch.columns:
            if pa.types.is_string(col.type):
                col = col.view(pa.binary())
            elif pa.types.is_map(col.type):
                col = pa.MapArray.from_arrays(col.offsets, col.keys.view(pa.binary()), col.items.view(pa.binary()))
            col.validate(full=True)

    def bodies_rows(bodies: list[bytes], max_rows: int) -> int | None:
        try:
            batches = decode_bodies(bodies, broker="b", max_rows=max_rows)
        except DecodeError:
            return None
        for batch in batches:
            holds_layout(batch)
        return sum(b.num_rows for b in batches)

    for path in _inputs("columns_walk"):
        data = path.read_bytes()
        if len(data) < 2:
            continue
        flags, max_rows, seg = data[0], 1 + data[1] % 8, data[2:]
        pos = 0
        while True:
            cols = _native.walk_columns(seg, 0 if flags & 1 else None, pos, len(seg), len(seg), max_rows,
                                        check_crc=bool(flags & 4), topics=["T"] if flags & 2 else None)
            assert cols["rows"] <= max_rows and pos <= cols["end"] <= len(seg), path.name
            if cols["rows"]:
                holds_layout(walked_batch(cols, "b"))
            if not cols["more"]:
                break
            assert cols["end"] > pos, path.name
            pos = cols["end"]
        cut = len(seg) * (flags >> 4) // 16
        one, two = bodies_rows([seg], max_rows), bodies_rows([seg[:cut], seg[cut:]], max_rows)
        assert one is None or two is None or one == two, path.name


def test_send_properties_corpus():
    """Each input (as text, the way a header's properties arrive) staged by the send fast path: refused
    (None: the general path takes it) or stored as sent, terminated, with CLUSTER appended - and then the
    reference's split finds the same pairs, none asking for policy, and the UNIQ_KEY answered is theirs."""
    from rocketq.common.msgid import HostAddress
    from rocketq.common.properties import decode_properties
    from rocketq.store.record import StoredMessage
    host = HostAddress.parse("10.1.2.3:40000")
    for path in _inputs("send_properties"):
        try:
            text = path.read_bytes().decode()
        except UnicodeDecodeError:
            continue
        try:
            staged = _native.stage_send("T", 0, 0, 0, 1, host.ip, host.port, 0, b"b", text, "C",
                                        max_body_bytes=1024, store_v6=False)
        except _native.BatchError:          # a properties string the store refuses (too long): the general path's error
            continue
        if staged is None:
            continue
        batch, uniq_key, sharding = staged
        out = bytearray(batch.total_bytes)
        batch.append_to(out, 0, {}, physical_offset=0, store_timestamp=1, store_ip=host.ip, store_port=1)
        terminated = text if not text or text.endswith("\x02") else text + "\x02"
        assert StoredMessage(bytes(out)).properties_string == terminated + "CLUSTER\x01C\x02", path.name
        pairs = decode_properties(text)
        assert text.count("\x01") == len(pairs) and not {"DELAY", "TRAN_MSG", "CLUSTER"} & set(pairs), path.name
        assert not any(name.startswith("TIMER_") for name in pairs), path.name
        assert (uniq_key, sharding) == (pairs.get("UNIQ_KEY"), "__SHARDINGKEY" in pairs), path.name
