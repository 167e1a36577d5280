"""The HA port's handshake: a slave proves it holds a broker account before any CommitLog byte flows.

Without it the HA port streamed the whole CommitLog - every topic's bodies - to whoever sent eight
bytes.  Now every connection opens with four frames (big-endian), then the stream of
:mod:`rocketq.broker.ha` starts::

    slave  -> master  HELLO      "RQHA" | u8 version (1)                                     5 bytes
    master -> slave   CHALLENGE  "RQHA" | u8 version | u8 flags (bit 0: credentials needed)
                                 | 32 bytes nonce (fresh random, one per connection)          38 bytes
    slave  -> master  PROOF      u16 n | n bytes AccessKey (UTF-8, n = 0: none)
                                 | 32 bytes HMAC-SHA256(secretKey, CONTEXT | nonce | AccessKey)
                                   (zeros when n = 0)
    master -> slave   VERDICT    u8 status (0 accepted, 1 refused) | u16 n | n bytes reason (UTF-8)

``CONTEXT`` is ``b"rocketq-ha-v1\\0"``, so the MAC cannot be replayed as any other rocketq
signature; the nonce makes every proof good for one connection only, so nothing that crosses the
wire can be replayed.  With ACL on the master decides with the broker's own
:meth:`~rocketq.acl.validator.AclValidator.authorize` as an admin request: a globally
white-listed address, an admin account's ``whiteRemoteAddress``, or an admin account's MAC is
accepted; anything else gets a refusal naming why, then the connection is closed.  With ACL off
no credentials are asked for and any slave is served (see the README: bind the HA port to loopback
or a private network, or require client certificates, ``tls.server.need.client.auth=require``).

The first byte a slave sends is ``R`` (0x52), never 0x16, so a ``permissive`` TLS port still tells
TLS from plain by it.  Frames are built and parsed by plain functions; the ``read_*`` helpers only
read exact sizes from an ``asyncio.StreamReader``, each bounded by :data:`HANDSHAKE_TIMEOUT_S`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import struct
from dataclasses import dataclass

MAGIC = b"RQHA"
VERSION = 1
CONTEXT = b"rocketq-ha-v1\0"
NONCE_BYTES = 32
MAC_BYTES = 32
MAX_ACCESS_KEY_BYTES = 1024
MAX_REASON_BYTES = 1024
HANDSHAKE_TIMEOUT_S = 10.0
FLAG_CREDENTIALS_NEEDED = 0x1
ACCEPTED, REFUSED = 0, 1

_HELLO = struct.Struct(">4sB")
_CHALLENGE = struct.Struct(">4sBB32s")
_U16 = struct.Struct(">H")


class HandshakeError(ValueError):
    """The peer did not speak the handshake (wrong magic or version, oversized fields)."""


class HandshakeRefused(PermissionError):
    """The master refused this slave; the message is the master's reason."""


@dataclass(frozen=True)
class Challenge:
    credentials_needed: bool
    nonce: bytes


def hello() -> bytes:
    return _HELLO.pack(MAGIC, VERSION)


def check_hello(data: bytes) -> None:
    magic, version = _HELLO.unpack(data)
    if magic != MAGIC:
        raise HandshakeError(f"not an HA handshake (first bytes {data[:4]!r}; a slave of an older rocketq?)")
    if version != VERSION:
        raise HandshakeError(f"HA handshake version {version}, this master speaks {VERSION}")


def challenge(*, credentials_needed: bool, nonce: bytes | None = None) -> tuple[bytes, bytes]:
    """(the CHALLENGE frame, its nonce)."""
    nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
    flags = FLAG_CREDENTIALS_NEEDED if credentials_needed else 0
    return _CHALLENGE.pack(MAGIC, VERSION, flags, nonce), nonce


def parse_challenge(data: bytes) -> Challenge:
    magic, version, flags, nonce = _CHALLENGE.unpack(data)
    if magic != MAGIC or version != VERSION:
        raise HandshakeError(f"the master answered {data[:5]!r}, not an HA challenge of version {VERSION}")
    return Challenge(bool(flags & FLAG_CREDENTIALS_NEEDED), nonce)


def mac(secret_key: str, nonce: bytes, access_key: str) -> bytes:
    return hmac.new(secret_key.encode("utf-8"), CONTEXT + nonce + access_key.encode("utf-8"), hashlib.sha256).digest()


def proof(nonce: bytes, credentials: tuple[str, str] | None) -> bytes:
    if credentials is None:
        return _U16.pack(0) + bytes(MAC_BYTES)
    access_key, secret_key = credentials
    ak = access_key.encode("utf-8")
    if len(ak) > MAX_ACCESS_KEY_BYTES:
        raise HandshakeError(f"AccessKey of {len(ak)} bytes is longer than {MAX_ACCESS_KEY_BYTES}")
    return _U16.pack(len(ak)) + ak + mac(secret_key, nonce, access_key)


def verdict(status: int, reason: str = "") -> bytes:
    data = reason.encode("utf-8")[:MAX_REASON_BYTES]
    return bytes([status]) + _U16.pack(len(data)) + data


async def read_proof(reader: asyncio.StreamReader) -> tuple[str | None, bytes]:
    """(AccessKey or None, MAC) from the slave's PROOF."""
    n = _U16.unpack(await _exactly(reader, _U16.size))[0]
    if n > MAX_ACCESS_KEY_BYTES:
        raise HandshakeError(f"AccessKey of {n} bytes is longer than {MAX_ACCESS_KEY_BYTES}")
    ak = (await _exactly(reader, n)).decode("utf-8", "replace") if n else None
    return ak, await _exactly(reader, MAC_BYTES)


async def read_verdict(reader: asyncio.StreamReader) -> None:
    """Returns when the master accepted; raises HandshakeRefused with its reason otherwise."""
    status = (await _exactly(reader, 1))[0]
    n = _U16.unpack(await _exactly(reader, _U16.size))[0]
    if n > MAX_REASON_BYTES:
        raise HandshakeError(f"a refusal reason of {n} bytes")
    reason = (await _exactly(reader, n)).decode("utf-8", "replace")
    if status != ACCEPTED:
        raise HandshakeRefused(reason or "refused")


async def _exactly(reader: asyncio.StreamReader, n: int) -> bytes:
    return await asyncio.wait_for(reader.readexactly(n), HANDSHAKE_TIMEOUT_S)


async def read_hello(reader: asyncio.StreamReader) -> None:
    check_hello(await _exactly(reader, _HELLO.size))


async def read_challenge(reader: asyncio.StreamReader) -> Challenge:
    return parse_challenge(await _exactly(reader, _CHALLENGE.size))
