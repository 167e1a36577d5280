"""The column pool (`native/src/columns/pool.rs`): a chunk's column buffers, once Python drops them,
fill the next chunk's columns; a buffer Python still holds is never reused.

Reuse is seen through the process's minor page faults: without the pool, every chunk's ~10 MB of
fresh buffers is faulted in and zeroed again (glibc gives large freed blocks back to the kernel);
with it, the second decode of the same records touches pages it already has.
"""

from __future__ import annotations

import gc
import resource

import pytest
from reference import Rec, encode_log

pa = pytest.importorskip("pyarrow")

from rocketq import _native  # noqa: E402
from rocketq.spark.decode import walked_batch  # noqa: E402

BASE = 1 << 20
PAGE = resource.getpagesize()
ROWS = 40_000


def _segment(body: bytes, rows: int = ROWS) -> bytes:
    recs = [Rec("T", 1, 0, 0, 1, bytes(4), 1, 0, 0, body, b"KEYS\x01k1\x02UNIQ_KEY\x01ABCDEF0123\x02")] * rows
    log, _ = encode_log(recs, phys=BASE, store_ts=1_800_000_000_000, store_ip=bytes(4), store_port=1,
                        next_offsets={})
    return log


def _batch(log: bytes) -> pa.RecordBatch:
    cols = _native.walk_columns(log, BASE, 0, len(log), len(log), ROWS, check_crc=True)
    assert cols["rows"] == ROWS and not cols["more"] and cols["error"] is None
    return walked_batch(cols, "b")


def _minor_faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def test_a_dropped_chunks_buffers_fill_the_next_chunk_without_new_pages():
    log = _segment(b"x" * 200)
    body_bytes = ROWS * 200
    _batch(log)                                   # first chunk: the buffers are made, then dropped
    gc.collect()
    before = _minor_faults()
    batch = _batch(log)
    faults = _minor_faults() - before
    assert batch.column("body").buffers()[2].size >= body_bytes
    # the body column alone is ~2,000 pages; fresh buffers for every column fault in more than that
    assert faults < body_bytes // PAGE // 4, f"{faults} minor faults decoding a chunk into reused buffers"


def test_buffers_python_still_holds_are_not_reused():
    first = _batch(_segment(b"a" * 64))
    want = first.to_pylist()[:3] + first.to_pylist()[-3:]
    for fill in (b"b", b"c", b"d"):              # more chunks while the first batch is alive
        later = _batch(_segment(fill * 64))
        assert later.column("body")[0].as_py() == fill * 64
        del later
    assert first.to_pylist()[:3] + first.to_pylist()[-3:] == want
    assert first.column("body").buffers()[2].to_pybytes() == b"a" * 64 * ROWS
