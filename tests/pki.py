"""Throwaway certificates for the TLS tests (trustme): a CA and a server certificate for
127.0.0.1 / localhost written as ``ca.pem``, ``server.pem`` and ``server.key`` in a directory."""

from __future__ import annotations

from pathlib import Path

import trustme
from cryptography import x509


def issue_server_cert(ca: trustme.CA, directory: Path) -> int:
    """Write a server certificate and key signed by *ca* into *directory*; its serial number."""
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert.cert_chain_pems[0].write_to_path(str(directory / "server.pem"))
    cert.private_key_pem.write_to_path(str(directory / "server.key"))
    return x509.load_pem_x509_certificate(cert.cert_chain_pems[0].bytes()).serial_number


def new_pki(directory: Path) -> tuple[trustme.CA, int]:
    """A new CA (``ca.pem``) and a server certificate from it in *directory*: (CA, serial)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = trustme.CA()
    serial = issue_server_cert(ca, directory)
    ca.cert_pem.write_to_path(str(directory / "ca.pem"))
    return ca, serial


def serial_of(der: bytes) -> int:
    return x509.load_der_x509_certificate(der).serial_number
