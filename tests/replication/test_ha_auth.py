"""The HA port authenticates its slaves (rocketq.broker.ha_auth): with ACL on, nothing of the
CommitLog reaches a peer that has not proved an admin account, proofs are not replayable, and a
slave with wrong credentials says so in its log and keeps trying."""

import asyncio
import logging
import socket
import struct
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "client"))
sys.path.insert(0, str(Path(__file__).parent.parent / "acl"))
from acl_fixtures import write_acl_file  # noqa: E402
from cluster import small_store  # noqa: E402
from waiting import until  # noqa: E402

from rocketq.acl import sign  # noqa: E402
from rocketq.broker import ha_auth  # noqa: E402
from rocketq.broker.broker import Broker, BrokerSettings  # noqa: E402
from rocketq.client import Message, Producer  # noqa: E402
from rocketq.namesrv.server import NameServer  # noqa: E402
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode  # noqa: E402

SECRET_BODY = b"body-of-a-denied-topic"
ACL = """
accounts:
  - {accessKey: replicator, secretKey: r-secret, admin: true}
  - {accessKey: reader, secretKey: x-secret, defaultTopicPerm: SUB, defaultGroupPerm: SUB}
"""
REPLICATOR = '{"accessKey": "replicator", "secretKey": "r-secret"}'


def test_handshake_frames_golden_bytes():
    nonce = bytes(range(32))
    assert ha_auth.hello() == b"RQHA\x01"
    frame, same = ha_auth.challenge(credentials_needed=True, nonce=nonce)
    assert frame == b"RQHA\x01\x01" + nonce and same == nonce
    assert ha_auth.parse_challenge(frame) == ha_auth.Challenge(True, nonce)
    # printf 'rocketq-ha-v1\0' + bytes 0..31 + 'broker' | openssl dgst -sha256 -hmac secret
    mac = bytes.fromhex("1d1b4301dc99bbb0c6d8e316d4afd5d58f3f506f9fa0677834c485a47956e8c0")
    assert ha_auth.proof(nonce, ("broker", "secret")) == b"\x00\x06broker" + mac
    assert ha_auth.proof(nonce, None) == b"\x00\x00" + bytes(32)
    assert ha_auth.verdict(ha_auth.REFUSED, "no") == b"\x01\x00\x02no"
    with pytest.raises(ha_auth.HandshakeError):
        ha_auth.check_hello(struct.pack(">q", 0)[:5])          # an old slave's bare offset


def _recv_all(sock, limit=1 << 20) -> bytes:
    data = b""
    while len(data) < limit:
        try:
            part = sock.recv(65536)
        except (ConnectionError, socket.timeout):
            break
        if not part:
            break
        data += part
    return data


def _raw_session(port: int, credentials=None, *, proof_for=None) -> tuple[bytes, bytes, bytes]:
    """(challenge, verdict, what followed an offset of 0) as a raw slave sees them; *proof_for*
    replays a proof made for another nonce."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(ha_auth.hello())
        challenge = sock.recv(38)
        nonce = ha_auth.parse_challenge(challenge).nonce
        sock.sendall(proof_for if proof_for is not None else ha_auth.proof(nonce, credentials))
        head = sock.recv(3)
        reason = sock.recv(int.from_bytes(head[1:3], "big")) if len(head) == 3 and head[1:3] != b"\0\0" else b""
        try:
            sock.sendall(struct.pack(">q", 0))
            chunk_head = _recv_exactly(sock, 12)          # int64 offset | int32 size, then the bytes
        except ConnectionError:
            return challenge, head + reason, b""
        size = int.from_bytes(chunk_head[8:], "big") if len(chunk_head) == 12 else 0
        return challenge, head + reason, chunk_head + _recv_exactly(sock, size)


def _recv_exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            break
        data += part
    return data


async def _master(tmp_path, **settings):
    (tmp_path / "m").mkdir()
    write_acl_file(tmp_path / "m", ACL)
    master = await Broker(BrokerSettings(broker_name="broker-a", port=0, ha_listen_port=0, acl_enable=True,
                                         **settings), small_store(tmp_path / "m")).start()
    client = RemotingClient("127.0.0.1", master.server.port)
    try:
        cmd = RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {
            "a": "P", "b": "Denied", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0, "i": "", "j": 0,
            "k": False}, SECRET_BODY)
        r = await client.invoke(sign(cmd, "replicator", "r-secret"), timeout_s=10)
        assert r.code == 0, r.remark
    finally:
        await client.close()
    return master


def test_with_acl_on_the_ha_port_streams_nothing_to_a_peer_without_an_admin_account(tmp_path):
    async def main():
        master = await _master(tmp_path)
        port = master.replication.master.port
        try:
            # the probe: connect, send an 8-byte offset 0, read
            def probe():
                with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                    sock.sendall(struct.pack(">q", 0))
                    return _recv_all(sock)
            assert SECRET_BODY not in await asyncio.to_thread(probe)
            for creds, why in ((None, "carries no AccessKey"), (("replicator", "wrong"), "signature"),
                               (("nobody", "x"), "no ACL account"), (("reader", "x-secret"), "admin")):
                challenge, verdict, after = await asyncio.to_thread(_raw_session, port, creds)
                assert challenge[5] == ha_auth.FLAG_CREDENTIALS_NEEDED
                assert verdict[0] == ha_auth.REFUSED and why in verdict[3:].decode(), (creds, verdict)
                assert after == b""
            _, verdict, after = await asyncio.to_thread(_raw_session, port, ("replicator", "r-secret"))
            assert verdict == bytes([ha_auth.ACCEPTED, 0, 0]) and SECRET_BODY in after
            # a proof is good for its own nonce only: replayed on a new connection it is refused
            stolen = ha_auth.proof(bytes(32), ("replicator", "r-secret"))
            _, verdict, after = await asyncio.to_thread(_raw_session, port, proof_for=stolen)
            assert verdict[0] == ha_auth.REFUSED and after == b""
        finally:
            await master.close()
    asyncio.run(main())


def test_a_slave_with_the_admin_account_replicates_and_one_without_says_why_and_retries(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="rocketq.broker.ha")

    async def main():
        master = await _master(tmp_path)
        ha = f"127.0.0.1:{master.replication.master.port}"
        wrong = await Broker(BrokerSettings(broker_name="broker-a", broker_id=1, port=0, broker_role="SLAVE",
                                            ha_master_address=ha,
                                            inner_credentials='{"accessKey": "replicator", "secretKey": "no"}'),
                             small_store(tmp_path / "wrong")).start()
        good = await Broker(BrokerSettings(broker_name="broker-a", broker_id=2, port=0, broker_role="SLAVE",
                                           ha_master_address=ha, inner_credentials=REPLICATOR),
                            small_store(tmp_path / "good")).start()
        try:
            end = master.store.max_physical_offset()
            await until(lambda: good.store.max_physical_offset() == end, 20, "the good slave to catch up")
            refusals = lambda: [r for r in caplog.records if "refused this slave" in r.getMessage()]  # noqa: E731
            await until(lambda: len(refusals()) >= 2, 20, "the wrong slave to be refused twice (it retries)")
            assert refusals()[0].levelno == logging.ERROR
            assert "signature" in refusals()[0].getMessage()
            assert "innerClientAuthenticationCredentials" in refusals()[0].getMessage()
            assert wrong.store.max_physical_offset() == 0 and not wrong.replication.slave.connected
        finally:
            for b in (good, wrong, master):
                await b.close()
    asyncio.run(main())


def test_with_acl_off_a_slave_needs_no_credentials(tmp_path):
    async def main():
        namesrv = await NameServer("127.0.0.1", 0, kv_path=tmp_path / "kv.json").start()
        addr = f"127.0.0.1:{namesrv.port}"
        master = await Broker(BrokerSettings(broker_name="broker-a", port=0, namesrv_addr=addr, ha_listen_port=0),
                              small_store(tmp_path / "m")).start()
        slave = await Broker(BrokerSettings(broker_name="broker-a", broker_id=1, port=0, namesrv_addr=addr,
                                            broker_role="SLAVE"), small_store(tmp_path / "s")).start()
        try:
            async with Producer("P", addr) as p:
                await p.send(Message("T", b"x"))
            end = master.store.max_physical_offset()
            await until(lambda: slave.store.max_physical_offset() == end, 20, "the slave to catch up")
            challenge, _, _ = await asyncio.to_thread(_raw_session, master.replication.master.port)
            assert challenge[5] == 0                    # credentials not asked for
        finally:
            for part in (slave, master, namesrv):
                await part.close()
    asyncio.run(main())


def test_a_whole_cluster_with_acl_on_registers_syncs_and_replicates(tmp_path):
    """NameServer, master and slave all with ACL on, sharing one file: the brokers sign their
    registrations, the slave its admin reads of the master's config and its HA sign-in, with the
    file's admin account and no other setting."""
    async def main():
        for d in ("m", "s"):
            (tmp_path / d).mkdir()
            write_acl_file(tmp_path / d, ACL)
        from rocketq.acl import AclValidator
        namesrv = await NameServer("127.0.0.1", 0, kv_path=tmp_path / "kv.json",
                                   acl=AclValidator(tmp_path / "m" / "config" / "plain_acl.yml")).start()
        addr = f"127.0.0.1:{namesrv.port}"
        master = await Broker(BrokerSettings(broker_name="broker-a", port=0, namesrv_addr=addr, ha_listen_port=0,
                                             acl_enable=True), small_store(tmp_path / "m")).start()
        slave = await Broker(BrokerSettings(broker_name="broker-a", broker_id=1, port=0, namesrv_addr=addr,
                                            broker_role="SLAVE", acl_enable=True), small_store(tmp_path / "s")).start()
        client = RemotingClient("127.0.0.1", master.server.port)
        try:
            create = RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "Synced", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6})
            assert (await client.invoke(sign(create, "replicator", "r-secret"), 10)).code == 0
            await until(lambda: slave.topics.get("Synced") is not None, 30, "the slave to copy the topic config")
            await until(lambda: slave.store.max_physical_offset() == master.store.max_physical_offset(), 20,
                        "the slave to catch up")
            assert namesrv.routes.route("Synced") is not None
        finally:
            await client.close()
            for part in (slave, master, namesrv):
                await part.close()
    asyncio.run(main())
