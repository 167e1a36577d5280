"""RocketMQ's bloom filter for consume-queue bit maps (``org.apache.rocketmq.filter.util.BloomFilter``).

Theory of operation
-------------------
Each SQL92 filter (a consumer group's selector on a topic) owns ``k`` bit positions out of ``m``,
derived from the string ``group#topic``.  At dispatch, a message's bit map (``m`` bits) gets the
positions of every filter it matches; at pull time a unit whose bit map lacks any of a filter's
positions certainly does not match that filter, so its CommitLog record is never read.  Several
filters share the ``m`` bits, so a unit may look like a match when it is not (a false positive,
removed by evaluating the record); it can never look like a mismatch when it matches.

The sizes follow RocketMQ's ``BloomFilter.createByFn(f, n)``: error rate ``f`` % (broker key
``maxErrorRateOfBloomFilter``, 20) for ``n`` filters (``expectConsumerNumUseFilter``, 32):
``k = ceil(log_0.5(f/100))``, ``m = ceil(n * log2(100/f) * log2(e))`` rounded up to whole bytes,
112 bits for the defaults.  The positions are RocketMQ's (Kirsch-Mitzenmacher double hashing on
Guava's ``murmur3_128`` of the UTF-8 string, low and high 32 bits of its first long), so a bit map
rocketq writes is one RocketMQ would read.  Bit ``p`` is bit ``p % 8`` (least significant first) of
byte ``p // 8``, as RocketMQ's ``BitsArray``.  The hash runs only when a filter registers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

_MASK64 = (1 << 64) - 1
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    return k ^ (k >> 33)


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64


def _mix_k2(k2: int) -> int:
    return (_rotl((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64


def murmur3_x64_128(data: bytes, seed: int = 0) -> bytes:
    """MurmurHash3 x64 128 (Guava's ``murmur3_128``): the 16 bytes ``h1`` then ``h2``, little-endian."""
    h1 = h2 = seed & _MASK64
    n = len(data)
    full = n - n % 16
    for i in range(0, full, 16):
        h1 ^= _mix_k1(int.from_bytes(data[i:i + 8], "little"))
        h1 = (_rotl(h1, 27) + h2) & _MASK64
        h1 = (h1 * 5 + 0x52DCE729) & _MASK64
        h2 ^= _mix_k2(int.from_bytes(data[i + 8:i + 16], "little"))
        h2 = (_rotl(h2, 31) + h1) & _MASK64
        h2 = (h2 * 5 + 0x38495AB5) & _MASK64
    tail = data[full:]
    if len(tail) > 8:
        h2 ^= _mix_k2(int.from_bytes(tail[8:], "little"))
    if tail:
        h1 ^= _mix_k1(int.from_bytes(tail[:8], "little"))
    h1 ^= n
    h2 ^= n
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


@dataclass(frozen=True)
class BloomFilter:
    """``k`` hash functions over ``m`` bits for an error rate of ``f`` % with ``n`` filters."""

    f: int
    n: int
    k: int
    m: int

    @classmethod
    def create(cls, f: int, n: int) -> "BloomFilter":
        if not 1 <= f < 100:
            raise ValueError(f"maxErrorRateOfBloomFilter {f} is outside 1..99 (a percentage)")
        if n < 1:
            raise ValueError(f"expectConsumerNumUseFilter {n} must be at least 1")
        rate = f / 100.0
        k = math.ceil(math.log(rate) / math.log(0.5))
        m = math.ceil(n * (math.log(1 / rate) / math.log(2)) * (math.log(math.e) / math.log(2)))
        return cls(f, n, k, 8 * math.ceil(m / 8))

    @property
    def bytes_len(self) -> int:
        return self.m // 8

    def positions(self, text: str) -> tuple[int, ...]:
        """The ``k`` bit positions of *text* (RocketMQ's ``calcBitPositions``)."""
        hash64 = int.from_bytes(murmur3_x64_128(text.encode("utf-8"))[:8], "little")
        hash1, hash2 = _int32(hash64), _int32(hash64 >> 32)
        out = []
        for i in range(1, self.k + 1):
            combined = _int32(hash1 + i * hash2)
            if combined < 0:
                combined = ~combined
            out.append(combined % self.m)
        return tuple(out)

    def bit_map(self, positions) -> bytes:
        """``m`` bits with *positions* set."""
        bits = bytearray(self.bytes_len)
        for p in positions:
            bits[p // 8] |= 1 << (p % 8)
        return bytes(bits)
