"""Hostile clients against a real ``rocketq serve`` (issue 22, items 7 and 8).

* clients that send many big-answer requests and never read: the broker's heap stays bounded,
  other clients are served, and the stuck connections are closed after the stall timeout;
* a slow reader still gets every answer (back-pressure, not loss);
* a connection flood past the limit: the limit is held on each port, refusals are logged once,
  config writes still succeed, and a normal client is served as soon as there is room;
* idle connections are closed, but not one with a suspended long-poll pull;
* the gRPC port: connection limit, idle timeout, streams per connection, and a stream whose
  client stops taking messages is ended.

Each test uses small limits (``--set``) so it runs in seconds; waits are on conditions.
"""

from __future__ import annotations

import asyncio
import select
import socket
import struct
import time

import pytest
from hostile_helpers import ServeProcess, is_open, raw_socket, view_requests, wait_until

from rocketq.grpc_endpoint.limits import GRPC_MAX_CONCURRENT_STREAMS
from rocketq.remoting import FrameDecoder, RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketq.remoting.codec import encode

MIB = 1 << 20


def _send_v2(topic: str, body: bytes, queue_id: int = 0) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {
        "a": "P", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0, "g": 0, "h": 0, "i": "", "j": 0,
        "k": False}, body)


def _invoke(port: int, cmd: RemotingCommand, timeout_s: float = 10.0) -> RemotingCommand:
    async def go():
        async with RemotingClient("127.0.0.1", port) as client:
            return await client.invoke(cmd, timeout_s=timeout_s)
    return asyncio.run(go())


STALL_S = 0.5


@pytest.fixture
def stuck_server(tmp_path):
    server = ServeProcess(tmp_path, {"writeBufferHighWaterMark": 64 << 10, "writeBufferLowWaterMark": 16 << 10,
                                     "serverWriteStallTimeoutSeconds": STALL_S})
    yield server
    server.stop()


def test_clients_that_never_read_cannot_grow_the_broker_and_are_closed_when_stuck(stuck_server):
    server = stuck_server
    sent = _invoke(server.broker_port, _send_v2("Big", b"b" * MIB))
    assert sent.code == ResponseCode.SUCCESS, sent.remark          # the first record: CommitLog offset 0
    base = server.rss_anon_bytes()
    clients, per_client = 4, 200                                    # 800 MiB of answers if nothing held back
    hostile = [raw_socket(server.broker_port) for _ in range(clients)]
    for sock in hostile:
        sock.sendall(view_requests(0, per_client))
    # each connection may hold about the high-water mark plus one answer; far below 800 MiB
    bound = 64 * MIB
    peak = 0

    def all_closed() -> bool:
        nonlocal peak
        peak = max(peak, server.rss_anon_bytes() - base)
        assert peak < bound, f"broker heap grew by {peak / MIB:.0f} MiB under {clients} non-reading clients"
        return not any(is_open(s) for s in hostile)

    normal = _invoke(server.broker_port, RemotingCommand.create_request(RequestCode.VIEW_MESSAGE_BY_ID,
                                                                        {"offset": "0"}), timeout_s=5)
    assert normal.code == ResponseCode.SUCCESS and len(normal.body) > MIB      # others are served meanwhile
    wait_until(all_closed, 30, f"the stuck connections to be closed (serverWriteStallTimeoutSeconds={STALL_S})")
    assert server.log().count("read nothing for") == 1          # one line per 10 s, not one per connection
    for sock in hostile:
        sock.close()


def test_suspended_pulls_woken_together_cannot_each_hold_an_answer(tmp_path):
    server = ServeProcess(tmp_path, {"serverWriteStallTimeoutSeconds": 3})    # time for all 300 to wake
    try:
        _woken_pulls(server)
    finally:
        server.stop()


def _woken_pulls(server: ServeProcess) -> None:
    assert _invoke(server.broker_port, _send_v2("Wake", b"first")).code == ResponseCode.SUCCESS
    pulls = 300                                   # each would answer 1 MiB when the big message arrives
    sock = raw_socket(server.broker_port)
    frames = []
    for opaque in range(1, pulls + 1):
        pull = RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "G", "topic": "Wake", "queueId": 0, "queueOffset": 1, "maxMsgNums": 32,
            "sysFlag": 0x2, "commitOffset": 0, "suspendTimeoutMillis": 20_000, "subscription": "*", "subVersion": 0})
        pull.opaque = opaque
        frames.append(encode(pull))
    marker = RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET, {"topic": "Wake", "queueId": 0})
    marker.opaque = pulls + 1
    sock.sendall(b"".join(frames) + encode(marker))
    decoder = FrameDecoder()
    while (first := decoder.next_command()) is None:         # answered after every pull was suspended
        decoder.receive_data(sock.recv(4096))
    assert first.opaque == pulls + 1
    base = server.rss_anon_bytes()
    assert _invoke(server.broker_port, _send_v2("Wake", b"w" * MIB)).code == ResponseCode.SUCCESS
    peak = 0

    def reset() -> bool:
        nonlocal peak
        peak = max(peak, server.rss_anon_bytes() - base)
        assert peak < 16 * MIB, f"broker heap grew by {peak / MIB:.0f} MiB: woken pulls each made an answer"
        return not is_open(sock)

    wait_until(reset, 30, "the connection that reads nothing to be reset")
    sock.close()


def test_a_slow_reader_gets_every_answer(stuck_server):
    server = stuck_server
    body = b"s" * (256 << 10)
    assert _invoke(server.broker_port, _send_v2("Slow", body)).code == ResponseCode.SUCCESS
    count = 16                           # 4 MiB of answers past a 64 KiB mark, read at about 1 MB/s
    sock = raw_socket(server.broker_port, rcvbuf=16 << 10)
    sock.sendall(view_requests(0, count))
    decoder, answers = FrameDecoder(), []
    started = time.monotonic()
    while len(answers) < count:
        assert time.monotonic() - started < 60, f"{len(answers)} of {count} answers in 60 s"
        ready, _, _ = select.select([sock], [], [], 5)
        assert ready, "the server stopped sending to a reader that reads"
        data = sock.recv(16 << 10)       # a reset here: the server took the slow reader for a stuck one
        assert data, f"connection closed after {len(answers)} of {count} answers"
        decoder.receive_data(data)
        while (cmd := decoder.next_command()) is not None:
            answers.append(cmd)
        time.sleep(0.01)                 # the pace of a slow reader, not a wait for a condition
    assert [a.opaque for a in answers] == list(range(1, count + 1))
    assert all(a.code == ResponseCode.SUCCESS and body in a.body for a in answers)
    assert time.monotonic() - started > 4 * STALL_S, "too fast to cross stall checks"
    assert is_open(sock)
    sock.close()


# -- connection floods -----------------------------------------------------------------------------

def _create_topic(topic: str) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6})


def _open_count(socks) -> int:
    return sum(1 for s in socks if is_open(s))


def test_a_connection_flood_is_held_at_the_limit_and_config_writes_still_succeed(tmp_path):
    open_files = 512                     # default limit per port: (512 - 256 kept for files) / 4 = 64
    limit = 64
    server = ServeProcess(tmp_path, open_files=open_files)
    flood: dict[int, list[socket.socket]] = {}
    try:
        with asyncio.Runner() as runner:
            admin = RemotingClient("127.0.0.1", server.broker_port)
            runner.run(admin.connect())                   # a client already connected when the flood comes
            for port in (server.broker_port, server.namesrv_port):     # 600 connections > 512 descriptors
                flood[port] = [raw_socket(port, rcvbuf=None) for _ in range(300)]
            for port, socks in flood.items():
                wait_until(lambda: _open_count(socks) <= limit, 20, f"port {port} to hold {limit} connections")
                assert _open_count(socks) >= limit - 3     # up to the limit (the admin, the broker's registration)
            assert server.open_fds() < open_files - 100
            created = runner.run(admin.invoke(_create_topic("AfterFlood"), timeout_s=10))
            assert created.code == ResponseCode.SUCCESS, created.remark                 # topics.json written
            assert (tmp_path / "store" / "config" / "topics.json").read_text().count("AfterFlood")
            refused = raw_socket(server.broker_port)      # at the limit: a newcomer is closed at once
            wait_until(lambda: not is_open(refused), 10, "a connection past the limit to be closed")
            refused.close()
            for sock in flood[server.broker_port][:10]:
                sock.close()
            started = time.monotonic()
            served = runner.run(_served_when_room(server.broker_port))
            assert served.code == ResponseCode.SUCCESS and time.monotonic() - started < 5
            runner.run(admin.close())
        log = server.log()
        assert log.count("connection(s) refused since the last report") <= 4      # once per port per 10 s
        assert "Too many open files" not in log
    finally:
        for socks in flood.values():
            for sock in socks:
                sock.close()
        server.stop()


async def _served_when_room(port: int) -> RemotingCommand:
    """A normal client's first request, retried while the server is still closing the flood."""
    from rocketq.remoting import RemotingConnectionClosedError
    while True:
        try:
            async with RemotingClient("127.0.0.1", port) as client:
                return await client.invoke(RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET,
                                                                          {"topic": "AfterFlood", "queueId": 0}))
        except RemotingConnectionClosedError:
            await asyncio.sleep(0.02)


# -- idle connections ------------------------------------------------------------------------------

def test_idle_connections_are_closed_but_not_one_with_a_suspended_pull(tmp_path):
    server = ServeProcess(tmp_path, {"serverChannelMaxIdleTimeSeconds": 1})
    try:
        assert _invoke(server.broker_port, _send_v2("Idle", b"one")).code == ResponseCode.SUCCESS
        idle = [raw_socket(server.broker_port), raw_socket(server.namesrv_port)]

        async def suspended_pull():
            async with RemotingClient("127.0.0.1", server.broker_port) as client:
                await client.connect()
                conn, started = client.connection, time.monotonic()
                pull = RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {
                    "consumerGroup": "G", "topic": "Idle", "queueId": 0, "queueOffset": 1, "maxMsgNums": 32,
                    "sysFlag": 0x2, "commitOffset": 0, "suspendTimeoutMillis": 3000, "subscription": "*",
                    "subVersion": 0})
                answer = await client.invoke(pull, timeout_s=10)     # held 3 s: three idle timeouts
                return answer, time.monotonic() - started, client.connection is conn and not conn.is_closing

        answer, held_s, same_connection = asyncio.run(suspended_pull())
        assert answer.code == ResponseCode.PULL_NOT_FOUND and held_s >= 2.5
        assert same_connection, "a connection with a suspended pull was closed as idle"
        wait_until(lambda: not any(is_open(s) for s in idle), 10, "idle connections to be closed")
        for sock in idle:
            sock.close()
    finally:
        server.stop()


# -- the gRPC port ---------------------------------------------------------------------------------

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
H2_SETTINGS, H2_MAX_CONCURRENT_STREAMS = 0x4, 0x3


def _h2_settings(sock: socket.socket) -> dict[int, int]:
    """Speak the HTTP/2 preface and return the server's SETTINGS."""
    sock.sendall(H2_PREFACE + struct.pack(">I", 0)[1:] + bytes([H2_SETTINGS, 0]) + struct.pack(">I", 0))
    sock.settimeout(10)
    head = b""
    while len(head) < 9:
        head += sock.recv(9 - len(head))
    length, kind = int.from_bytes(head[:3], "big"), head[3]
    assert kind == H2_SETTINGS, f"first frame is of type {kind}, not SETTINGS"
    payload = b""
    while len(payload) < length:
        payload += sock.recv(length - len(payload))
    return {int.from_bytes(payload[i:i + 2], "big"): int.from_bytes(payload[i + 2:i + 6], "big")
            for i in range(0, length, 6)}


def test_grpc_port_holds_its_connection_limit_streams_per_connection_and_idle_timeout(tmp_path):
    limit = 8
    server = ServeProcess(tmp_path, {"serverMaxConnections": limit, "serverChannelMaxIdleTimeSeconds": 1},
                          grpc=True)
    socks = []
    try:
        socks = [raw_socket(server.grpc_port, rcvbuf=None) for _ in range(limit + 4)]
        wait_until(lambda: _open_count(socks) == limit, 10, f"the gRPC port to hold {limit} connections")
        held = [s for s in socks if is_open(s)]
        assert _h2_settings(held[0]).get(H2_MAX_CONCURRENT_STREAMS) == GRPC_MAX_CONCURRENT_STREAMS
        wait_until(lambda: _open_count(socks) == 0, 10, "idle gRPC connections to be closed")
    finally:
        for sock in socks:
            sock.close()
        server.stop()


def test_a_grpc_stream_whose_client_stops_taking_messages_is_ended(tmp_path):
    import grpc

    from rocketq.grpc_endpoint.protocol import ms_duration, pb, spb, spb_grpc
    server = ServeProcess(tmp_path, {"serverWriteStallTimeoutSeconds": STALL_S}, grpc=True)
    try:
        for i in range(16):             # 16 MiB over 4 queues for one receive: more than the client buffers
            assert _invoke(server.broker_port, _send_v2("BigG", b"g" * MIB, i % 4)).code == ResponseCode.SUCCESS
        with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
            stub = spb_grpc.MessagingServiceStub(channel)
            req = spb.ReceiveMessageRequest(group=pb.Resource(name="GID_STALL"), message_queue=pb.MessageQueue(
                topic=pb.Resource(name="BigG")), batch_size=16, invisible_duration=ms_duration(30_000),
                long_polling_timeout=ms_duration(0))
            stream = stub.ReceiveMessage(req, metadata=[("x-mq-client-id", "stall-1")], timeout=60)
            wait_until(lambda: "ending a stream whose client took no message" in server.log(), 20,
                       "the endpoint to end the stream nobody reads")
            got, error = 0, None
            try:
                for resp in stream:                              # what the client library had buffered
                    got += resp.HasField("message")
            except grpc.RpcError as exc:
                error = exc
            assert error is not None and error.code() == grpc.StatusCode.UNAVAILABLE, f"{got} messages, {error}"
            assert "took no message" in error.details()
    finally:
        server.stop()


def test_the_ha_port_holds_its_connection_limit(tmp_path):
    from rocketq.broker.broker import Broker, BrokerSettings
    from rocketq.remoting.limits import ConnectionLimits
    from rocketq.store import StoreConfig

    async def main():
        store = StoreConfig(store_path=tmp_path, commitlog_file_size=1 << 20, consume_queue_entries=1000,
                            index_slots=1009, index_max_entries=4000)
        broker = await Broker(BrokerSettings(port=0, limits=ConnectionLimits(max_connections=3)), store).start()
        try:
            ha_port = broker.replication.master.port
            socks = [raw_socket(ha_port, rcvbuf=None) for _ in range(8)]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 10
            while _open_count(socks) != 3:
                assert loop.time() < deadline, f"{_open_count(socks)} HA connections open, limit 3"
                await asyncio.sleep(0.02)
            assert broker.replication.master.admission.refused == 5
            for sock in socks:
                sock.close()
        finally:
            await broker.close()
    asyncio.run(main())
