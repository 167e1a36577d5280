"""Leadership epochs of a broker's CommitLog (RocketMQ 5's epoch file, controller mode).

Every leadership term of a broker set has an epoch number and the CommitLog offset at which the
term's master started writing.  The controller keeps the authoritative history; every broker keeps
the entries that describe where the bytes of its own log came from, in ``<store>/config/epoch.json``
(rewritten atomically: temp file, fsync, rename)::

    {"epochs": [[epoch, startOffset], ...]}        # ascending epoch, ascending start offset

Entry ``(e, s)`` says: the bytes from ``s`` up to the next entry's start offset (or the log end)
were written by the master of epoch ``e``.  A master appends its own entry when it takes over (its
start offset is its log end then); a slave adopts the controller's history once it knows its log is
a prefix of the current master's.

:func:`consistent_end` is where a log stops agreeing with the authoritative history: take the last
local entry that is also in the history (same epoch *and* start offset); the bytes of that term are
common up to the start of the next term in the history and up to the next local entry (a local term
the history does not know, an unconfirmed takeover, is divergent from its first byte).  Bytes past
that point are a divergent tail - written by a master that was replaced, never acknowledged under
SYNC_MASTER - and are cut before the broker follows the new master.
"""

from __future__ import annotations

import logging
from pathlib import Path

from rocketq.store.config_files import read_json, write_json

log = logging.getLogger(__name__)

Epoch = tuple[int, int]          # (epoch, start offset)
FILE_NAME = "epoch.json"


def normalize(entries) -> list[Epoch]:
    out = [(int(e), int(s)) for e, s in entries or ()]
    for (e1, s1), (e2, s2) in zip(out, out[1:]):
        if not (e1 < e2 and s1 <= s2):
            raise ValueError(f"epoch history is not ascending: {(e1, s1)} then {(e2, s2)}")
    return out


def consistent_end(local: list[Epoch], local_end: int, history: list[Epoch]) -> int:
    """The offset up to which a log ending at *local_end*, with epoch entries *local*, agrees with
    the authoritative *history*; ``local_end`` itself when nothing has to be cut."""
    if not history:
        return local_end
    known = set(history)
    common = [i for i, entry in enumerate(local) if entry in known]
    if not common:
        # no term in common: the log predates the controller (or is empty); what lies before the
        # first term's start came from before the first election and is kept
        return min(local_end, history[0][1])
    i = common[-1]
    epoch = local[i][0]
    end = local_end
    later_local = local[i + 1:]
    if later_local:
        end = min(end, later_local[0][1])
    later_history = [s for e, s in history if e > epoch]
    if later_history:
        end = min(end, later_history[0])
    return end


class EpochFile:
    def __init__(self, store_path: Path | str):
        self.path = Path(store_path) / "config" / FILE_NAME
        self.entries: list[Epoch] = []

    def load(self) -> EpochFile:
        self.entries = normalize((read_json(self.path) or {}).get("epochs"))
        return self

    @property
    def last_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def append(self, epoch: int, start_offset: int) -> None:
        """A takeover: this broker is the master of *epoch* from *start_offset* on."""
        entries = [e for e in self.entries if e[0] < epoch]
        if entries and entries[-1][1] > start_offset:
            raise ValueError(f"epoch {epoch} cannot start at {start_offset}: epoch {entries[-1][0]} "
                             f"started later, at {entries[-1][1]}")
        self._write(entries + [(epoch, start_offset)])
        log.info("epoch %d starts at CommitLog offset %d (%s)", epoch, start_offset, self.path)

    def adopt(self, history: list[Epoch]) -> None:
        """Take the controller's history (the log was found to be a prefix of the current master's)."""
        history = normalize(history)
        if history != self.entries:
            self._write(history)

    def _write(self, entries: list[Epoch]) -> None:
        entries = normalize(entries)
        write_json(self.path, {"epochs": [list(e) for e in entries]})
        self.entries = entries
