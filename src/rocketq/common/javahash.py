"""Java's ``String.hashCode`` in plain Python.

RocketMQ stores ``String.hashCode`` of the TAGS property in every consume-queue unit and of
``topic#key`` in every index entry, so files written by rocketq and by RocketMQ only mean the
same thing if we compute exactly the same 32-bit value:

    h = 0; for each UTF-16 code unit c: h = 31*h + c   (mod 2**32, read as a signed int32)

The dispatcher computes these natively (``native/src/javahash.rs``) for every record; this module
is for the few hashes Python needs (a subscription's tags, a query's key, the offline checker) and
is the reference the native code is tested against.
"""

from __future__ import annotations

import sys
from functools import lru_cache

_MASK32 = 0xFFFFFFFF
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def _to_int32(h: int) -> int:
    return h - (1 << 32) if h & 0x80000000 else h


def java_hash(s: str) -> int:
    """``String.hashCode`` of *s* as a signed 32-bit int."""
    h = 0
    if s.isascii():
        for c in s.encode():
            h = (31 * h + c) & _MASK32
    else:
        for c in memoryview(s.encode(_UTF16)).cast("H"):
            h = (31 * h + c) & _MASK32
    return _to_int32(h)


@lru_cache(maxsize=4096)
def tag_hash(tags: str | None) -> int:
    """The consume-queue tags code: hashCode of the TAGS property, 0 when there is none."""
    return java_hash(tags) if tags else 0


def index_hash(key: str) -> int:
    """IndexFile key hash: ``abs(hashCode)``, with Integer.MIN_VALUE mapped to 0 as RocketMQ does."""
    h = java_hash(key)
    return 0 if h == -(1 << 31) else abs(h)
