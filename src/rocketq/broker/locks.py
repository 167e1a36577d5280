"""Queue locks for orderly consumers (RocketMQ ``RebalanceLockManager``; LOCK/UNLOCK_BATCH_MQ 41/42).

An orderly consumer locks the queues rebalancing gave it before consuming them, so that two
clients never consume one queue at the same time during a rebalance.  A lock belongs to a client
id and lapses ``LOCK_EXPIRE_S`` after its last renewal (clients renew every 20 s).

A client that leaves its group (UNREGISTER_CLIENT, or no heartbeat for the channel expiry) loses its
locks in that group at once, and a client whose connection closes loses all of its locks
(:meth:`QueueLocks.release`).  Apache RocketMQ keeps them until they lapse, and that matters because
of a race in its own client: the periodic lock renewal (``lockAll``, every 20 s, from a snapshot of the client's queues) can reach the broker after
the unlock the client's shutdown sends, re-locking queues nobody consumes any more; the group's
other members then cannot lock them for up to ``LOCK_EXPIRE_S``.  A member that stays keeps that
window (the broker cannot tell a stale renewal from a live one): the lock lapses.
"""

from __future__ import annotations

import logging
import time

log = logging.getLogger(__name__)

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

    def release(self, client_id: str, group: str | None = None) -> int:
        """Drop every lock *client_id* holds in *group* (every group when None): it left; returns how many."""
        mine = [key for key, (owner, _) in self._locks.items()
                if owner == client_id and (group is None or key[0] == group)]
        for key in mine:
            del self._locks[key]
        if mine:
            log.info("released %d queue lock(s) of %s in %s: the client left", len(mine), client_id,
                     group or "every group")
        return len(mine)
