"""Which ``rocketq controller`` process is the active one: an etcd lease and a leader key.

Theory of operation
-------------------
Every controller process grants itself a lease of ``ttl_s`` seconds, keeps it alive every third of it,
and registers ``<prefix>members/<address>`` under it (the peers that ``getControllerMetaData`` lists).
It campaigns with one transaction: "if ``<prefix>leader`` does not exist, create it with my address
under my lease".  The one that succeeds is active; its entry's ``create_revision`` is the token every
state write compares against (:mod:`rocketq.controller.state`).  The others read who is active and
*watch* the leader key: its deletion (the active process's lease expired after a crash or a partition,
or it resigned at shutdown) wakes them at once and they campaign again - no polling.  A watch that
misses an event is covered by campaigning again every ``ttl_s`` anyway.

The active process stops acting as such as soon as its lease can no longer be known to be valid:
``ttl_s`` after the last keep-alive that etcd answered was *sent* - so by the time etcd expires the
lease and a standby takes over, the old one has already stopped.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable

from rocketq.controller.etcd import EtcdClient, EtcdError, compare, delete_op, put_op

log = logging.getLogger(__name__)

DEFAULT_LEASE_TTL_S = 2            # etcd's minimum with its default election timeout is about this
RETRY_S = 0.5                      # after etcd was unreachable


class Leadership:
    def __init__(self, etcd: EtcdClient, prefix: str, address: str, *, ttl_s: int = DEFAULT_LEASE_TTL_S,
                 on_elected: Callable[[int], Awaitable[None]], on_lost: Callable[[], Awaitable[None]]):
        self.etcd = etcd
        self.prefix = prefix
        self.address = address
        self.ttl_s = ttl_s
        self.on_elected = on_elected
        self.on_lost = on_lost
        self.leader_key = f"{prefix}leader"
        self.leader_address: str | None = None
        self.lease_id = 0
        self.valid_until = 0.0             # loop time until which our lease is surely alive
        self.active = False
        self._changed = asyncio.Event()

    def is_active(self) -> bool:
        return self.active and asyncio.get_running_loop().time() < self.valid_until

    async def peers(self) -> list[str]:
        kvs, _ = await self.etcd.get_prefix(f"{self.prefix}members/")
        return [kv.key.rsplit("/", 1)[-1] for kv in kvs]

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sent = loop.time()
                self.lease_id, ttl = await self.etcd.lease_grant(self.ttl_s)
                self.valid_until = sent + ttl
                await self.etcd.txn([], [put_op(f"{self.prefix}members/{self.address}", self.address, self.lease_id)])
                await _first_failure(self._keepalive(), self._campaign())
            except (EtcdError, LeaseLost) as exc:
                log.warning("controller %s: %s; starting over with a new lease", self.address, exc)
            await self._step_down()
            await asyncio.sleep(RETRY_S)

    async def _keepalive(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            sent = loop.time()
            try:
                ttl = await self.etcd.lease_keepalive(self.lease_id)
            except EtcdError as exc:
                if loop.time() >= self.valid_until:
                    raise LeaseLost(f"lease not renewed in time ({exc})") from None
                continue
            if ttl <= 0:
                raise LeaseLost("lease expired")
            self.valid_until = sent + ttl

    async def _campaign(self) -> None:
        while True:
            ok, answer = await self.etcd.txn(
                [compare(self.leader_key, "CREATE", 0)],
                [put_op(self.leader_key, json.dumps({"addr": self.address}), self.lease_id)])
            kv = None if ok else await self.etcd.get(self.leader_key)
            if ok or (kv is not None and kv.lease == self.lease_id):
                # won (or won already: a retried campaign whose first answer was lost finds its own entry)
                self.leader_address = self.address
                self.active = True
                log.warning("controller %s is now the active controller", self.address)
                await self.on_elected(int(answer["header"]["revision"]) if ok else kv.create_revision)
                await self._watch_until_deleted()        # ours deleted: the lease is gone
                raise LeaseLost("the leader key was deleted")
            if kv is None:
                continue                                 # gone meanwhile: campaign again
            self.leader_address = json.loads(kv.value)["addr"]
            log.info("controller %s is standby; the active controller is %s", self.address, self.leader_address)
            try:
                await asyncio.wait_for(self._watch_until_deleted(kv.mod_revision + 1), self.ttl_s)
            except TimeoutError:
                pass

    async def _watch_until_deleted(self, start_revision: int = 0) -> None:
        async for ev in self.etcd.watch(self.leader_key, start_revision=start_revision):
            if ev.type == "DELETE":
                return
            self.leader_address = json.loads(ev.kv.value)["addr"]

    async def _step_down(self) -> None:
        if self.active:
            self.active = False
            log.error("controller %s is no longer the active controller", self.address)
            await self.on_lost()

    async def resign(self) -> None:
        """At shutdown: drop the lease so that a standby takes over now rather than in ttl_s."""
        if self.lease_id:
            try:
                if self.active:
                    await self.etcd.txn([compare(self.leader_key, "LEASE", self.lease_id)],
                                        [delete_op(self.leader_key)])
                await self.etcd.lease_revoke(self.lease_id)
            except EtcdError as exc:
                log.warning("controller %s: could not resign: %s", self.address, exc)
        self.active = False


class LeaseLost(RuntimeError):
    pass


async def _first_failure(*coros) -> None:
    """Run *coros* until one of them raises; cancel the others and raise that."""
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in done:
            t.result()
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
