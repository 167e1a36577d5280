"""Limits on what clients can make a server hold: connections, idle time, write backlog, descriptors.

Theory of operation
-------------------
Every listener (remoting broker port, NameServer, HA port, gRPC endpoint) takes one
:class:`ConnectionLimits`, validated once at start-up (RocketMQ's key names where RocketMQ has them,
in :mod:`rocketq.server.config`):

* ``max_connections`` per listener.  Past it a new connection is accepted and closed at once - so the
  kernel's accept queue keeps draining - and the refusals are logged once per
  ``REFUSAL_LOG_INTERVAL_S`` (:class:`Admission`), not once per connection.  0 (the default) means
  "sized from RLIMIT_NOFILE": a quarter of the descriptors (at least ``MIN_RESERVED_DESCRIPTORS``)
  stays for the store's segment files, config writes (``topics.json.tmp``), logs and outgoing
  connections, and the rest is shared by the ``LISTENERS_PER_PROCESS`` listeners of ``rocketq serve``.
  So connections alone can never take the descriptor a config write needs.
* ``idle_timeout_s`` (``serverChannelMaxIdleTimeSeconds``, 120 s as in RocketMQ, whose Netty
  IdleStateHandler closes a channel with neither reads nor writes for that long): a connection with no
  traffic and nothing in flight - a suspended long-poll pull is in flight - is closed.  0 turns it off.
* ``backlog`` (``serverSocketBacklog``, 1024 as in RocketMQ): the listen queue.
* ``write_high_water_bytes`` / ``write_low_water_bytes`` (``writeBufferHighWaterMark`` /
  ``writeBufferLowWaterMark``): answers queued for one connection past the high mark stop the
  server reading that connection (no new request starts) until they drain below the low mark, as
  RocketMQ's server turns a channel's auto-read off while it is not writable.
* ``write_stall_timeout_s``: a connection whose peer takes none of the queued bytes for this long is
  aborted (its memory is freed).  A slow reader that takes some bytes is never cut off.

:func:`raise_open_files_limit` raises the soft RLIMIT_NOFILE to the hard limit at server start-up, as
the JVM that runs RocketMQ does by default (HotSpot's ``-XX:+MaxFDLimit``), so the connection limit
is sized from the real ceiling rather than a shell's 1024.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

try:
    import resource
except ImportError:               # pragma: no cover - not on Windows
    resource = None

log = logging.getLogger("rocketq.remoting")

DEFAULT_IDLE_TIMEOUT_S = 120.0                 # serverChannelMaxIdleTimeSeconds
DEFAULT_BACKLOG = 1024                         # serverSocketBacklog
DEFAULT_WRITE_HIGH_WATER_BYTES = 64 << 10      # answers queued past this pause reading the connection
DEFAULT_WRITE_LOW_WATER_BYTES = 16 << 10       # ... until they drain below this (both asyncio's and
                                               # uvloop's defaults; 64 KiB is Netty's, so RocketMQ's)
DEFAULT_WRITE_STALL_TIMEOUT_S = 30.0           # no byte taken by the peer for this long: abort
LISTENERS_PER_PROCESS = 4                      # remoting, NameServer, HA, gRPC in ``rocketq serve``
RESERVED_DESCRIPTOR_SHARE = 4                  # 1/4 of RLIMIT_NOFILE stays for files, never connections
MIN_RESERVED_DESCRIPTORS = 256
MIN_CONNECTIONS_PER_LISTENER = 16
FALLBACK_OPEN_FILES = 1024                     # where RLIMIT_NOFILE cannot be read
REFUSAL_LOG_INTERVAL_S = 10.0                  # refusals and stall resets: one log line per port this often
IDLE_SWEEPS_PER_TIMEOUT = 4                    # an idle connection closes between T and T * 1.25


@dataclass(frozen=True)
class ConnectionLimits:
    max_connections: int = 0                   # per listener; 0: sized from RLIMIT_NOFILE
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    backlog: int = DEFAULT_BACKLOG
    write_high_water_bytes: int = DEFAULT_WRITE_HIGH_WATER_BYTES
    write_low_water_bytes: int = DEFAULT_WRITE_LOW_WATER_BYTES
    write_stall_timeout_s: float = DEFAULT_WRITE_STALL_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.max_connections < 0:
            raise ValueError(f"serverMaxConnections {self.max_connections} is negative (0: from RLIMIT_NOFILE)")
        if self.idle_timeout_s < 0:
            raise ValueError(f"serverChannelMaxIdleTimeSeconds {self.idle_timeout_s} is negative (0: off)")
        if self.backlog < 1:
            raise ValueError(f"serverSocketBacklog {self.backlog} is below 1")
        if not 0 <= self.write_low_water_bytes < self.write_high_water_bytes:
            raise ValueError(f"writeBufferLowWaterMark {self.write_low_water_bytes} must be at least 0 and below "
                             f"writeBufferHighWaterMark {self.write_high_water_bytes}")
        if self.write_stall_timeout_s <= 0:
            raise ValueError(f"serverWriteStallTimeoutSeconds {self.write_stall_timeout_s} must be positive")

    def connections_limit(self) -> int:
        """The per-listener limit: the configured one, or the default from RLIMIT_NOFILE now."""
        return self.max_connections or default_max_connections()


def open_files_limit() -> int:
    """The soft RLIMIT_NOFILE (``FALLBACK_OPEN_FILES`` where it cannot be read or is unlimited)."""
    if resource is None:
        return FALLBACK_OPEN_FILES
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return FALLBACK_OPEN_FILES if soft == resource.RLIM_INFINITY or soft <= 0 else soft


def default_max_connections(open_files: int | None = None) -> int:
    """Connections one listener may hold when no limit is configured (see the module's theory)."""
    open_files = open_files_limit() if open_files is None else open_files
    reserved = max(MIN_RESERVED_DESCRIPTORS, open_files // RESERVED_DESCRIPTOR_SHARE)
    return max(MIN_CONNECTIONS_PER_LISTENER, (open_files - reserved) // LISTENERS_PER_PROCESS)


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (what a server process does at start-up);
    returns the soft limit in effect afterwards."""
    if resource is None:
        return open_files_limit()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:     # macOS caps the soft limit below an unlimited hard one
            log.info("open files limit stays at %d (raising it to %s failed: %s)", soft, hard, exc)
            return open_files_limit()
        log.info("open files limit raised from %d to %d", soft, hard)
    return open_files_limit()


class IntervalLog:
    """A warning that a flood would repeat per connection, logged at most once per *interval_s*
    with the number of occurrences since the last line (the first occurrence is logged at once)."""

    def __init__(self, *, interval_s: float = REFUSAL_LOG_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.count = 0                         # occurrences since start
        self._interval_s, self._clock = interval_s, clock
        self._unlogged = 0
        self._logged_at: float | None = None

    def __call__(self, emit: Callable[[int], object]) -> None:
        """Count one occurrence; if the interval is over, ``emit(occurrences since the last line)``."""
        self.count += 1
        self._unlogged += 1
        now = self._clock()
        if self._logged_at is None or now - self._logged_at >= self._interval_s:
            emit(self._unlogged)
            self._logged_at, self._unlogged = now, 0


class Admission:
    """The connection limit of one listener: says whether one more connection may stay, and logs
    refusals at most once per ``REFUSAL_LOG_INTERVAL_S`` with how many there were."""

    def __init__(self, what: str, limit: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 1:
            raise ValueError(f"{what}: connection limit {limit} is below 1")
        self.what, self.limit = what, limit
        self._log = IntervalLog(clock=clock)

    @property
    def refused(self) -> int:
        """Connections refused since start."""
        return self._log.count

    def admit(self, open_now: int) -> bool:
        """True if a connection may join the *open_now* already open; else counts a refusal."""
        if open_now < self.limit:
            return True
        self._log(lambda n: log.warning("%s: %d connection(s) refused since the last report: %d open, the limit is %d "
                                        "(serverMaxConnections)", self.what, n, open_now, self.limit))
        return False
