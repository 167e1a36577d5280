"""Offset message ids (RocketMQ ``MessageDecoder.createMessageId``).

Layout (big-endian), printed as upper-case hex::

    IPv4: ip(4) | port(int32) | commitlog offset(int64)   = 16 bytes = 32 hex chars
    IPv6: ip(16) | port(int32) | commitlog offset(int64)  = 28 bytes = 56 hex chars
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
