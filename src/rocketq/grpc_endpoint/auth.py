"""Authentication of gRPC calls against ``plain_acl.yml`` when the broker has ACL enabled.

Every v2 client call carries ``authorization: MQv2-HMAC-SHA1 Credential=<ak>,
SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1(secret key, x-mq-date-time)>`` and the
signed ``x-mq-date-time`` header.  With ACL on, a call is accepted when its client IP is globally
white-listed, or it names an account and either comes from the account's white-listed addresses
or carries a matching signature.  Per-topic and per-group permissions of the account are not
checked on this protocol yet.  With ACL off, the header is ignored.
"""

from __future__ import annotations

import hashlib
import hmac

from rocketq.grpc_endpoint.protocol import Code, V2Error

SCHEME = "MQv2-HMAC-SHA1"


def parse_authorization(value: str) -> dict[str, str]:
    scheme, _, rest = value.strip().partition(" ")
    if scheme != SCHEME:
        raise V2Error(Code.UNAUTHORIZED, f"authorization scheme {scheme!r} is not {SCHEME}")
    fields = {}
    for part in rest.split(","):
        k, sep, v = part.strip().partition("=")
        if sep:
            fields[k.strip()] = v.strip()
    return fields


def authenticate(validator, ip: str, md: dict[str, str]) -> None:
    """Raises V2Error(UNAUTHORIZED) unless the call may go on; *validator* is the broker's AclValidator."""
    acl = validator.acl
    if acl.globally_whitelisted(ip):
        return
    header = md.get("authorization")
    if not header:
        raise V2Error(Code.UNAUTHORIZED, f"no authorization metadata on a call from {ip}; ACL is enabled")
    fields = parse_authorization(header)
    ak = fields.get("Credential", "").split("/")[0]
    account = acl.accounts.get(ak)
    if account is None:
        raise V2Error(Code.UNAUTHORIZED, f"no ACL account for access key {ak!r}")
    if account.white_address is not None and account.white_address.matches(ip):
        return
    expected = hmac.new(account.secret_key.encode(), md.get("x-mq-date-time", "").encode(), hashlib.sha1).hexdigest()
    if not hmac.compare_digest(expected, fields.get("Signature", "").lower()):
        raise V2Error(Code.UNAUTHORIZED, f"signature does not match for access key {ak!r}")
