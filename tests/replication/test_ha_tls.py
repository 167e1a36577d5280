"""TLS on the HA port: a SYNC_MASTER and its SLAVE replicating over TLS (tlsMode enforcing), a plain
HA client refused, permissive serving both, and a new certificate for new HA connections."""

import asyncio
import socket
import ssl
import struct
import sys
from pathlib import Path

import pytest
import trustme

sys.path.insert(0, str(Path(__file__).parent.parent / "client"))
from cluster import small_store  # noqa: E402
from waiting import until  # noqa: E402

from rocketq.broker.broker import Broker, BrokerSettings  # noqa: E402
from rocketq.broker import ha_auth  # noqa: E402
from rocketq.broker.ha import HAMaster  # noqa: E402
from rocketq.client import Message, Producer  # noqa: E402
from rocketq.client.api import MQClientAPI  # noqa: E402
from rocketq.namesrv.server import NameServer  # noqa: E402
from rocketq.remoting.tls import ServerTls, TlsMode, TlsServerConfig, client_context  # noqa: E402
from pki import issue_server_cert, new_pki, serial_of  # noqa: E402


@pytest.fixture
def pki(tmp_path):
    ca, _ = new_pki(tmp_path)
    return ca, tmp_path


def _tls(tmp_path, mode="enforcing") -> TlsServerConfig:
    return TlsServerConfig(TlsMode(mode), str(tmp_path / "server.pem"), str(tmp_path / "server.key"))


def _settings(tmp_path, **kw) -> BrokerSettings:
    # tls.enable + tls.client.trustCertPath: the broker's own connections (NameServer, HA) verify the CA
    return BrokerSettings(broker_name="broker-a", port=0, tls=_tls(tmp_path), tls_enable=True,
                          tls_trust_cert_path=str(tmp_path / "ca.pem"), **kw)


class _Log:
    file_size = 1 << 20

    def max_offset(self):
        return 4

    def read(self, offset, size):
        return b"log!"[offset:offset + size]


class _TinyStore:
    """Just enough of a MessageStore for an HAMaster: a CommitLog of 4 bytes."""
    commitlog = _Log()

    def max_physical_offset(self):
        return 4

    def min_physical_offset(self):
        return 0


def _recv_exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            return b""
        data += part
    return data


def _hello(port: int, ctx: ssl.SSLContext | None) -> bytes:
    """An HA slave's first words (the handshake, no credentials, then its CommitLog end, 0), then what
    the master answers: the log's first chunk, or b"" when it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=8) as raw:
        sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1") if ctx is not None else raw
        try:
            sock.sendall(ha_auth.hello())
            challenge = _recv_exactly(sock, 38)
            if not challenge:
                return b""
            sock.sendall(ha_auth.proof(ha_auth.parse_challenge(challenge).nonce, None))
            if _recv_exactly(sock, 3) != bytes([ha_auth.ACCEPTED, 0, 0]):
                return b""
            sock.sendall(struct.pack(">q", 0))
            return sock.recv(16)
        except (ConnectionError, ssl.SSLError):
            return b""


def _peer_serial(port: int, ca_path) -> int:
    ctx = client_context(str(ca_path))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        sock.sendall(struct.pack(">q", 0))
        return serial_of(sock.getpeercert(binary_form=True))


def test_sync_master_and_slave_replicate_over_tls(pki):
    ca, tmp_path = pki

    async def main():
        namesrv = await NameServer("127.0.0.1", 0, kv_path=tmp_path / "kv.json",
                                   tls=ServerTls(_tls(tmp_path))).start()
        addr = f"127.0.0.1:{namesrv.port}"
        master = slave = None
        try:
            master = await Broker(_settings(tmp_path, namesrv_addr=addr, broker_role="SYNC_MASTER", ha_listen_port=0),
                                  small_store(tmp_path / "m")).start()
            slave = await Broker(_settings(tmp_path, namesrv_addr=addr, broker_role="SLAVE", broker_id=1),
                                 small_store(tmp_path / "s")).start()
            await until(lambda: master.replication.master.slaves, 20, "the slave to connect over TLS")
            assert master.replication.master.tls.mode == TlsMode.ENFORCING
            ctx = client_context(str(tmp_path / "ca.pem"))
            async with Producer("PG", addr, ssl_context=ctx) as p:
                sent = await p.send(Message("TlsRep", b"over tls", keys=["k1"]))
            assert sent.status.value == "SEND_OK"            # SYNC_MASTER: the slave has it
            assert slave.store.max_physical_offset() == master.store.max_physical_offset()
            await asyncio.to_thread(slave.store.wait_dispatched)
            api = MQClientAPI(ssl_context=ctx)
            try:
                pulled = await api.pull(slave.address, sent.queue, "GID_T",
                                        sent.queue_offset)
            finally:
                await api.close()
            assert [m.body for m in pulled.messages] == [b"over tls"]
            assert pulled.messages[0].msg_id == sent.offset_msg_id

            # a plain HA client is closed without a byte of the log; a TLS one is served
            ha_port = master.replication.master.port
            assert await asyncio.to_thread(_hello, ha_port, None) == b""
        finally:
            for part in (slave, master, namesrv):
                if part is not None:
                    await part.close()
    asyncio.run(main())


def test_permissive_ha_port_serves_plain_and_tls_and_reloads_the_certificate(pki):
    ca, tmp_path = pki
    clock = [0.0]
    tls = ServerTls(_tls(tmp_path, "permissive"), clock=lambda: clock[0])
    ca_path = tmp_path / "ca.pem"

    async def main():
        master = await HAMaster(_TinyStore(), "127.0.0.1", 0, tls=tls).start()
        try:
            chunk = struct.pack(">qi", 0, 4) + b"log!"
            assert await asyncio.to_thread(_hello, master.port, None) == chunk
            assert await asyncio.to_thread(_hello, master.port, client_context(str(ca_path))) == chunk
            before = await asyncio.to_thread(_peer_serial, master.port, ca_path)
            new_ca = trustme.CA()
            new_ca.cert_pem.write_to_path(str(tmp_path / "new-ca.pem"))
            serial = issue_server_cert(new_ca, tmp_path)           # same files, a certificate from another CA
            clock[0] += 5
            after = await asyncio.to_thread(_peer_serial, master.port, tmp_path / "new-ca.pem")
            assert after == serial != before and tls.reloads == 1
            with pytest.raises(ssl.SSLCertVerificationError):
                await asyncio.to_thread(_peer_serial, master.port, ca_path)
        finally:
            await master.close()
    asyncio.run(main())


def test_client_certificates_authenticate_slaves_with_acl_off(pki):
    """tlsMode enforcing + need.client.auth=require: only a slave showing a certificate from the
    trusted CA (tls.client.certPath / keyPath) gets the log; a TLS peer without one gets nothing."""
    ca, tmp_path = pki
    slave_cert = ca.issue_cert("slave.rocketq.test")
    slave_cert.cert_chain_pems[0].write_to_path(str(tmp_path / "slave.pem"))
    slave_cert.private_key_pem.write_to_path(str(tmp_path / "slave.key"))
    mutual = TlsServerConfig(TlsMode.ENFORCING, str(tmp_path / "server.pem"), str(tmp_path / "server.key"),
                             trust_cert_path=str(tmp_path / "ca.pem"), need_client_auth="require")

    async def main():
        master = await Broker(BrokerSettings(broker_name="broker-a", port=0, ha_listen_port=0, tls=mutual),
                              small_store(tmp_path / "m")).start()
        ha = f"127.0.0.1:{master.replication.master.port}"
        slave = await Broker(BrokerSettings(broker_name="broker-a", broker_id=1, port=0, broker_role="SLAVE",
                                            ha_master_address=ha, tls_enable=True,
                                            tls_trust_cert_path=str(tmp_path / "ca.pem"),
                                            tls_client_cert_path=str(tmp_path / "slave.pem"),
                                            tls_client_key_path=str(tmp_path / "slave.key")),
                             small_store(tmp_path / "s")).start()
        try:
            await until(lambda: master.replication.master.slaves, 20, "the slave with a certificate")
            anonymous = await asyncio.to_thread(_hello, master.replication.master.port,
                                                client_context(str(tmp_path / "ca.pem")))
            assert anonymous == b""
        finally:
            await slave.close()
            await master.close()
    asyncio.run(main())
