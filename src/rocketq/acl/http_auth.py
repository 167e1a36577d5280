"""ACL accounts for the HTTP ports (``/metrics`` and the web console).

The remoting and gRPC ports check a signature per request; a browser or Prometheus cannot sign
RocketMQ requests, so on HTTP an account proves itself with its AccessKey and SecretKey (HTTP Basic
for ``/metrics``, the console's login form), compared in constant time with ``plain_acl.yml``'s (with ACL 2.0: a user and its password; "admin"
is then a super user).
An address in ``globalWhiteRemoteAddresses`` is let in without credentials, as on the other ports.
Send these over TLS or keep the ports on loopback: a SecretKey on plain HTTP is readable on the wire.
"""

from __future__ import annotations

import base64
import binascii
import hmac

from rocketq.acl.plain_acl import Account


class HttpAuthError(Exception):
    """Missing or wrong credentials; the message says which (never the secret)."""


def verify(validator, access_key: str, secret_key: str) -> Account:
    """The account whose AccessKey and SecretKey these are; raises HttpAuthError."""
    account = validator.account(access_key or "")
    # compare against something of the same kind even for an unknown key, so timing tells nothing
    expected = account.secret_key if account is not None else "\0" * max(1, len(secret_key or ""))
    if not hmac.compare_digest(expected.encode(), (secret_key or "").encode()) or account is None:
        raise HttpAuthError(f"AccessKey {access_key!r} and that SecretKey are not an account of the ACL file "
                            "(or, with ACL 2.0, an enabled user and its password)")
    return account


def basic_credentials(header: str | None) -> tuple[str, str]:
    """(AccessKey, SecretKey) of an ``Authorization: Basic`` header; raises HttpAuthError."""
    if not header or not header.startswith("Basic "):
        raise HttpAuthError("credentials required: HTTP Basic with an ACL AccessKey and SecretKey")
    try:
        text = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise HttpAuthError("the Authorization header is not valid Basic credentials") from None
    key, sep, secret = text.partition(":")
    if not sep:
        raise HttpAuthError("the Authorization header is not AccessKey:SecretKey")
    return key, secret


def admin_from_basic(validator, header: str | None, ip: str) -> Account | None:
    """None for a globally white-listed *ip*, else the admin account of the Basic *header*."""
    if validator.globally_whitelisted(ip):
        return None
    account = verify(validator, *basic_credentials(header))
    if not account.admin:
        raise HttpAuthError(f"AccessKey {account.access_key!r} is not an admin account (ACL 2.0: a super user)")
    return account
