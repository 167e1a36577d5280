"""Client-side ids: message unique keys (RocketMQ ``MessageClientIDSetter``) and client ids.

A unique key is 16 bytes as 32 upper-case hex characters::

    ip (4) | pid (2) | per-process random (4) | ms since the start of this month (4) | counter (2)

so ids from one process sort by time and stay unique across processes and restarts.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import os
import secrets
import socket
import time

_COUNTER = itertools.count()


def local_ip() -> str:
    """The address other hosts would see (no packet is sent); 127.0.0.1 when there is no network."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


_PREFIX = (socket.inet_aton(local_ip()) + (os.getpid() & 0xFFFF).to_bytes(2, "big")
           + secrets.randbits(32).to_bytes(4, "big")).hex().upper()


def _month_start_ms() -> int:
    now = _dt.datetime.now()
    return int(now.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp() * 1000)


_MONTH_START = _month_start_ms()


def unique_key() -> str:
    """32 hex characters; itertools.count is atomic under the GIL, so no lock is needed."""
    since = (int(time.time() * 1000) - _MONTH_START) & 0xFFFFFFFF
    return f"{_PREFIX}{since:08X}{next(_COUNTER) & 0xFFFF:04X}"


def unique_keys(n: int) -> list[str]:
    """*n* unique keys at once (one clock read; the counter values are taken one by one, so keys made
    by other threads in between stay distinct)."""
    head = f"{_PREFIX}{(int(time.time() * 1000) - _MONTH_START) & 0xFFFFFFFF:08X}"
    return [f"{head}{c & 0xFFFF:04X}" for c in itertools.islice(_COUNTER, n)]


_CLIENTS = itertools.count(1)


def client_id() -> str:
    """``ip@pid#n``: unique per client object, so several consumers in one process rebalance apart."""
    return f"{local_ip()}@{os.getpid()}#{next(_CLIENTS)}"
