"""A small real file system for the disk-full tests, and a filler that leaves exactly N bytes free.

:func:`small_fs` mounts a tmpfs of the given size (``mount -t tmpfs -o size=...``), or an ext4
image on a loop device: both need root (or CAP_SYS_ADMIN), and the test is skipped with the reason
where mounting is not permitted.  tmpfs honours ``posix_fallocate`` like a disk file system (a
reservation past the size fails with ENOSPC, and reserved pages never need more space); ext4 adds
what a real disk does besides (a failed fallocate leaves blocks allocated until the file goes, a
new directory needs a block).  :class:`Filler` takes space with one preallocated file: ``leave(n)`` grows or shrinks
it so that exactly *n* bytes stay free, ``remove()`` gives everything back.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest

PAGE = 4096
MOUNT_TIMEOUT_S = 10
FILL_ATTEMPTS = 5


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


@contextmanager
def small_fs(tmp_path: Path, size_bytes: int, kind: str = "tmpfs"):
    """A fresh file system of *size_bytes* mounted under *tmp_path*; unmounted afterwards.  *kind* is
    ``tmpfs`` or ``ext4`` (an image file on a loop device, made with ``mkfs.ext4``)."""
    mnt = tmp_path / f"fs-{uuid.uuid4().hex[:8]}"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip(f"mounting a small {kind} for the disk-full tests needs root")
    if kind == "tmpfs":
        cmd = ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(mnt)]
    else:
        image = tmp_path / f"{mnt.name}.img"
        with open(image, "wb") as fh:
            fh.truncate(size_bytes)
        made = _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-b", str(PAGE), str(image)])
        if made.returncode != 0:
            pytest.skip(f"cannot make an ext4 image here: {made.stderr.strip() or made.returncode}")
        cmd = ["mount", "-o", "loop", str(image), str(mnt)]
    res = _run(cmd)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a {kind} here: {res.stderr.strip() or res.returncode}")
    try:
        yield mnt
    finally:
        _unmount(mnt)


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S, check=False)
    except FileNotFoundError as exc:
        return subprocess.CompletedProcess(cmd, 127, "", str(exc))


def _unmount(mnt: Path) -> None:
    import gc
    gc.collect()                       # mappings of closed stores go, so the mount is not busy
    res = subprocess.run(["umount", str(mnt)], capture_output=True, text=True, timeout=MOUNT_TIMEOUT_S, check=False)
    if res.returncode != 0:            # something still maps a file (a failed test): detach it lazily
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=MOUNT_TIMEOUT_S, check=False)


class Filler:
    """One file that takes the space the test does not want the store to have."""

    def __init__(self, mnt: Path):
        self.mnt = mnt
        self.path = mnt / "filler"

    def leave(self, free: int) -> None:
        """Resize the filler so that exactly *free* bytes (a multiple of 4096) are free.  Call it while
        the store makes no file (after ``wait_dispatched``): a file made meanwhile changes the count."""
        assert free % PAGE == 0, "tmpfs counts whole pages"
        for _ in range(FILL_ATTEMPTS):
            have = self.path.stat().st_size if self.path.exists() else 0
            target = have + free_bytes(self.mnt) - free
            assert target >= 0, f"cannot leave {free} bytes free: only {free_bytes(self.mnt) + have} can be"
            try:
                with open(self.path, "ab") as fh:
                    if target < have:
                        os.ftruncate(fh.fileno(), target)
                    elif target > have:
                        os.posix_fallocate(fh.fileno(), 0, target)
            except OSError as exc:          # the store took space between the count and the fill
                if exc.errno != errno.ENOSPC:
                    raise
                continue
            if free_bytes(self.mnt) == free:
                return
        pytest.fail(f"could not leave exactly {free} bytes free (now {free_bytes(self.mnt)})")

    def leave_used(self, percent: float) -> None:
        """Resize the filler so that the file system is *percent* % used (to the page)."""
        st = os.statvfs(self.mnt)
        total = st.f_blocks * st.f_frsize
        self.leave(int(total * (100 - percent) / 100) // PAGE * PAGE)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


def wait_until(predicate, timeout_s: float = 15.0, what: str = "") -> None:
    """Return as soon as *predicate()* holds; fail the test with *what* after *timeout_s*."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what or predicate}")
        time.sleep(0.01)


def store_verify(path: Path) -> subprocess.CompletedProcess:
    """``rocketq store verify PATH`` as a user runs it."""
    return subprocess.run([sys.executable, "-m", "rocketq.cli.main", "store", "verify", str(path)],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ), check=False)
