"""Durability checked, not just stated: how many sync calls a server makes per acknowledged message.

The verification pass is separate from the timed runs and untimed.  For each system and durability
mode, a fresh server is started, warmed (connections, routes and topics made), and then
``strace -f -c`` is attached to every process of the server (``-p``, all threads) while ``n``
messages are sent one at a time, each waiting for its acknowledgement.  With one message in flight,
a server that makes a message durable before acknowledging it cannot share one sync between two
messages, so it must make at least one sync call per acknowledged message; a server that syncs on
a timer makes a handful over the whole pass.  ``SYNCS_PER_ACK_FOR_SYNC`` is the line between them.

What the count does not show: whether the sync happened before or after the reply went out (a
server could fsync right after answering), and syncs issued through io_uring (none of the systems
compared uses it).  The figure is the count of ``SYNC_CALLS`` over all threads, including the
server's own timers (a periodic flush lands in the count too), divided by the acknowledged sends.

The parser is pure (text in, counts out); :class:`StraceCounter` is the thin process wrapper.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SYNC_CALLS = ("fsync", "fdatasync", "msync", "sync_file_range", "sync", "syncfs")
SYNCS_PER_ACK_FOR_SYNC = 0.95      # at or above: the server syncs for every acknowledged send
WARM_SENDS = 50                    # sends before the count starts
ATTACH_TIMEOUT_S = 20.0
DETACH_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class SyncCount:
    """Sync calls a server made while ``acks`` one-at-a-time sends were acknowledged."""
    acks: int
    calls: dict[str, int] = field(default_factory=dict)       # syscall name -> calls

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    @property
    def per_ack(self) -> float:
        return self.total / self.acks if self.acks else 0.0

    @property
    def syncs_every_ack(self) -> bool:
        return self.acks > 0 and self.per_ack >= SYNCS_PER_ACK_FOR_SYNC

    def to_dict(self) -> dict:
        return {"acks": self.acks, "calls": dict(self.calls), "syncs": self.total,
                "syncs_per_ack": round(self.per_ack, 4), "syncs_every_ack": self.syncs_every_ack}


def parse_summary(text: str) -> dict[str, int]:
    """Successful calls per sync syscall from ``strace -c`` output; an absent syscall made none.

    The table's rows are ``% time  seconds  usecs/call  calls  [errors]  syscall``: calls is the
    fourth field, and errors (blank when there were none) is counted in it, so it is taken off."""
    calls = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) in (5, 6) and fields[-1] in SYNC_CALLS and fields[3].isdigit():
            errors = int(fields[4]) if len(fields) == 6 else 0
            calls[fields[-1]] = calls.get(fields[-1], 0) + int(fields[3]) - errors
    return calls


def strace_missing() -> str | None:
    """None when strace can be run here, else why the check cannot be made."""
    return None if shutil.which("strace") else "strace is not installed (apt-get install strace)"


def _threads(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:          # the process ended
        return []


def _tracer(tid: int) -> int:
    try:
        with open(f"/proc/{tid}/status") as f:
            for line in f:
                if line.startswith("TracerPid:"):
                    return int(line.split()[1])
    except FileNotFoundError:
        pass
    return -1


class StraceCounter:
    """``strace -f -c`` attached to *pids* (and all their threads) for the life of the ``with``.

    Entering returns once every thread of every pid is traced (``TracerPid`` in ``/proc``); leaving
    detaches (SIGINT) and leaves the counts in :attr:`calls`.  Attaching can fail (no ptrace
    permission in a container): :class:`RuntimeError` with strace's own words."""

    def __init__(self, pids: list[int]):
        assert pids, "nothing to attach to"
        self.pids, self.calls = pids, {}

    def __enter__(self) -> StraceCounter:
        self._dir = tempfile.TemporaryDirectory()
        self._out = Path(self._dir.name) / "strace.txt"
        self._err = open(Path(self._dir.name) / "stderr.txt", "w+")
        cmd = ["strace", "-f", "-c", "-e", "trace=" + ",".join(SYNC_CALLS), "-o", str(self._out)]
        for pid in self.pids:
            cmd += ["-p", str(pid)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self._err)
        try:
            self._wait_attached()
        except BaseException:
            self._stop()
            raise
        return self

    def _wait_attached(self) -> None:
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while True:
            if self.proc.poll() is not None:
                self._err.seek(0)
                raise RuntimeError(f"strace exited ({self._err.read().strip()[-300:]})")
            tids = [t for pid in self.pids for t in _threads(pid)]
            if tids and all(_tracer(t) == self.proc.pid for t in tids):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"strace did not attach to all threads in {ATTACH_TIMEOUT_S:g} s")
            time.sleep(0.05)

    def _stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)         # detach and write the summary
            try:
                self.proc.wait(DETACH_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._err.close()

    def __exit__(self, *exc) -> None:
        self._stop()
        try:
            self.calls = parse_summary(self._out.read_text()) if self._out.exists() else {}
        finally:
            self._dir.cleanup()


def count_syncs(system, *, n: int, body: bytes, run) -> SyncCount:
    """Sync calls while *n* one-at-a-time sends are acknowledged by the started *system*.

    ``run`` runs a coroutine to completion (the runner's event loop policy)."""
    run(system.produce_one(WARM_SENDS, body))            # connections, routes, topics: before the count
    with StraceCounter(system.pids()) as counter:
        lat = run(system.produce_one(n, body))
    return SyncCount(acks=len(lat), calls=counter.calls)


def check_durability(systems, root: Path, *, n: int, body: bytes, run, progress=lambda s: None,
                     security=None) -> dict:
    """``{system name: {mode: SyncCount.to_dict() or {"not_measured": why}}}`` for every system's
    async mode and, where it has one, its sync mode; each on a fresh server in its own directory."""
    why_not = strace_missing()
    checks: dict[str, dict] = {}
    for cls in systems:
        for mode in ("async", "sync") if cls.durability.get("sync") else ("async",):
            if why_not:
                checks.setdefault(cls.name, {})[mode] = {"not_measured": why_not}
                continue
            progress(f"durability check: {cls.name}, {mode} mode ({n:,} acknowledged sends under strace)")
            where = root / f"{cls.__name__}-{mode}-fsync"
            where.mkdir()
            system = cls(where, sync=mode == "sync", security=security)
            system.start()
            try:
                checks.setdefault(cls.name, {})[mode] = count_syncs(system, n=n, body=body, run=run).to_dict()
            except RuntimeError as e:             # strace could not attach: say so, do not fail the run
                checks.setdefault(cls.name, {})[mode] = {"not_measured": str(e)}
            finally:
                system.stop()
                shutil.rmtree(where, ignore_errors=True)
    return checks


def syncs_before_ack(check: dict | None, *, documented: bool) -> bool:
    """Whether a mode belongs in the sync-durability scenario: measured to sync for every ack, or,
    when it could not be measured, documented to."""
    if not check or "not_measured" in check:
        return documented
    return bool(check["syncs_every_ack"])
