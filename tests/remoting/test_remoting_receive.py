"""Frames read into buffers (rocketq.remoting.receive): the same commands and errors as FrameDecoder
whatever the reads' sizes, a large body handed on as the buffer the socket filled, and a client
connection that reads that way end to end."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from rocketq.remoting import FrameDecoder, RemoteProtocolError, RemotingCommand, ResponseCode, encode
from rocketq.remoting.receive import (
    BIG_BODY_BYTES,
    STAGE_BYTES,
    BodyPool,
    BufferedRemotingClient,
    BufferedRemotingConnection,
    FrameReceiver,
)
from rocketq.remoting.transport import RemotingServer

HOST = "127.0.0.1"
WAIT_S = 10.0
BODY_SIZES = st.sampled_from([0, 1, 100, BIG_BODY_BYTES - 1, BIG_BODY_BYTES, STAGE_BYTES + 7, 300_000])


def command(i: int, body: bytes, remark: str | None = None) -> RemotingCommand:
    return RemotingCommand(code=i % 7, opaque=i, flag=1, remark=remark, ext_fields={"i": str(i), "n": str(len(body))},
                           body=body)


def receive(data: bytes, reads: list[int], **kwargs) -> tuple[list[RemotingCommand], RemoteProtocolError | None]:
    """Commands of *data* read into a FrameReceiver, each read at most the next of *reads* bytes
    (cycled), then end of stream; and the error that ended them, if any."""
    receiver = FrameReceiver(**kwargs)
    out, at, i, error = [], 0, 0, None
    try:
        while at < len(data):
            buf = receiver.get_buffer()
            n = min(len(buf), len(data) - at, reads[i % len(reads)])
            buf[:n] = data[at:at + n]
            del buf
            receiver.buffer_updated(n)
            at, i = at + n, i + 1
            while (cmd := receiver.next_command()) is not None:
                out.append(cmd)
        receiver.receive_data(b"")
        while (cmd := receiver.next_command()) is not None:
            out.append(cmd)
    except RemoteProtocolError as exc:
        error = exc
    return out, error


def decode(data: bytes, **kwargs) -> tuple[list[RemotingCommand], RemoteProtocolError | None]:
    decoder = FrameDecoder(**kwargs)
    decoder.receive_data(data)
    decoder.receive_data(b"")
    out, error = [], None
    try:
        while (cmd := decoder.next_command()) is not None:
            out.append(cmd)
    except RemoteProtocolError as exc:
        error = exc
    return out, error


def same(a: list[RemotingCommand], b: list[RemotingCommand]) -> bool:
    return [(c.code, c.opaque, c.remark, c.ext_fields, bytes(c.body)) for c in a] == \
           [(c.code, c.opaque, c.remark, c.ext_fields, bytes(c.body)) for c in b]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(sizes=st.lists(BODY_SIZES, min_size=1, max_size=5),
       reads=st.lists(st.sampled_from([1, 3, 8, 100, 4096, 65536, 1 << 20]), min_size=1, max_size=4),
       cut=st.integers(0, 40), tail=st.sampled_from([b"", b"\x00\x00\x00\x01", b"\x00\x00\x00\x06\x00\x00\x00\x02{}"]))
def test_receiver_decodes_as_frame_decoder_does(sizes, reads, cut, tail):
    data = b"".join(encode(command(i, bytes([i]) * n)) for i, n in enumerate(sizes)) + tail
    data = data[:len(data) - cut] if cut < len(data) else data
    got, got_error = receive(data, reads)
    want, want_error = decode(data)
    assert same(got, want)
    assert (got_error is None) == (want_error is None)
    if want_error is not None:
        assert str(got_error) == str(want_error)


def test_a_large_body_is_the_buffer_the_reads_filled_and_a_small_one_bytes():
    big, small = b"x" * (BIG_BODY_BYTES * 3), b"small"
    (first, second), error = receive(encode(command(1, big)) + encode(command(2, small)), [65536])
    assert error is None
    assert type(first.body) is bytearray and first.body == big
    assert type(second.body) is bytes and second.body == small


def test_a_large_body_frame_with_a_bad_header_is_an_error_at_its_offset():
    good = encode(command(1, b"ok"))
    header = b'{"code":1'
    bad = struct.pack(">iI", 4 + len(header) + BIG_BODY_BYTES, len(header)) + header + b"\x00" * 100
    got, error = receive(good + bad, [4096])
    assert same(got, [command(1, b"ok")])
    assert error is not None and f"stream offset {len(good)}" in error.where


def test_end_of_stream_inside_a_large_body_is_an_error():
    data = encode(command(1, b"y" * (BIG_BODY_BYTES * 2)))
    got, error = receive(data[:-10], [65536])
    assert got == [] and error is not None and "closed in the middle" in str(error)


def test_a_frame_larger_than_the_stage_below_the_big_body_size_is_read_whole():
    cmd = command(3, b"z" * 10, remark="r" * (STAGE_BYTES * 2))
    (got,), error = receive(encode(cmd), [STAGE_BYTES])
    assert error is None and got.remark == cmd.remark and got.body == b"z" * 10


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_buffered_client_reads_large_answers_into_their_own_buffers(loop):
    async def handler(conn, cmd):
        return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, ext_fields=cmd.ext_fields, body=cmd.body)

    async def main():
        server = await RemotingServer(handler, HOST, 0).start()
        async with server, BufferedRemotingClient(HOST, server.port) as client:
            bodies = [bytes(range(256)) * (BIG_BODY_BYTES // 64), b"tiny", b""]
            answers = await asyncio.gather(*(
                client.invoke(RemotingCommand.create_request(9, {"i": i}, body), timeout_s=WAIT_S)
                for i, body in enumerate(bodies)))
            assert isinstance(client.connection, BufferedRemotingConnection)
            assert [a.body for a in answers] == bodies
            assert [type(a.body) for a in answers] == [bytearray, bytes, bytes]
            assert [a.get_int("i") for a in answers] == [0, 1, 2]

    if loop == "uvloop":            # it calls data_received: a Protocol subclass is never buffered there
        uvloop = pytest.importorskip("uvloop", reason="uvloop is not installed (a declared dependency)")
        uvloop.run(main())
    else:
        asyncio.run(main())


@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(BODY_SIZES, min_size=1, max_size=4), reads=st.lists(st.integers(1, 70_000), min_size=1, max_size=5))
def test_bytes_a_loop_read_itself_decode_as_reads_into_the_buffers(sizes, reads):
    """uvloop's way in (``receive_data`` with bytes) and asyncio's (``get_buffer``) give the same commands."""
    cmds = [command(i, bytes([i % 251]) * n) for i, n in enumerate(sizes)]
    data = b"".join(encode(c) for c in cmds)
    receiver, at, i, got = FrameReceiver(), 0, 0, []
    while at < len(data):
        n = reads[i % len(reads)]
        receiver.receive_data(data[at:at + n])
        at, i = at + n, i + 1
        while (cmd := receiver.next_command()) is not None:
            got.append(cmd)
    receiver.receive_data(b"")
    assert receiver.next_command() is None
    assert [(c.opaque, bytes(c.body)) for c in got] == [(c.opaque, c.body) for c in cmds]


def test_bodies_given_back_are_reused_resized_and_bounded():
    pool = BodyPool(max_bytes=250)
    first, second = pool.take(100), pool.take(100)
    pool.give([first, b"bytes are not kept", second, bytearray(100)])   # the third is past the bound
    again = pool.take(60)
    assert again is second and len(again) == 60
    bigger = pool.take(130)
    assert bigger is first and len(bigger) == 130
    assert pool.take(10) is not first and len(pool.take(10)) == 10


def test_a_receiver_reads_the_next_large_body_into_one_given_back():
    pool = BodyPool()
    receiver = FrameReceiver(bodies=pool)
    data = encode(command(1, b"a" * BIG_BODY_BYTES)) + encode(command(2, b"b" * (BIG_BODY_BYTES + 5)))
    bodies, at = [], 0
    while at < len(data):
        buf = receiver.get_buffer()
        n = min(len(buf), 1000, len(data) - at)
        buf[:n] = data[at:at + n]
        del buf
        receiver.buffer_updated(n)
        at += n
        if (cmd := receiver.next_command()) is not None:
            bodies.append(cmd.body)
            if len(bodies) == 1:
                assert cmd.body == b"a" * BIG_BODY_BYTES
                pool.give([cmd.body])
    assert len(bodies) == 2 and bodies[1] is bodies[0] and bodies[1] == b"b" * (BIG_BODY_BYTES + 5)
