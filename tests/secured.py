"""A real `rocketq serve` with ACL and TLS on, for the tests of the tools that must keep working
when security is turned on (issue 23): the CLI, the Spark connector, the benchmarks.

:func:`secured_server` writes a plain_acl.yml (an admin account and a producer-only one, with
secrets no test output may contain), a throwaway CA with a server certificate for 127.0.0.1 and a
client certificate (:mod:`pki`), a TOML with ``tlsMode = "enforcing"``, and starts the server
with both; ``client_auth="require"`` makes it demand client certificates (mutual TLS).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from pki import new_pki

from rocketq.bench.broker_bench import ServeProcess

ADMIN, ADMIN_SECRET = "tools-admin", "Adm1n-S3cret-d0-not-print"
WRONG_SECRET = "Wr0ng-S3cret-d0-not-print"
PRODUCER, PRODUCER_SECRET = "tools-producer", "Pr0ducer-S3cret-d0-not-print"
SECRETS = (ADMIN_SECRET, WRONG_SECRET, PRODUCER_SECRET)

ACL_YAML = f"""
accounts:
  - accessKey: {ADMIN}
    secretKey: "{ADMIN_SECRET}"
    admin: true
  - accessKey: {PRODUCER}
    secretKey: "{PRODUCER_SECRET}"
    defaultTopicPerm: PUB
    defaultGroupPerm: DENY
"""


@dataclass
class Secured:
    namesrv: str
    ca: Path                 # the CA that signed the server's (and the client's) certificate
    client_cert: Path
    client_key: Path
    acl: Path
    tls_config: Path
    serve: ServeProcess


def write_security(directory: Path, *, client_auth: str = "none") -> tuple[Path, Path, Path, Path, Path]:
    """(ca.pem, client.pem, client.key, plain_acl.yml, tls.toml) in *directory*."""
    ca, _ = new_pki(directory)
    client = ca.issue_cert("rocketq-client")
    client.cert_chain_pems[0].write_to_path(str(directory / "client.pem"))
    client.private_key_pem.write_to_path(str(directory / "client.key"))
    acl = directory / "plain_acl.yml"
    acl.write_text(ACL_YAML)
    tls = directory / "tls.toml"
    tls.write_text(f'tlsMode = "enforcing"\n"tls.server.certPath" = "{directory}/server.pem"\n'
                   f'"tls.server.keyPath" = "{directory}/server.key"\n'
                   f'"tls.server.trustCertPath" = "{directory}/ca.pem"\n'
                   f'"tls.server.need.client.auth" = "{client_auth}"\n'
                   # the broker's own client (registering with the NameServer) shows a certificate too
                   f'"tls.client.certPath" = "{directory}/client.pem"\n"tls.client.keyPath" = "{directory}/client.key"\n'
                   f'"tls.client.trustCertPath" = "{directory}/ca.pem"\n')
    return directory / "ca.pem", directory / "client.pem", directory / "client.key", acl, tls


@contextlib.contextmanager
def secured_server(directory: Path, *, client_auth: str = "none", grpc: bool = False):
    ca, cert, key, acl, tls = write_security(directory, client_auth=client_auth)
    with ServeProcess(directory / "store", "-c", str(tls), "--acl", str(acl), grpc=grpc) as serve:
        yield Secured(serve.namesrv, ca, cert, key, acl, tls, serve)


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in SECRETS:
            assert secret not in (text or ""), f"a secret leaked into: {text[:300]!r}"
