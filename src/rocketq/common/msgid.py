"""Offset message ids (RocketMQ ``MessageDecoder.createMessageId``).

Layout (big-endian), printed as upper-case hex::

    IPv4: ip(4) | port(int32) | commitlog offset(int64)   = 16 bytes = 32 hex chars
    IPv6: ip(16) | port(int32) | commitlog offset(int64)  = 28 bytes = 56 hex chars

A client's unique id (``UNIQ_KEY``, :mod:`rocketq.client.ids`) has the same lengths
(ip | pid(2) | random(4) | time(4) | counter(2)), so the length alone cannot tell the two apart.
The port can: an offset id's port is an int32 in 1..65535, so its first two bytes are zero,
where a unique id has the producer's pid.  :func:`may_be_offset_msg_id` is that test; an id that
passes it may still be a unique id (a pid that is a multiple of 65536), so a lookup that fails
by offset goes on by unique key, as RocketMQ's ``MQAdminExt.viewMessage(topic, msgId)`` does.
"""

from __future__ import annotations

import ipaddress
import struct
from typing import NamedTuple


class HostAddress(NamedTuple):
    """An IP address and port as stored in records: packed address bytes (4 or 16) and port."""

    ip: bytes
    port: int

    @classmethod
    def parse(cls, text: str | tuple[str, int]) -> "HostAddress":
        """From ``"ip:port"``, ``"[v6]:port"`` or a ``(host, port)`` tuple."""
        if isinstance(text, tuple):
            host, port = text
        else:
            host, _, port_text = text.rpartition(":")
            host = host.strip("[]")
            port = int(port_text)
        return cls(ipaddress.ip_address(host).packed, int(port))

    @property
    def packed(self) -> bytes:
        """Address bytes and port (int32), as records and message ids hold them."""
        return self.ip + struct.pack(">i", self.port)

    @property
    def is_v6(self) -> bool:
        return len(self.ip) == 16

    def __str__(self) -> str:
        ip = ipaddress.ip_address(self.ip)
        return f"[{ip}]:{self.port}" if self.is_v6 else f"{ip}:{self.port}"


def offset_msg_id(store_host: HostAddress, physical_offset: int) -> str:
    return (store_host.packed + struct.pack(">q", physical_offset)).hex().upper()


def decode_offset_msg_id(msg_id: str) -> tuple[HostAddress, int]:
    """Returns (store host, commitlog offset); raises ValueError naming the problem."""
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"message id {msg_id!r} is not hexadecimal") from None
    if len(raw) not in (16, 28):
        raise ValueError(f"message id {msg_id!r} has {len(raw)} bytes; an offset id has 16 (IPv4) or 28 (IPv6)")
    ip_len = len(raw) - 12
    port, offset = struct.unpack_from(">iq", raw, ip_len)
    return HostAddress(raw[:ip_len], port), offset


MAX_PORT = 65535


def may_be_offset_msg_id(msg_id: str) -> bool:
    """Whether *msg_id* is shaped like an offset id: hex, 32 or 56 digits, a port in 1..65535 and a
    non-negative offset (see the module's notes: a unique id fails this unless its pid field is 0)."""
    try:
        host, offset = decode_offset_msg_id(msg_id)
    except ValueError:
        return False
    return 0 < host.port <= MAX_PORT and offset >= 0
