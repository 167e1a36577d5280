"""RocketMQ ACL 1.0 request signatures on the remoting protocol (``AclClientRPCHook``).

A signed request carries three more extFields: ``AccessKey``, ``Signature`` and optionally
``SecurityToken``.  The signature is::

    content   = concat(value for key, value in sorted(extFields) if key != "Signature")  (UTF-8)
                + body
    Signature = base64(HMAC-SHA1(secretKey, content))

Keys sort by Java's ``String.compareTo`` (UTF-16 code units, which for the ASCII names used in
headers is plain byte order), the values are the header strings exactly as sent (for
SEND_MESSAGE_V2 the short names ``a``, ``b``, ...), and the AccessKey itself is one of the signed
values.
"""

from __future__ import annotations

import base64
import hashlib
import hmac

from rocketq.remoting import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


def _utf16_key(key: str) -> list[int]:
    data = key.encode("utf-16-be")
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2)]


def signed_content(ext_fields: dict[str, str], body: bytes) -> bytes:
    keys = sorted((k for k in ext_fields if k != SIGNATURE), key=_utf16_key)
    return "".join(str(ext_fields[k]) for k in keys if ext_fields[k] is not None).encode("utf-8") + (body or b"")


def signature(secret_key: str, ext_fields: dict[str, str], body: bytes) -> str:
    digest = hmac.new(secret_key.encode("utf-8"), signed_content(ext_fields, body), hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign(cmd: RemotingCommand, access_key: str, secret_key: str, security_token: str | None = None) -> RemotingCommand:
    """Add AccessKey (and SecurityToken) and the Signature to *cmd*'s extFields, in place.

    Header values are stringified first, exactly as they will go on the wire, so the broker sees
    the same strings that were signed."""
    from rocketq.remoting.command import to_ext_str
    fields = {k: to_ext_str(v) for k, v in cmd.ext_fields.items() if v is not None}
    fields[ACCESS_KEY] = access_key
    if security_token:
        fields[SECURITY_TOKEN] = security_token
    fields.pop(SIGNATURE, None)
    fields[SIGNATURE] = signature(secret_key, fields, cmd.body)
    cmd.ext_fields = fields
    return cmd
