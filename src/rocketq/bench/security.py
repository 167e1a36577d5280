"""Benchmarks against a secured server: how the servers a benchmark starts turn ACL and TLS on, and
how its clients then connect.

``rocketq bench broker`` and ``bench compare`` start their own ``rocketq serve`` processes (every
run on a fresh store, so runs compare); :class:`BenchSecurity` adds ``--acl FILE`` and
``-c FILE`` (a broker.conf / TOML with ``tlsMode`` and the certificate paths, or anything else a
user runs with) to those processes, and hands the bench's clients the credentials and TLS settings
the command resolved like every client command (:mod:`rocketq.client.access`).  Reports carry
:meth:`BenchSecurity.describe`, never the secret.

The official RocketMQ 5 Python client (the gRPC rows of ``bench compare``) takes credentials and
a TLS switch, but no CA of its own: it verifies against gRPC's roots, which
``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` names for the whole process; it cannot present a client
certificate or skip verification, so those settings skip its rows with the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from rocketq.client.access import ClientAccess

GRPC_ROOTS_ENV = "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"


@dataclass(frozen=True)
class BenchSecurity:
    acl_file: Path | None = None              # `rocketq serve --acl FILE`
    server_config: Path | None = None         # `rocketq serve -c FILE` (TLS settings, ...)
    access: ClientAccess = field(default_factory=ClientAccess)

    def serve_args(self) -> tuple[str, ...]:
        args: tuple[str, ...] = ()
        if self.server_config is not None:
            args += ("-c", str(self.server_config))
        if self.acl_file is not None:
            args += ("--acl", str(self.acl_file))
        return args

    def client_kwargs(self) -> dict:
        """credentials / ssl_context for rocketq's own client (built anew: call in the process using it)."""
        return self.access.client_kwargs()

    @property
    def secured(self) -> bool:
        return bool(self.acl_file or self.server_config or self.access.access_key or self.access.tls)

    def describe(self) -> str:
        server = []
        if self.acl_file is not None:
            server.append(f"ACL on ({self.acl_file.name})")
        if self.server_config is not None:
            server.append(f"server config {self.server_config.name}")
        return f"servers: {', '.join(server) or 'as started by default'}; clients: {self.access.describe()}"

    # -- the official gRPC client -------------------------------------------------------------

    def official_client_refusal(self) -> str | None:
        """Why the official client cannot connect with these settings, or None."""
        if self.access.cert_file:
            return "the official 5.x Python client cannot present a client certificate (mutual TLS)"
        if self.access.tls and self.access.insecure:
            return "the official 5.x Python client cannot skip verifying the server's certificate"
        return None

    def official_client_settings(self) -> tuple[tuple[str, str], bool]:
        """((access key, secret key), TLS on) for the official client; points gRPC's roots at the
        CA file first (a process-wide setting, read when gRPC makes its first secure channel)."""
        if self.access.tls and self.access.ca_file:
            os.environ[GRPC_ROOTS_ENV] = self.access.ca_file
        return (self.access.access_key or "", self.access.secret_key or ""), self.access.tls


NONE = BenchSecurity()
