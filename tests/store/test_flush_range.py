"""A segment's flush writes out the bytes it makes durable, not the warmed zeros after them.

Whether a page of the mapping is dirty is read from the kernel: ``/proc/self/pagemap`` gives the
page frame behind a virtual page and ``/proc/kpageflags`` its flags (bit 4, PG_dirty).  Both need
root; without them the tests are skipped (they run as root here).
"""

from __future__ import annotations

import ctypes
import struct

import pytest

from rocketq.store.mapped_file import OS_PAGE_SIZE, MappedFile, file_name

SIZE = 256 * OS_PAGE_SIZE
KPF_DIRTY = 4


def _kernel_page_flags_readable() -> bool:
    try:
        with open("/proc/kpageflags", "rb") as f:
            f.read(8)
        return True
    except OSError:
        return False


pytestmark = pytest.mark.skipif(not _kernel_page_flags_readable(), reason="needs /proc/kpageflags (root)")


def _dirty(mf: MappedFile, page: int) -> bool:
    exported = ctypes.c_char.from_buffer(mf.buffer())
    base = ctypes.addressof(exported)
    del exported
    with open("/proc/self/pagemap", "rb") as f:
        f.seek((base // OS_PAGE_SIZE + page) * 8)
        entry = struct.unpack("<Q", f.read(8))[0]
    assert entry >> 63, f"page {page} is not mapped"
    with open("/proc/kpageflags", "rb") as f:
        f.seek((entry & ((1 << 55) - 1)) * 8)
        return bool(struct.unpack("<Q", f.read(8))[0] >> KPF_DIRTY & 1)


@pytest.fixture
def warmed(tmp_path):
    mf = MappedFile(tmp_path / file_name(0), SIZE)
    mf.warm()                                # every page dirty (zeros), as warm_mapped_file_enable does
    yield mf
    mf.close(flush=False)


def test_flush_leaves_the_warmed_pages_after_the_data_dirty(warmed):
    warmed.append(b"a" * (3 * OS_PAGE_SIZE + 10))
    assert all(_dirty(warmed, p) for p in (0, 3, 4, 200))
    assert warmed.flush() == 3 * OS_PAGE_SIZE + 10
    assert [_dirty(warmed, p) for p in (0, 3)] == [False, False]        # on disk
    assert [_dirty(warmed, p) for p in (4, 200)] == [True, True]        # not written out: no data there
    warmed.append(b"b" * OS_PAGE_SIZE)                                  # the next flush: from page 3 on
    warmed.flush()
    assert [_dirty(warmed, p) for p in (3, 4, 5, 200)] == [False, False, True, True]


def test_bytes_zeroed_past_the_write_position_are_flushed_with_the_next_data(warmed):
    warmed.append(b"a" * (8 * OS_PAGE_SIZE))
    warmed.flush()
    assert warmed.truncate_tail(OS_PAGE_SIZE) > 0           # recovery cut the tail: stale bytes zeroed
    warmed.append(b"c" * 10)
    warmed.flush()
    assert not any(_dirty(warmed, p) for p in (1, 5, 7, 200)), "the whole file is synced after a cut"
