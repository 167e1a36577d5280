"""Queue locks for orderly consumers (RocketMQ ``RebalanceLockManager``; LOCK/UNLOCK_BATCH_MQ 41/42).

An orderly consumer locks the queues rebalancing gave it before consuming them, so that two
clients never consume one queue at the same time during a rebalance.  A lock belongs to a client
id and lapses ``LOCK_EXPIRE_S`` after its last renewal (clients renew every 20 s).
"""

from __future__ import annotations

import time

LOCK_EXPIRE_S = 60.0


class QueueLocks:
    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._locks: dict[tuple[str, str, str, int], tuple[str, float]] = {}   # (group, topic, broker, qid)

    def try_lock(self, group: str, client_id: str, queues: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
        """Lock (or renew) what is free or already ours; returns the queues now held by *client_id*."""
        now = self._clock()
        held = []
        for topic, broker, qid in queues:
            key = (group, topic, broker, qid)
            owner = self._locks.get(key)
            if owner is None or owner[0] == client_id or now - owner[1] > LOCK_EXPIRE_S:
                self._locks[key] = (client_id, now)
                held.append((topic, broker, qid))
        return held

    def unlock(self, group: str, client_id: str, queues: list[tuple[str, str, int]]) -> None:
        for topic, broker, qid in queues:
            key = (group, topic, broker, qid)
            if self._locks.get(key, ("",))[0] == client_id:
                del self._locks[key]
