"""RocketMQ's ``DataVersion``: a change counter the NameServer uses to skip unchanged registrations.

Shared by the broker (which bumps it on every config change) and the NameServer (which compares it).
``stateVersion`` is RocketMQ 5's controller-mode fence: a broker in controller mode sets it to the
master epoch it serves under whenever its role changes, and the NameServer refuses a registration
for a broker id held by another address whose state version is newer (a replaced master's late or
periodic registration must not take the route back from its successor).
"""

from __future__ import annotations

import time
from dataclasses import dataclass


@dataclass
class DataVersion:
    state_version: int = 0
    timestamp: int = 0
    counter: int = 0

    def next(self, now_ms: int | None = None, state_version: int | None = None) -> None:
        """A new version (RocketMQ's ``nextVersion``); with *state_version*, under that master epoch."""
        self.timestamp = now_ms if now_ms is not None else int(time.time() * 1000)
        self.counter += 1
        if state_version is not None:
            self.state_version = state_version

    def to_json(self) -> dict:
        return {"stateVersion": self.state_version, "timestamp": self.timestamp, "counter": self.counter}

    @classmethod
    def from_json(cls, data) -> "DataVersion":
        """Lenient: anything but an object reads as version zero; nulls as 0."""
        if not isinstance(data, dict):
            return cls()
        counter = data.get("counter", 0)
        if isinstance(counter, dict):          # fastjson writes AtomicLong as a number, some tools as {"value":..}
            counter = counter.get("value", 0)
        return cls(int(data.get("stateVersion", 0) or 0), int(data.get("timestamp", 0) or 0), int(counter or 0))
