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


def test_magic_search_on_two_cores_matches_one_core(monkeypatch):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    size = 4096
    magic = bytes.fromhex("DAA320A7")
    for trial in range(20):
        data = bytearray(rng.getrandbits(8) for _ in range(size))
        mid = size // 2
        spots = {mid - 5, mid - 4, mid - 3, mid - 2, mid - 1, mid, mid + 1, mid + 2, mid + 3, 4, size - 4}
        spots |= {rng.randrange(4, size - 4) for _ in range(10)}
        for p in sorted(spots)[::2] if trial % 2 else sorted(spots)[1::2]:
            data[p:p + 4] = magic
        buf = bytes(data)
        monkeypatch.setattr(scan, "PARALLEL_MAGIC_MIN_BYTES", 1 << 40)
        serial = scan._magic_positions(buf, 0, size).tolist()
        monkeypatch.setattr(scan, "PARALLEL_MAGIC_MIN_BYTES", 64)
        parallel = scan._magic_positions(buf, 0, size).tolist()
        assert parallel == serial, f"seed {seed} trial {trial}"
        assert serial == sorted(i for i in range(4, size - 3) if buf[i:i + 4] == magic), f"seed {seed}"


def test_windowed_candidate_search_finds_the_same_chain_as_one_search(tmp_path, monkeypatch):
    """Records of 100 B to 40 KiB (so some cross a window end, some are larger than a window),
    then zeros or a torn record: the walk in small windows equals one search over the whole buffer."""
    from rocketq.common.message import Message
    from rocketq.store import MessageStore, StoreConfig
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    with MessageStore(StoreConfig(store_path=tmp_path / "s", commitlog_file_size=4 << 20, message_index_enable=False,
                                  consume_queue_entries=10_000)) as store:
        for i in range(300):
            body = rng.randbytes(rng.choice([100, 900, 5000, 40_000]))
            if i % 7 == 0:
                body = body[:-4] + bytes.fromhex("DAA320A7")          # a magic inside a body
            assert store.put_message(Message(topic="W", body=body, queue_id=0)).ok
        end = store.commitlog.max_offset()
    data = bytearray((tmp_path / "s" / "commitlog" / "00000000000000000000").read_bytes())
    for tail in ("zeros", "torn"):
        if tail == "torn":            # the head of a record whose rest never reached the file
            data[end:end + 48] = (5000).to_bytes(4, "big") + bytes.fromhex("DAA320A7") + rng.randbytes(40)
        monkeypatch.setattr(scan, "FIRST_WINDOW_BYTES", 1 << 40)
        whole = scan.find_records(bytes(data), 0, len(data), parallel=False)
        # windows ending 0..9 bytes past a record start (is the next magic in this window or the next?)
        bounds = [int(whole[0][j]) + k for j in (5, 150) for k in range(10)]
        for first in bounds + [1024, 3000, 4096]:
            monkeypatch.setattr(scan, "FIRST_WINDOW_BYTES", first)
            monkeypatch.setattr(scan, "MAX_WINDOW_BYTES", max(first, rng.choice([8192, 50_000])))
            windowed = scan.find_records(bytes(data), 0, len(data), parallel=False)
            assert whole[2] == windowed[2], f"{tail}, first window {first}, seed {seed}"
            assert whole[0].tolist() == windowed[0].tolist(), f"{tail}, first window {first}, seed {seed}"
            assert whole[1].tolist() == windowed[1].tolist(), f"{tail}, first window {first}, seed {seed}"
        # the torn record's head looks whole to the walk (its CRC check, not this, rejects it)
        assert (whole[2], len(whole[0])) == ((end, 300) if tail == "zeros" else (end + 5000, 301)), f"seed {seed}"
