"""The standalone server with tlsMode=enforcing: broker and NameServer speak TLS only, and the
broker still registers with its in-process NameServer."""

import asyncio

import pytest
import trustme

from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketq.remoting.tls import client_context
from rocketq.server import config
from rocketq.server.standalone import Standalone


def test_enforcing_tls_end_to_end(tmp_path):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "server.pem"))
    cert.private_key_pem.write_to_path(str(tmp_path / "server.key"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    conf = tmp_path / "broker.toml"
    conf.write_text(f'storePathRootDir = "{tmp_path}/store"\nbindAddress = "127.0.0.1"\nlistenPort = 0\n'
                    f'namesrvListenPort = 0\ngrpcServerPort = -1\ntlsMode = "enforcing"\n'
                    f'"tls.server.certPath" = "{tmp_path}/server.pem"\n"tls.server.keyPath" = "{tmp_path}/server.key"\n')
    cfg = config.load(conf)

    async def main():
        server = await Standalone(cfg).start()
        try:
            ctx = client_context(str(tmp_path / "ca.pem"))
            broker_port = int(server.broker.address.rsplit(":", 1)[1])
            async with RemotingClient("127.0.0.1", broker_port, ssl_context=ctx) as broker:
                sent = await broker.invoke(RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {
                    "a": "P", "b": "TlsTopic", "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0, "i": "",
                    "j": 0, "k": False}, b"secret"), timeout_s=10)
                assert sent.code == ResponseCode.SUCCESS
            async with RemotingClient("127.0.0.1", server.namesrv.port, ssl_context=ctx) as namesrv:
                ask = RemotingCommand.create_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TlsTopic"})
                for _ in range(200):
                    route = await namesrv.invoke(ask, timeout_s=10)
                    if route.code == ResponseCode.SUCCESS:
                        break
                    await asyncio.sleep(0.05)
                assert route.code == ResponseCode.SUCCESS        # registration went over TLS
            async with RemotingClient("127.0.0.1", broker_port, connect_timeout_s=3) as plain:
                with pytest.raises(Exception):
                    await plain.invoke(RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET,
                                                                      {"topic": "TlsTopic", "queueId": 0}), 3)
        finally:
            await server.close()
    asyncio.run(main())


def test_tls_settings_are_checked(tmp_path):
    conf = tmp_path / "b.conf"
    conf.write_text("tlsMode=enforcing\n")
    with pytest.raises(config.ConfigError, match="certPath"):
        config.load(conf)
    conf.write_text("tls.server.mode=sometimes\n")
    with pytest.raises(config.ConfigError, match="sometimes"):
        config.load(conf)
