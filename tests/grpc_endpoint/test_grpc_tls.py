"""TLS on the gRPC port (tlsMode enforcing or permissive: TLS only), on both transports (grpcio and the
native one, rustls): the official client sending over TLS, plain-text calls refused, a certificate from
another CA refused, client certificates when required (and, on the native transport, checked when
optional), a new certificate for new connections once the files change; and, on the native transport,
bad handshakes (garbage, plain HTTP/2, silence, a half hello, TLS but no HTTP/2) closing only their
connection within the handshake timeout, and certificate files rustls cannot use refused with their
paths named."""

import datetime
import os
import socket
import ssl
import subprocess
import sys
import textwrap
import time

import grpc
import pytest
import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from grpc_helpers import ServerThread, wait_until
from pki import issue_server_cert, new_pki, serial_of

from rocketq.grpc_endpoint.native_transport import NativeServer
from rocketq.remoting import tls as tls_module
from rocketq.remoting.limits import ConnectionLimits
from rocketq.remoting.tls import TlsMode, TlsServerConfig

_NO_POOL = [("grpc.use_local_subchannel_pool", 1)]          # every channel makes its own connection


@pytest.fixture
def pki(tmp_path):
    ca, serial = new_pki(tmp_path / "pki")
    return ca, tmp_path / "pki", serial


@pytest.fixture(params=["grpcio", "native"])
def transport(request):
    return request.param


def _tls_server(tmp_path, d, mode="enforcing", transport="native", limits=None, **kw):
    cfg = TlsServerConfig(TlsMode(mode), str(d / "server.pem"), str(d / "server.key"), **kw)
    (tmp_path / "broker").mkdir()
    extra = {} if limits is None else {"limits": limits}
    server = ServerThread(tmp_path / "broker", tls=cfg, grpc_transport=transport, **extra)
    try:
        server.start()
    except BaseException:
        server.shutdown()                           # the broker that did start, and the loop's thread
        raise
    # the transport asked for serves the TLS itself (grpcio once served it whatever grpcTransport said)
    assert isinstance(server.endpoint._server, NativeServer) == (transport == "native")
    return server


def _query_route(port, credentials=None, topic="TlsTopic"):
    from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc
    target = f"127.0.0.1:{port}"
    with (grpc.secure_channel(target, credentials, _NO_POOL) if credentials is not None
          else grpc.insecure_channel(target, _NO_POOL)) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        return stub.QueryRoute(service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name=topic)), timeout=5)


def _peer_serial(port) -> int:
    """The serial of the certificate a new TLS connection to the gRPC port is shown."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as sock:
        assert sock.selected_alpn_protocol() == "h2"
        return serial_of(sock.getpeercert(binary_form=True))


def _creds(ca, client=None):
    if client is None:
        return grpc.ssl_channel_credentials(ca.cert_pem.bytes())
    return grpc.ssl_channel_credentials(ca.cert_pem.bytes(), client.private_key_pem.bytes(),
                                        client.cert_chain_pems[0].bytes())


def _refused(port, credentials=None) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as refused:
        _query_route(port, credentials)
    return refused.value.code()


_OFFICIAL_SEND = textwrap.dedent("""
    import sys
    from rocketmq import ClientConfiguration, Credentials, Message, Producer
    producer = Producer(ClientConfiguration(sys.argv[1], Credentials(), request_timeout=5), ("TlsTopic",),
                        tls_enable=True)
    producer.startup()
    try:
        m = Message()
        m.topic, m.body, m.keys = "TlsTopic", b"sent over tls", "tls-key"
        print("SENT", producer.send(m).message_id, flush=True)
    finally:
        producer.shutdown()
""")


@pytest.mark.parametrize("mode", ["enforcing", "permissive"])
def test_official_client_sends_over_tls_and_plain_calls_are_refused(tmp_path, pki, mode, transport):
    ca, d, _ = pki
    server = _tls_server(tmp_path, d, mode, transport)
    try:
        server.create_topic("TlsTopic")
        # rocketmq-python-client's tls_enable uses grpc.ssl_channel_credentials() (the default roots):
        # grpc's GRPC_DEFAULT_SSL_ROOTS_FILE_PATH makes those our CA, in a process of its own
        env = dict(os.environ, GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=str(d / "ca.pem"))
        out = subprocess.run([sys.executable, "-c", _OFFICIAL_SEND, server.access_point], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "SENT " in out.stdout
        stored = server.call(server.broker.store.query_by_key, "TlsTopic", "tls-key")
        assert len(stored) == 1 and stored[0].body == b"sent over tls"

        route = _query_route(server.endpoint.port, _creds(ca))
        assert route.status.code == 20000 and len(route.message_queues) > 0
        assert _refused(server.endpoint.port) == grpc.StatusCode.UNAVAILABLE     # plain text: no TLS handshake
    finally:
        server.shutdown()


def test_a_certificate_from_another_ca_is_refused(tmp_path, pki, transport):
    ca, d, _ = pki
    server = _tls_server(tmp_path, d, transport=transport)
    try:
        assert _refused(server.endpoint.port, _creds(trustme.CA())) == grpc.StatusCode.UNAVAILABLE
        assert _query_route(server.endpoint.port, _creds(ca)).status.code == 20000
    finally:
        server.shutdown()


def test_client_certificate_required(tmp_path, pki, transport):
    ca, d, _ = pki
    server = _tls_server(tmp_path, d, transport=transport, trust_cert_path=str(d / "ca.pem"),
                         need_client_auth="require")
    try:
        port = server.endpoint.port
        assert _query_route(port, _creds(ca, ca.issue_cert("client.example"))).status.code == 20000
        assert _refused(port, _creds(ca)) == grpc.StatusCode.UNAVAILABLE                  # none shown
        stranger = trustme.CA().issue_cert("client.example")
        assert _refused(port, _creds(ca, stranger)) == grpc.StatusCode.UNAVAILABLE        # another CA's
    finally:
        server.shutdown()


def test_optional_client_certificate_is_checked_when_shown(tmp_path, pki):
    """Native only: grpc's Python server cannot ask for a certificate without requiring it."""
    ca, d, _ = pki
    server = _tls_server(tmp_path, d, trust_cert_path=str(d / "ca.pem"), need_client_auth="optional")
    try:
        port = server.endpoint.port
        assert _query_route(port, _creds(ca)).status.code == 20000                        # none shown
        assert _query_route(port, _creds(ca, ca.issue_cert("client.example"))).status.code == 20000
        stranger = trustme.CA().issue_cert("client.example")
        assert _refused(port, _creds(ca, stranger)) == grpc.StatusCode.UNAVAILABLE
    finally:
        server.shutdown()


def _touch_later(path) -> None:
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))    # a change, whatever the clock


def test_new_connections_get_the_new_certificate(tmp_path, pki, monkeypatch, transport):
    ca, d, first_serial = pki
    monkeypatch.setattr(tls_module, "RELOAD_CHECK_INTERVAL_S", 0.0)     # check the files on every look
    server = _tls_server(tmp_path, d, transport=transport)
    try:
        port = server.endpoint.port
        assert _peer_serial(port) == first_serial
        with grpc.secure_channel(f"127.0.0.1:{port}", _creds(ca), _NO_POOL) as kept:   # opened before the change
            from rocketmq.grpc_protocol import (
                definition_pb2,
                service_pb2,
                service_pb2_grpc,
            )
            stub = service_pb2_grpc.MessagingServiceStub(kept)
            req = service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name="TlsTopic"))
            assert stub.QueryRoute(req, timeout=5).status.code == 20000

            new_ca = trustme.CA()
            new_serial = issue_server_cert(new_ca, d)                           # same paths, another CA's certificate
            _touch_later(d / "server.pem")
            # grpcio: on the next handshake; native: within its reload task's poll
            wait_until(lambda: _peer_serial(port) == new_serial, timeout_s=10, what="the new certificate")
            assert server.broker.server_tls.reloads == 1
            assert _query_route(port, _creds(new_ca)).status.code == 20000
            assert _refused(port, _creds(ca)) == grpc.StatusCode.UNAVAILABLE   # the old CA does not vouch for it
            # the connection opened before goes on with the old certificate (its channel trusts only the old CA,
            # so a new connection would fail)
            assert stub.QueryRoute(req, timeout=5).status.code == 20000
    finally:
        server.shutdown()


# -- native transport only -------------------------------------------------------------------------


def _closed_within(port: int, first: bytes, limit_s: float) -> float:
    """Seconds until the server closes a connection that sent *first* (and then nothing)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=limit_s) as sock:
        if first:
            sock.sendall(first)
        try:
            while sock.recv(4096):                 # an alert, maybe, then the close
                pass
        except ConnectionResetError:
            pass
        except TimeoutError:
            raise AssertionError(f"the server kept a connection that sent {first[:20]!r} for {limit_s} s") from None
    return time.monotonic() - started


def test_bad_handshakes_close_only_their_connection_within_the_timeout(tmp_path, pki):
    ca, d, _ = pki
    server = _tls_server(tmp_path, d, limits=ConnectionLimits(idle_timeout_s=1.0))    # handshake timeout: 1 s
    try:
        port = server.endpoint.port
        stats = lambda: server.call(server.endpoint._server.stats)
        # not TLS at all: refused from the first record header
        _closed_within(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + bytes(range(256)), 5)
        _closed_within(port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 5)                   # plain HTTP/2
        # held until the handshake's deadline: a silent peer and one that stops inside its hello
        hello_start = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03])
        assert 0.5 < _closed_within(port, b"", 8) < 5
        assert 0.5 < _closed_within(port, hello_start, 8) < 5
        # a whole TLS handshake, then no HTTP/2 preface: the same deadline holds
        ctx = ssl.create_default_context(cafile=str(d / "ca.pem"))
        ctx.set_alpn_protocols(["h2"])
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", port), timeout=8) as raw, \
                ctx.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
            while sock.recv(4096):                 # nothing comes (OpenSSL takes TLS 1.3 tickets), then the close
                pass
        assert time.monotonic() - started < 5
        assert _query_route(port, _creds(ca)).status.code == 20000       # served all along
        wait_until(lambda: stats()[0] == 0, what="every connection to be released")
    finally:
        server.shutdown()


def _p521_cert(d) -> None:
    """A CA-less P-521 certificate and key in *d* (OpenSSL loads them; rustls' ring provider has no P-521)."""
    key = ec.generate_private_key(ec.SECP521R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA512()))
    (d / "server.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / "server.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()))


def test_files_rustls_cannot_use_are_refused_with_their_paths(tmp_path, pki, monkeypatch, caplog):
    ca, d, first_serial = pki
    monkeypatch.setattr(tls_module, "RELOAD_CHECK_INTERVAL_S", 0.0)
    server = _tls_server(tmp_path, d)
    try:
        port = server.endpoint.port
        _p521_cert(d)
        _touch_later(d / "server.pem")
        # OpenSSL (the remoting port) takes the new files; the gRPC port keeps the old certificate
        wait_until(lambda: server.broker.server_tls.reloads == 1, what="the remoting port's reload")
        wait_until(lambda: "not taken, the old one stays in use" in caplog.text, what="the refusal in the log")
        assert _peer_serial(port) == first_serial
        assert _query_route(port, _creds(ca)).status.code == 20000
    finally:
        server.shutdown()
    (tmp_path / "broker").rename(tmp_path / "first")
    with pytest.raises(ValueError, match=f"gRPC TLS certificate and key: .*certPath {d / 'server.pem'}"):
        _tls_server(tmp_path, d)                                         # a start with such files fails


def test_client_auth_without_trust_certificates_fails_at_start(tmp_path, pki):
    _, d, _ = pki
    with pytest.raises(ValueError, match="needs trust certificates .*tls.server.trustCertPath"):
        _tls_server(tmp_path, d, need_client_auth="require")
