"""TLS on the gRPC port (tlsMode enforcing or permissive: TLS only): the official client sending over
TLS, plain-text calls refused, client certificates when required, and a new certificate for new
connections once the files change."""

import os
import socket
import ssl
import subprocess
import sys
import textwrap

import grpc
import pytest
import trustme
from grpc_helpers import ServerThread
from pki import issue_server_cert, new_pki, serial_of

from rocketq.remoting import tls as tls_module
from rocketq.remoting.tls import TlsMode, TlsServerConfig

_NO_POOL = [("grpc.use_local_subchannel_pool", 1)]          # every channel makes its own connection


@pytest.fixture
def pki(tmp_path):
    ca, serial = new_pki(tmp_path / "pki")
    return ca, tmp_path / "pki", serial


def _tls_server(tmp_path, d, mode="enforcing", **kw):
    cfg = TlsServerConfig(TlsMode(mode), str(d / "server.pem"), str(d / "server.key"), **kw)
    (tmp_path / "broker").mkdir()
    return ServerThread(tmp_path / "broker", tls=cfg).start()


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
        return serial_of(sock.getpeercert(binary_form=True))


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
def test_official_client_sends_over_tls_and_plain_calls_are_refused(tmp_path, pki, mode):
    ca, d, _ = pki
    server = _tls_server(tmp_path, d, mode)
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
        assert len(stored) == 1

        route = _query_route(server.endpoint.port, grpc.ssl_channel_credentials(ca.cert_pem.bytes()))
        assert route.status.code == 20000 and len(route.message_queues) > 0
        with pytest.raises(grpc.RpcError) as refused:
            _query_route(server.endpoint.port)                       # plain text: no TLS handshake
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.shutdown()


def test_client_certificate_required(tmp_path, pki):
    ca, d, _ = pki
    server = _tls_server(tmp_path, d, trust_cert_path=str(d / "ca.pem"), need_client_auth="require")
    try:
        client = ca.issue_cert("client.example")
        with_cert = grpc.ssl_channel_credentials(ca.cert_pem.bytes(), client.private_key_pem.bytes(),
                                                 client.cert_chain_pems[0].bytes())
        assert _query_route(server.endpoint.port, with_cert).status.code == 20000
        with pytest.raises(grpc.RpcError) as refused:
            _query_route(server.endpoint.port, grpc.ssl_channel_credentials(ca.cert_pem.bytes()))
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        server.shutdown()


def test_new_connections_get_the_new_certificate(tmp_path, pki, monkeypatch):
    ca, d, first_serial = pki
    monkeypatch.setattr(tls_module, "RELOAD_CHECK_INTERVAL_S", 0.0)     # check the files on every handshake
    server = _tls_server(tmp_path, d)
    try:
        port = server.endpoint.port
        assert _peer_serial(port) == first_serial
        assert _query_route(port, grpc.ssl_channel_credentials(ca.cert_pem.bytes())).status.code == 20000

        new_ca = trustme.CA()
        new_serial = issue_server_cert(new_ca, d)                               # same paths, another CA's certificate
        st = os.stat(d / "server.pem")
        os.utime(d / "server.pem", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))    # a change, whatever the clock
        assert _peer_serial(port) == new_serial
        assert server.broker.server_tls.reloads == 1
        assert _query_route(port, grpc.ssl_channel_credentials(new_ca.cert_pem.bytes())).status.code == 20000
        with pytest.raises(grpc.RpcError):                           # the old CA does not vouch for it
            _query_route(port, grpc.ssl_channel_credentials(ca.cert_pem.bytes()))
    finally:
        server.shutdown()
