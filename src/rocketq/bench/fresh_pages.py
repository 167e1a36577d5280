"""What a fresh page of a segment costs on this machine, depending on how long memory was left free.

``python -m rocketq.bench.fresh_pages [--dir D] [--mib 1024] [--pauses 0,2.5,0,10,0]``

For each pause: wait that long, then create a fallocated file (as a commitlog segment is made), map
it, ``MADV_POPULATE_READ`` it whole (the kernel zeroes every page: ext4 reads unwritten extents as
zeros), write it, and delete it; the populate's CPU seconds per GiB are printed with the load
average.  The file deleted at the end of one step frees the memory the next step gets first.

On a bare machine every step costs about the same.  On a VM whose guest reports free memory to the
host (virtio-balloon free page reporting) memory left free for a couple of seconds goes back to the
host, and touching it again costs a host-side fault per page: short pauses are cheap, long ones
are not (BENCHMARKS.md, "What a fresh page costs on this VM").
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import tempfile
import time
from pathlib import Path

MADV_POPULATE_READ = 22
GIB = 1 << 30
WRITE_CHUNK_BYTES = 1 << 20


def populate_cost_s_per_gib(directory: Path, size: int) -> float:
    """CPU seconds (this thread) per GiB to populate a fresh fallocated *size*-byte file's mapping."""
    path = directory / "fresh-pages.seg"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
        mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        try:
            madvise = ctypes.CDLL(None, use_errno=True).madvise
            madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
            exported = ctypes.c_char.from_buffer(mm)
            base = ctypes.addressof(exported)
            del exported
            t0 = time.thread_time()
            if madvise(base, size, MADV_POPULATE_READ) != 0:
                raise OSError(ctypes.get_errno(), "madvise(MADV_POPULATE_READ) failed (Linux 5.14+ needed)")
            spent = time.thread_time() - t0
            chunk = b"\x01" * WRITE_CHUNK_BYTES
            for off in range(0, size - WRITE_CHUNK_BYTES + 1, WRITE_CHUNK_BYTES):
                mm[off:off + WRITE_CHUNK_BYTES] = chunk
        finally:
            mm.close()
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return spent * GIB / size


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, help="where the file goes [default: the temporary directory]")
    ap.add_argument("--mib", type=int, default=1024, help="file size in MiB")
    ap.add_argument("--pauses", default="0,2.5,0,10,0", help="seconds to wait before each step, comma-separated")
    args = ap.parse_args(argv)
    pauses = [float(p) for p in args.pauses.split(",")]
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for pause in pauses:
            time.sleep(pause)
            cost = populate_cost_s_per_gib(Path(tmp), args.mib << 20)
            print(f"after {pause:5.1f} s free: populate {cost:.3f} CPU-s per GiB (load {os.getloadavg()[0]:.1f})",
                  flush=True)


if __name__ == "__main__":
    main()
