"""The compare runner's memory cells: RSS counts the pages of a file the broker maps and writes (its log
segments), private memory does not - the issue asks for the broker's private memory beside RSS."""

import subprocess
import sys
import time

from rocketq.bench.compare.runner import _Sampler

FILE_MB = 96
HEAP_MB = 32
CHILD = f"""
import mmap, sys
f = open(sys.argv[1], "w+b"); f.truncate({FILE_MB} << 20)
m = mmap.mmap(f.fileno(), {FILE_MB} << 20)
for i in range(0, {FILE_MB} << 20, 4096):
    m[i] = 1                                   # every page of the mapped file resident (file-backed)
heap = bytearray({HEAP_MB} << 20)
for i in range(0, len(heap), 4096):
    heap[i] = 1                                # anonymous, private
print("ready", flush=True)
sys.stdin.readline()
"""


def test_private_memory_leaves_out_the_mapped_file_that_rss_counts(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "segment")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        with _Sampler(child.pid) as sampler:
            deadline = time.monotonic() + 10
            while sampler.peak < (FILE_MB + HEAP_MB) << 20 and time.monotonic() < deadline:
                time.sleep(0.05)
        rss_mb, private_mb = sampler.peak / (1 << 20), sampler.peak_private / (1 << 20)
        assert rss_mb >= FILE_MB + HEAP_MB, (rss_mb, private_mb)
        assert HEAP_MB <= private_mb < HEAP_MB + 40, (rss_mb, private_mb)     # the interpreter's own heap too
    finally:
        child.communicate("\n", timeout=10)
