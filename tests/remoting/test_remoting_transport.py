"""Transport: a real RemotingServer on 127.0.0.1, driven by RemotingClient and by raw sockets.

Every test runs on asyncio's own loop and on uvloop (the transport must not care which).  Tests
wait on events and futures with timeouts, never on sleeps.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import time

import pytest

from rocketq.remoting import (
    FrameDecoder, RemotingClient, RemotingCommand, RemotingCommandError, RemotingConnectError,
    RemotingConnectionClosedError, RemotingServer, RemotingTimeoutError, RemotingTooManyRequestsError, RequestCode,
    ResponseCode, SerializeType, encode, not_supported_response,
)

try:
    import uvloop
except ImportError:  # pragma: no cover - uvloop is a declared dependency on Linux
    uvloop = None

WAIT_S = 5.0
HOST = "127.0.0.1"
ECHO, BLOCK, FAIL, BAD_FIELD = 1000, 1001, 1002, 1003


@pytest.fixture(params=["asyncio", "uvloop"] if uvloop is not None else ["asyncio"])
def run(request):
    factory = uvloop.new_event_loop if request.param == "uvloop" else None

    def runner(coro):
        with asyncio.Runner(loop_factory=factory) as r:
            return r.run(asyncio.wait_for(coro, 30))
    return runner


class Handler:
    """A scripted server-side handler that records what it saw."""

    def __init__(self):
        self.seen: list[RemotingCommand] = []
        self.release = asyncio.Event()
        self.blocked = 0
        self.blocked_changed = asyncio.Event()
        self.conns = []
        self.in_task: list[bool] = []             # per request: did its handler start inside a task?

    async def __call__(self, conn, cmd):
        self.seen.append(cmd)
        self.in_task.append(asyncio.current_task() is not None)
        if conn not in self.conns:
            self.conns.append(conn)
        if cmd.code == ECHO:
            return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, ext_fields=cmd.ext_fields, body=cmd.body)
        if cmd.code == BLOCK:
            self.blocked += 1
            self.blocked_changed.set()
            await self.release.wait()
            return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, remark="released")
        if cmd.code == FAIL:
            raise ValueError("handler exploded")
        if cmd.code == BAD_FIELD:
            cmd.get_int("queueId")
        return not_supported_response(cmd)

    async def until_blocked(self, n):
        while self.blocked < n:
            self.blocked_changed.clear()
            await asyncio.wait_for(self.blocked_changed.wait(), WAIT_S)


async def start_server(handler, **kwargs) -> RemotingServer:
    return await RemotingServer(handler, HOST, 0, **kwargs).start()


async def raw_connect(server):
    return await asyncio.open_connection(HOST, server.port)


async def read_command(reader) -> RemotingCommand:
    decoder = FrameDecoder()
    decoder.receive_data(await reader.readexactly(4))
    length = int.from_bytes(decoder._buf[:4], "big")
    decoder.receive_data(await reader.readexactly(length))
    return decoder.next_command()


def echo(i=0, body=b""):
    return RemotingCommand.create_request(ECHO, {"i": i}, body)


# -- request / response -----------------------------------------------------------------------

def test_invoke_and_response(run):
    async def main():
        handler = Handler()
        async with await start_server(handler) as server, RemotingClient(HOST, server.port) as client:
            response = await client.invoke(echo(7, b"payload"), timeout_s=WAIT_S)
            assert response.code == ResponseCode.SUCCESS and response.is_response
            assert response.get_int("i") == 7 and response.body == b"payload"
            assert response.opaque == handler.seen[0].opaque
            assert handler.conns[0].peer.startswith("127.0.0.1:")
            unknown = await client.invoke(RemotingCommand.create_request(4242), timeout_s=WAIT_S)
            assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    run(main())


def test_many_concurrent_invokes_matched_by_opaque_when_answered_in_reverse(run):
    n = 200

    async def handler(conn, cmd):
        arrived.append(cmd)
        if len(arrived) == n:
            all_arrived.set()
        # Hold every request until all have arrived, then answer them last-arrived first: the
        # client must match each answer to its request by opaque, not by order.
        await all_arrived.wait()
        await turns[n - 1 - arrived.index(cmd)].wait()
        response = RemotingCommand.create_response(cmd, 0, ext_fields={"i": cmd.get_str("i")})
        index = arrived.index(cmd)
        if index > 0:
            turns[n - index].set()
        return response

    async def main():
        nonlocal arrived, all_arrived, turns
        arrived, all_arrived, turns = [], asyncio.Event(), [asyncio.Event() for _ in range(n)]
        turns[0].set()
        async with await start_server(handler) as server, RemotingClient(HOST, server.port) as client:
            responses = await asyncio.gather(*(client.invoke(echo(i), timeout_s=WAIT_S) for i in range(n)))
            assert [r.get_int("i") for r in responses] == list(range(n))
            assert len({r.opaque for r in responses}) == n
    arrived = all_arrived = turns = None
    run(main())


def test_oneway_request_is_never_answered(run):
    async def handler(conn, cmd):
        if cmd.is_oneway:
            oneway_task.set_result(asyncio.current_task())
            return RemotingCommand.create_response(cmd, 0, remark="must not be sent")
        await (await oneway_task)                 # the oneway handler (and any write it caused) is over
        return RemotingCommand.create_response(cmd, 0, remark="normal")

    async def main():
        nonlocal oneway_task
        oneway_task = asyncio.get_running_loop().create_future()
        async with await start_server(handler) as server:
            reader, writer = await raw_connect(server)
            writer.write(encode(RemotingCommand(code=ECHO, opaque=5, flag=2)))
            writer.write(encode(RemotingCommand(code=ECHO, opaque=6)))
            first = await asyncio.wait_for(read_command(reader), WAIT_S)
            assert (first.opaque, first.remark) == (6, "normal")
            writer.close()
    oneway_task = None
    run(main())


def test_client_oneway(run):
    async def main():
        got = asyncio.get_running_loop().create_future()

        async def handler(conn, cmd):
            got.set_result(cmd)
            return RemotingCommand.create_response(cmd, 0)
        async with await start_server(handler) as server, RemotingClient(HOST, server.port) as client:
            await client.invoke_oneway(RemotingCommand.create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {"q": 1}))
            cmd = await asyncio.wait_for(got, WAIT_S)
            assert cmd.is_oneway and cmd.get_int("q") == 1
            assert client.connection.pending == 0
    run(main())


def test_server_to_client_request_round_trip(run):
    async def client_handler(conn, cmd):
        if cmd.is_oneway:
            notified.set_result(cmd)
            return None
        return RemotingCommand.create_response(cmd, ResponseCode.TRANSACTION_SHOULD_COMMIT,
                                               ext_fields={"tx": cmd.get_str("transactionId")})

    async def main():
        nonlocal notified
        notified = asyncio.get_running_loop().create_future()
        handler = Handler()
        async with await start_server(handler) as server, \
                RemotingClient(HOST, server.port, handler=client_handler) as client:
            await client.invoke(echo(), timeout_s=WAIT_S)
            conn = handler.conns[0]
            check = RemotingCommand.create_request(RequestCode.CHECK_TRANSACTION_STATE, {"transactionId": "tx-1"})
            answer = await conn.send_request(check, timeout_s=WAIT_S)
            assert answer.code == ResponseCode.TRANSACTION_SHOULD_COMMIT and answer.get_str("tx") == "tx-1"
            await conn.send_oneway(RemotingCommand.create_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
                                                                  {"consumerGroup": "g"}))
            assert (await asyncio.wait_for(notified, WAIT_S)).get_str("consumerGroup") == "g"
    notified = None
    run(main())


def test_client_without_handler_answers_not_supported(run):
    async def main():
        handler = Handler()
        async with await start_server(handler) as server, RemotingClient(HOST, server.port) as client:
            await client.invoke(echo(), timeout_s=WAIT_S)
            answer = await handler.conns[0].send_request(RemotingCommand.create_request(307), timeout_s=WAIT_S)
            assert answer.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    run(main())


# -- failures ---------------------------------------------------------------------------------

def test_request_timeout_then_late_answer_is_dropped(run):
    async def main():
        handler = Handler()
        async with await start_server(handler) as server, RemotingClient(HOST, server.port) as client:
            with pytest.raises(RemotingTimeoutError):
                await client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=0.2)
            assert client.connection.pending == 0
            handler.release.set()                 # the late answer arrives and matches nothing
            assert (await client.invoke(echo(3), timeout_s=WAIT_S)).get_int("i") == 3
    run(main())


def test_each_request_times_out_at_its_own_deadline(run):
    """One expiry timer per connection, armed at the earliest deadline: a short request in flight beside
    a long one times out on time, the timer re-arms for the next deadline, and the long one is answered."""
    async def main():
        handler = Handler()
        async with await start_server(handler) as server, RemotingClient(HOST, server.port) as client:
            long = asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=WAIT_S * 4))
            await handler.until_blocked(1)
            loop = asyncio.get_running_loop()
            began = loop.time()
            short = asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=0.2))
            medium = asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=0.6))
            with pytest.raises(RemotingTimeoutError, match="within 0.2s"):
                await short
            with pytest.raises(RemotingTimeoutError, match="within 0.6s"):
                await medium                      # due after the first expiry: the timer was re-armed for it
            assert loop.time() - began < WAIT_S   # not at the long request's deadline
            assert not long.done() and client.connection.pending == 1
            handler.release.set()
            assert (await long).remark == "released"
            assert client.connection.pending == 0
    run(main())


def test_requests_in_a_row_share_one_expiry_timer():
    """Awaited requests one after another do not each make and cancel a loop timer (a sixth of a
    single send's client CPU): the connection's one expiry timer covers them."""
    async def main():
        handler = Handler()
        async with await start_server(handler) as server, RemotingClient(HOST, server.port) as client:
            await client.invoke(echo(), timeout_s=WAIT_S)
            loop = asyncio.get_running_loop()
            timers = []
            real_call_at = loop.call_at
            loop.call_at = lambda when, cb, *args, **kw: timers.append(cb) or real_call_at(when, cb, *args, **kw)
            for i in range(50):
                assert (await client.invoke(echo(i), timeout_s=WAIT_S)).get_int("i") == i
            loop.call_at = real_call_at
            assert len(timers) <= 2, f"{len(timers)} loop timers for 50 requests"
    with asyncio.Runner() as r:
        r.run(asyncio.wait_for(main(), 30))


def test_handler_errors_become_system_error_answers(run):
    async def main():
        async with await start_server(Handler()) as server, RemotingClient(HOST, server.port) as client:
            failed = await client.invoke(RemotingCommand.create_request(FAIL), timeout_s=WAIT_S)
            assert failed.code == ResponseCode.SYSTEM_ERROR and "handler exploded" in failed.remark
            bad = await client.invoke(RemotingCommand.create_request(BAD_FIELD, {"queueId": "x"}), timeout_s=WAIT_S)
            assert bad.code == ResponseCode.SYSTEM_ERROR and "queueId" in bad.remark
            assert (await client.invoke(echo(1), timeout_s=WAIT_S)).code == ResponseCode.SUCCESS
    run(main())


def test_oversize_frame_closes_only_that_connection(run, caplog):
    async def main():
        async with await start_server(Handler(), max_frame_bytes=1024) as server, \
                RemotingClient(HOST, server.port) as client:
            assert (await client.invoke(echo(1), timeout_s=WAIT_S)).code == 0
            reader, writer = await raw_connect(server)
            writer.write(struct.pack(">iI", 4096, 10))
            assert await asyncio.wait_for(reader.read(), WAIT_S) == b""    # closed by the server
            writer.close()
            assert (await client.invoke(echo(2, b"x" * 500), timeout_s=WAIT_S)).get_int("i") == 2
            assert len(server.connections) == 1
    with caplog.at_level(logging.WARNING, logger="rocketq.remoting"):
        run(main())
    assert any("malformed frame" in r.getMessage() and "exceeds the limit" in r.getMessage()
               and "127.0.0.1:" in r.getMessage() for r in caplog.records)


def test_garbage_closes_the_connection(run):
    async def main():
        async with await start_server(Handler()) as server:
            reader, writer = await raw_connect(server)
            writer.write(b"GET / HTTP/1.1\r\n\r\n")
            assert await asyncio.wait_for(reader.read(), WAIT_S) == b""
            writer.close()
    run(main())


def test_back_pressure_answers_system_busy(run):
    async def main():
        handler = Handler()
        async with await start_server(handler, max_inflight_per_connection=2) as server, \
                RemotingClient(HOST, server.port) as client:
            blocked = [asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=WAIT_S))
                       for _ in range(2)]
            await handler.until_blocked(2)
            busy = await client.invoke(echo(), timeout_s=WAIT_S)
            assert busy.code == ResponseCode.SYSTEM_BUSY
            handler.release.set()
            assert [r.remark for r in await asyncio.gather(*blocked)] == ["released", "released"]
            assert (await client.invoke(echo(), timeout_s=WAIT_S)).code == ResponseCode.SUCCESS
    run(main())


def test_writes_wait_for_drain_when_the_peer_does_not_read(run):
    frames, body = 32, b"x" * (1 << 20)

    async def main():
        handler = Handler()
        async with await start_server(handler) as server:
            reader, writer = await raw_connect(server)
            writer.write(encode(RemotingCommand(code=ECHO, opaque=1)))
            await asyncio.wait_for(read_command(reader), WAIT_S)
            conn = handler.conns[0]
            transport = conn._transport
            high_water = transport.get_write_buffer_limits()[1]
            largest = 0

            async def flood():
                nonlocal largest
                for _ in range(frames):
                    await conn.send_oneway(RemotingCommand.create_request(RequestCode.CHECK_TRANSACTION_STATE,
                                                                          body=body))
                    largest = max(largest, transport.get_write_buffer_size())
            sender = asyncio.ensure_future(flood())
            done, _ = await asyncio.wait([sender], timeout=0.5)
            assert not done                       # blocked on drain: 32 MiB do not fit the socket buffers
            received = [await asyncio.wait_for(read_command(reader), WAIT_S) for _ in range(frames)]
            await asyncio.wait_for(sender, WAIT_S)
            assert all(cmd.body == body and cmd.is_oneway for cmd in received)
            assert largest <= high_water + len(body) + 1024
            writer.close()
    run(main())


def test_a_request_stuck_behind_a_full_socket_times_out_and_a_cancelled_one_leaves_nothing(run):
    body = b"x" * (1 << 20)

    async def main():
        handler = Handler()
        async with await start_server(handler) as server:
            reader, writer = await raw_connect(server)          # a peer that stops reading
            writer.write(encode(RemotingCommand(code=ECHO, opaque=1)))
            await asyncio.wait_for(read_command(reader), WAIT_S)
            conn = handler.conns[0]

            async def flood_frames():
                for _ in range(64):
                    await conn.send_oneway(RemotingCommand.create_request(RequestCode.CHECK_TRANSACTION_STATE,
                                                                          body=body))
            flood = asyncio.ensure_future(flood_frames())
            deadline = time.monotonic() + WAIT_S
            while not conn._write_paused and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert conn._write_paused
            started = time.monotonic()
            with pytest.raises(RemotingTimeoutError):               # waits for drain, bounded by its timeout
                await conn.send_request(RemotingCommand.create_request(RequestCode.CHECK_TRANSACTION_STATE),
                                        timeout_s=0.3)
            assert 0.25 <= time.monotonic() - started < WAIT_S and conn.pending == 0
            flood.cancel()
            writer.close()

        async with await start_server(handler) as server, RemotingClient(HOST, server.port) as client:
            task = asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=WAIT_S))
            await handler.until_blocked(1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert client.connection.pending == 0
            handler.release.set()
            assert (await client.invoke(echo(5), timeout_s=WAIT_S)).get_int("i") == 5
    run(main())


def test_client_pending_table_is_bounded(run):
    async def main():
        handler = Handler()
        async with await start_server(handler) as server, \
                RemotingClient(HOST, server.port, max_pending_requests=2) as client:
            blocked = [asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=WAIT_S))
                       for _ in range(2)]
            await handler.until_blocked(2)
            with pytest.raises(RemotingTooManyRequestsError):
                await client.invoke(echo(), timeout_s=WAIT_S)
            handler.release.set()
            await asyncio.gather(*blocked)
    run(main())


def test_connection_loss_fails_pending_and_client_reconnects(run):
    async def main():
        handler = Handler()
        closed = asyncio.Event()
        async with await start_server(handler) as server, RemotingClient(HOST, server.port) as client:
            pending = asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=WAIT_S))
            await handler.until_blocked(1)
            server_conn = handler.conns[0]
            server_conn.on_close(lambda conn: closed.set())
            first = client.connection
            server_conn.close()
            with pytest.raises(RemotingConnectionClosedError):
                await pending
            await asyncio.wait_for(closed.wait(), WAIT_S)
            await asyncio.wait_for(first.wait_closed(), WAIT_S)
            assert (await client.invoke(echo(9), timeout_s=WAIT_S)).get_int("i") == 9
            assert client.connection is not first
            assert handler.seen[-1].opaque > handler.seen[0].opaque   # one opaque counter per client
            handler.release.set()
    run(main())


def test_connect_error(run):
    sock = socket.socket()
    sock.bind((HOST, 0))
    port = sock.getsockname()[1]
    sock.close()

    async def main():
        async with RemotingClient(HOST, port) as client:
            with pytest.raises(RemotingConnectError):
                await client.invoke(echo(), timeout_s=WAIT_S)
    run(main())


# -- third-party clients ----------------------------------------------------------------------

def test_json_only_client_gets_json_answers_with_string_ext_fields(run):
    captured = b'{"code":1000,"language":"JAVA","opaque":1,"flag":0,"version":121,"extFields":{"d":4,"k":false}}'

    async def main():
        async with await start_server(Handler()) as server:
            reader, writer = await raw_connect(server)
            writer.write(struct.pack(">ii", 4 + len(captured), len(captured)) + captured)
            length, header_len = struct.unpack(">ii", await asyncio.wait_for(reader.readexactly(8), WAIT_S))
            header = json.loads(await reader.readexactly(header_len))   # whole field read as the length
            assert header["opaque"] == 1 and header["flag"] == 1 and header["code"] == 0
            assert header["extFields"] == {"d": "4", "k": "false"}
            assert length == 4 + header_len
            writer.close()
    run(main())


def test_binary_request_gets_binary_answer(run):
    async def main():
        async with await start_server(Handler()) as server:
            reader, writer = await raw_connect(server)
            writer.write(encode(RemotingCommand(code=ECHO, opaque=77, ext_fields={"i": "5"},
                                                serialize_type=SerializeType.ROCKETMQ)))
            answer = await asyncio.wait_for(read_command(reader), WAIT_S)
            assert answer.serialize_type is SerializeType.ROCKETMQ and answer.opaque == 77
            assert answer.get_int("i") == 5
            writer.close()
    run(main())


def test_server_close_cancels_stuck_handlers(run):
    async def main():
        handler = Handler()
        server = await start_server(handler)
        client = RemotingClient(HOST, server.port)
        pending = asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=WAIT_S))
        await handler.until_blocked(1)
        await server.close()
        with pytest.raises(RemotingConnectionClosedError):
            await pending
        await client.close()
    run(main())


EAGER = frozenset({ECHO, BLOCK, FAIL, BAD_FIELD})


def test_eager_codes_are_handled_inside_data_received_and_waits_go_on_in_a_task(run):
    """A request of an eager code starts its handler without a task; one that waits (BLOCK) is carried on
    by a task from where it stopped, gets what it waited for, and counts against the in-flight limit."""
    async def main():
        handler = Handler()
        async with await start_server(handler, eager_codes=EAGER, max_inflight_per_connection=2) as server, \
                RemotingClient(HOST, server.port) as client:
            response = await client.invoke(echo(7, b"payload"), timeout_s=WAIT_S)
            assert response.get_int("i") == 7 and response.body == b"payload"
            assert handler.in_task == [False]
            blocked = [asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=WAIT_S))
                       for _ in range(2)]
            await handler.until_blocked(2)
            assert (await client.invoke(echo(), timeout_s=WAIT_S)).code == ResponseCode.SYSTEM_BUSY
            handler.release.set()
            assert [r.remark for r in await asyncio.gather(*blocked)] == ["released", "released"]
            failed = await client.invoke(RemotingCommand.create_request(FAIL), timeout_s=WAIT_S)
            assert failed.code == ResponseCode.SYSTEM_ERROR and "handler exploded" in failed.remark
            assert (await client.invoke(echo(1), timeout_s=WAIT_S)).code == ResponseCode.SUCCESS
            assert not any(handler.in_task)
    run(main())


def test_server_close_cancels_an_eager_handler_that_waits(run):
    async def main():
        handler = Handler()
        server = await start_server(handler, eager_codes=EAGER)
        client = RemotingClient(HOST, server.port)
        pending = asyncio.ensure_future(client.invoke(RemotingCommand.create_request(BLOCK), timeout_s=WAIT_S))
        await handler.until_blocked(1)
        conn = next(iter(server.connections))
        stuck = conn.cancel_handlers()
        assert len(stuck) == 1                    # the eager handler went on in a task, which can be cancelled
        await asyncio.gather(*stuck, return_exceptions=True)
        assert stuck[0].cancelled() and conn.inflight == 0
        await server.close()
        with pytest.raises(RemotingConnectionClosedError):
            await pending
        await client.close()
    run(main())


def test_bad_field_error_type_is_public():
    assert issubclass(RemotingCommandError, Exception)
