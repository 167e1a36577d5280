"""Java's ``String.hashCode`` in Python, scalar and vectorised.

RocketMQ stores ``String.hashCode`` of the TAGS property in every consume-queue unit and of
``topic#key`` in every index entry, so files written by rocketq and by RocketMQ only mean the
same thing if we compute exactly the same 32-bit value:

    h = 0; for each UTF-16 code unit c: h = 31*h + c   (mod 2**32, read as a signed int32)

The vectorised form evaluates the same polynomial for many strings at once with numpy:
``h(s) = sum(c_j * 31**(n-1-j))`` with uint64 arithmetic, which wraps modulo 2**64 and therefore
also modulo 2**32.  ``h(prefix + s) = h(prefix) * 31**len(s) + h(s)`` lets a fixed prefix such as
``topic#`` be folded in without re-hashing it.
"""

from __future__ import annotations

import sys
from functools import lru_cache

import numpy as np

_MASK32 = 0xFFFFFFFF
_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"
_MAX_POW = 1 << 16
_POW31 = np.empty(_MAX_POW, dtype=np.uint64)
_POW31[0] = 1
for _i in range(1, 64):
    _POW31[_i] = (int(_POW31[_i - 1]) * 31) & _MASK32
_filled = 64
SCALAR_MAX = 4                      # java_hash_many of this few strings hashes them one by one


def _pow31_table(n: int) -> np.ndarray:
    """Powers of 31 modulo 2**32 for exponents < n (grown on demand, never shrunk)."""
    global _filled
    if n > _filled:
        if n > _MAX_POW:
            raise ValueError(f"string of {n} UTF-16 units is longer than the hash table supports")
        for i in range(_filled, n):
            _POW31[i] = (int(_POW31[i - 1]) * 31) & _MASK32
        _filled = n
    return _POW31


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


def java_hash_many(strings: list[str], prefix: str = "") -> np.ndarray:
    """hashCode(prefix + s) for every s, as an int64 array of signed 32-bit values."""
    n = len(strings)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    if n <= SCALAR_MAX:             # the vectorised form has ~12 us of fixed cost
        return np.array([java_hash(prefix + s) for s in strings], dtype=np.int64)
    joined = "".join(strings)
    if joined.isascii():
        units = np.frombuffer(joined.encode(), dtype=np.uint8).astype(np.uint64)
        lengths = np.fromiter(map(len, strings), dtype=np.int64, count=n)
    else:
        units = np.frombuffer(joined.encode(_UTF16), dtype=np.uint16).astype(np.uint64)
        lengths = np.fromiter((len(s.encode(_UTF16)) >> 1 for s in strings), dtype=np.int64, count=n)
    pow31 = _pow31_table(int(lengths.max()) + 1 if n else 1)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    total = int(lengths.sum())
    result = np.zeros(n, dtype=np.uint64)
    if total:
        # exponent of each unit inside its own string: len - 1 - position
        pos = np.arange(total, dtype=np.int64) - np.repeat(starts, lengths)
        expo = np.repeat(lengths - 1, lengths) - pos
        terms = units * pow31[expo]
        nonempty = lengths > 0
        result[nonempty] = np.add.reduceat(terms, starts[nonempty])
    if prefix:
        result = result + np.uint64(java_hash(prefix) & _MASK32) * pow31[lengths]
    result &= np.uint64(_MASK32)
    signed = result.astype(np.int64)
    signed[signed >= (1 << 31)] -= 1 << 32
    return signed


def index_hash_many(keys: list[str], prefix: str = "") -> np.ndarray:
    """Vectorised :func:`index_hash` of ``prefix + key`` (int64 array of non-negative values)."""
    h = java_hash_many(keys, prefix)
    h = np.abs(h)
    h[h == (1 << 31)] = 0
    return h
