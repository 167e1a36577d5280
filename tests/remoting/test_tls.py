"""TLS on the remoting port: disabled / permissive / enforcing, and certificates reloaded on change."""

import asyncio

import pytest
import trustme

from rocketq.remoting import RemotingClient, RemotingCommand, RemotingConnectError, RemotingServer, ResponseCode
from rocketq.remoting.tls import ServerTls, TlsMode, TlsServerConfig, client_context


def _write_cert(tmp_path, ca, name="server"):
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    cert.cert_chain_pems[0].write_to_path(str(cert_path))
    cert.private_key_pem.write_to_path(str(key_path))
    return cert_path, key_path


@pytest.fixture
def pki(tmp_path):
    ca = trustme.CA()
    cert_path, key_path = _write_cert(tmp_path, ca)
    ca_path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_path))
    return ca, cert_path, key_path, ca_path


async def _echo(conn, cmd):
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, f"hello {cmd.code}")


async def _ask(port, ssl_context=None) -> str:
    client = RemotingClient("127.0.0.1", port, ssl_context=ssl_context, connect_timeout_s=5)
    try:
        return (await client.invoke(RemotingCommand.create_request(42, {}), timeout_s=5)).remark
    finally:
        await client.close()


def _server(mode, cert_path, key_path):
    tls = ServerTls(TlsServerConfig(TlsMode(mode), str(cert_path), str(key_path)))
    return RemotingServer(_echo, "127.0.0.1", 0, tls=tls)


def test_permissive_serves_plain_and_tls_clients_on_one_port(pki):
    ca, cert_path, key_path, ca_path = pki

    async def main():
        async with _server("permissive", cert_path, key_path) as server:
            assert await _ask(server.port) == "hello 42"
            assert await _ask(server.port, client_context(str(ca_path))) == "hello 42"
    asyncio.run(main())


def test_enforcing_refuses_plain_clients(pki):
    ca, cert_path, key_path, ca_path = pki

    async def main():
        async with _server("enforcing", cert_path, key_path) as server:
            assert await _ask(server.port, client_context(str(ca_path))) == "hello 42"
            with pytest.raises(Exception):      # closed by the server: connection closed / timeout
                await _ask(server.port)
    asyncio.run(main())


def test_a_client_that_does_not_trust_the_server_cannot_connect(pki, tmp_path):
    ca, cert_path, key_path, ca_path = pki
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))

    async def main():
        async with _server("enforcing", cert_path, key_path) as server:
            with pytest.raises(RemotingConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await _ask(server.port, client_context(str(other)))
    asyncio.run(main())


def test_certificate_is_reloaded_when_the_files_change(pki, tmp_path):
    ca, cert_path, key_path, ca_path = pki
    clock = [0.0]
    tls = ServerTls(TlsServerConfig(TlsMode.ENFORCING, str(cert_path), str(key_path)), clock=lambda: clock[0])
    new_ca = trustme.CA()
    new_ca_path = tmp_path / "new-ca.pem"
    new_ca.cert_pem.write_to_path(str(new_ca_path))

    async def main():
        async with RemotingServer(_echo, "127.0.0.1", 0, tls=tls) as server:
            assert await _ask(server.port, client_context(str(ca_path))) == "hello 42"
            _write_cert(tmp_path, new_ca)                      # same paths, a certificate from another CA
            clock[0] += 5
            assert await _ask(server.port, client_context(str(new_ca_path))) == "hello 42"
            assert tls.reloads == 1
            with pytest.raises(RemotingConnectError):
                await _ask(server.port, client_context(str(ca_path)))
    asyncio.run(main())


def test_bad_settings_are_named(tmp_path):
    with pytest.raises(ValueError, match="certPath"):
        TlsServerConfig(TlsMode.ENFORCING)
    with pytest.raises(ValueError, match="tlsMode 'sometimes'"):
        TlsMode.parse("sometimes")
    with pytest.raises(ValueError, match="nope.pem"):
        ServerTls(TlsServerConfig(TlsMode.ENFORCING, str(tmp_path / "nope.pem"), str(tmp_path / "nope.key")))
