"""The recovery scanner's vectorised parts against straightforward references."""

import random
import zlib

import numpy as np

from rocketq.store import scan


def _bodies(seed: int, n: int):
    rng = random.Random(seed)
    lengths = [rng.randrange(1, 40) for _ in range(n)]
    buf = bytearray(rng.getrandbits(8) for _ in range(sum(lengths) + 88 * n + 100))
    pos = np.cumsum([0] + [88 + n_ for n_ in lengths[:-1]]).astype(np.int64)
    body_len = np.array(lengths, dtype=np.int64)
    stored = np.array([zlib.crc32(buf[p + 88:p + 88 + n_]) & 0x7FFFFFFF for p, n_ in zip(pos.tolist(), lengths)])
    return buf, pos, body_len, stored


def test_parallel_crc_check_finds_the_first_bad_record_in_either_half(monkeypatch):
    seed = random.randrange(1 << 30)
    monkeypatch.setattr(scan, "PARALLEL_CRC_MIN_RECORDS", 100)
    buf, pos, body_len, stored = _bodies(seed, 1000)
    assert scan._first_crc_mismatch_parallel(buf, pos, body_len, stored) is None, f"seed {seed}"
    for bad in (3, 700):            # first half (parent) and second half (forked child)
        broken = stored.copy()
        broken[bad] ^= 1
        broken[bad + 50] ^= 1
        assert scan._first_crc_mismatch_parallel(buf, pos, body_len, broken) == bad, f"seed {seed}"


def test_gather_be_matches_int_from_bytes():
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    data = bytes(rng.getrandbits(8) for _ in range(4096))
    u8 = np.frombuffer(data, dtype=np.uint8)
    at = np.array(sorted(rng.randrange(0, 4096 - 8) for _ in range(300)), dtype=np.int64)
    for width in (1, 2, 4, 8):
        want = [int.from_bytes(data[a:a + width], "big", signed=width == 8) for a in at.tolist()]
        assert scan.gather_be(u8, at, width).tolist() == want, f"width {width} seed {seed}"
    signed = [int.from_bytes(data[a:a + 4], "big", signed=True) for a in at.tolist()]
    assert scan.gather_be(u8, at, 4, signed=True).tolist() == signed, f"seed {seed}"
