"""Slave acting master (RocketMQ 5's ``enableSlaveActingMaster``), the broker's side.

Theory of operation
-------------------
With ``enableSlaveActingMaster=true`` every broker of a group registers ``enableActingMaster=true``
and the NameServers route a group without master through its slave with the smallest brokerId
(under id 0, its queues read-only: :mod:`rocketq.namesrv.route_info`).  What that slave serves then
needs little from it, because a rocketq slave already answers what a master answers for reads:

* pulls (PULL_MESSAGE, also on a topic it knows only from the store), offsets queries, message
  queries by key and id;
* consumer offset commits (UPDATE_CONSUMER_OFFSET): stored on the slave.  Its SlaveSynchronize
  cannot overwrite them while the master is away (nothing to copy from).

This module adds the parts that do need doing:

* **On a slave**: every ``CHECK_INTERVAL_S`` it asks the NameServers for the group's members
  (GET_BROKER_CLUSTER_INFO; RocketMQ uses GET_BROKER_MEMBER_GROUP and the NameServer's min-broker-id
  notice) and keeps :attr:`ActingMaster.acting` - true while the group has no master and this is
  its smallest id.  On a change it starts or stops :class:`rocketq.broker.acting_services.ActingServices`
  (delayed, timer and transactional messages escaped to other groups), registers at once, so its
  topics reach the routes (read-only) without waiting for the 30 s registration, and logs the change.
* **On a master starting**: RocketMQ's ``syncMetadataReverse``.  Its delay levels and timer do not
  run yet (the broker starts them through :meth:`ActingMaster.start` only).  Once registered, it
  waits until no slave of its group acts any more (``brokerActive`` false in each slave's
  GET_BROKER_RUNTIME_INFO, at most ``HANDBACK_WAIT_S``: the slave stops within ``CHECK_INTERVAL_S``
  of seeing the master), then takes from each slave every consumer offset higher than its own
  (GET_ALL_CONSUMER_OFFSET: offsets consumers committed there, and the transaction walk), every
  delay level's offset higher than its own (GET_ALL_DELAY_OFFSET) and a timer checkpoint further
  than its own (GET_TIMER_CHECK_POINT, rocketq's JSON body: RocketMQ's is its binary
  ``TimerCheckpoint``), and only then delivers.  So what the slave escaped is not delivered again
  and what consumers committed there is not consumed twice.  A slave that cannot be reached is
  skipped (its progress is lost to the master: redelivery, never loss).

POP revive does not run on an acting slave (RocketMQ's does): POP consumers of a masterless group
see their unacknowledged messages again only when the master is back.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from rocketq.broker.acting_services import ActingServices
from rocketq.common import fastjson
from rocketq.common.aio import cancel_and_wait
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0             # how soon a slave notices its master is gone (and back)
REQUEST_TIMEOUT_S = 5.0
HANDBACK_WAIT_S = 15.0              # a returning master waits this long at most for its slaves to stop acting
MASTER_ID = 0


def group_members(cluster_info: dict, broker_name: str) -> dict[int, str]:
    """brokerId -> address of *broker_name*'s group in a GET_BROKER_CLUSTER_INFO answer."""
    data = (cluster_info.get("brokerAddrTable") or {}).get(broker_name) or {}
    return {int(bid): str(addr) for bid, addr in (data.get("brokerAddrs") or {}).items()}


def merge_higher(offsets, table: dict) -> int:
    """Commit every offset of *table* (an offsetTable) higher than *offsets*' own; returns how many."""
    taken = 0
    for key, queues in table.items():
        topic, sep, group = key.partition("@")
        if not sep:
            continue
        for qid, offset in (queues or {}).items():
            if int(offset) > offsets.query(group, topic, int(qid)) and offsets.commit(group, topic, int(qid), int(offset)):
                taken += 1
    return taken


def handlers(broker) -> dict:
    """GET_TIMER_CHECK_POINT: this broker's timer progress as JSON ({} when its timer never ran)."""
    async def timer_checkpoint(_conn, cmd):
        cp = broker.timer.checkpoint() if broker.timer is not None else None
        return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, None, None,
                                               json.dumps(cp or {}).encode())
    return {RequestCode.GET_TIMER_CHECK_POINT: timer_checkpoint}


class ActingMaster:
    def __init__(self, broker):
        self._broker = broker
        self.acting = False
        self.services = ActingServices(broker)
        self._task: asyncio.Task | None = None
        self._delivering = False                   # a master: its delay, timer and transaction services run

    def start(self) -> None:
        b = self._broker
        if b.settings.broker_role == "SLAVE":
            if b.registrar is not None:
                self._task = asyncio.create_task(self._watch())
        elif b.registrar is None:
            self._deliver()
        else:
            b.transaction_checker.held = True      # its first round comes after the take-back
            self._task = asyncio.create_task(self._take_back_then_deliver())

    def _deliver(self) -> None:
        self._broker.start_master_services()
        self._broker.transaction_checker.held = False
        self._delivering = True

    @property
    def active(self) -> bool:
        """Whether this broker delivers delayed, timer and transactional messages now (``brokerActive``):
        a master once its slaves' progress is back, a slave while it acts as master."""
        return self._delivering or self.services.running

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        await self.services.close()

    async def _members(self) -> dict[int, str] | None:
        info = await self._broker.registrar.cluster_info()
        return None if info is None else group_members(info, self._broker.settings.broker_name)

    async def _watch(self) -> None:
        b = self._broker
        while True:
            try:
                members = await self._members()
                if members is not None:
                    acting = MASTER_ID not in members and bool(members) and min(members) == b.settings.broker_id
                    if acting != self.acting:
                        await self._change(acting)
            except Exception as exc:               # NameServers away: keep the last view
                log.info("acting-master check failed: %s", exc)
            await asyncio.sleep(CHECK_INTERVAL_S)

    async def _change(self, acting: bool) -> None:
        b = self._broker
        if acting:
            await self.services.start()
        else:
            await self.services.stop()             # before the master can ask whether we still act
        self.acting = acting
        log.warning("broker %s (id %d) %s", b.settings.broker_name, b.settings.broker_id,
                    "acts as master: its group has no master (reads, offset commits, delayed, timer and "
                    "transactional messages escaped to other groups; no writes)" if acting
                    else "no longer acts as master")
        await b.registrar.register_once()

    async def _take_back_then_deliver(self) -> None:
        """Once, at a master's start: the slaves' progress comes back, then delay and timer delivery start."""
        b = self._broker
        try:
            members = await self._members() or {}
        except Exception as exc:
            log.info("no reverse sync: NameServers not reachable: %s", exc)
            members = {}
        for bid, addr in sorted(members.items()):
            if bid == MASTER_ID or addr == b.address:
                continue
            host, _, port = addr.rpartition(":")
            client = RemotingClient(host, int(port), ssl_context=b.client_ssl_context())
            try:
                await self._wait_inactive(client)
                await self._take_back(client, addr, bid)
            except Exception as exc:
                log.info("reverse sync from slave %s failed: %s", addr, exc)
            finally:
                await client.close()
        self._deliver()

    async def _ask(self, client: RemotingClient, code: int) -> dict:
        r = await client.invoke(self._broker.sign_outgoing(RemotingCommand.create_request(code, {})),
                                timeout_s=REQUEST_TIMEOUT_S)
        if r.code != ResponseCode.SUCCESS:
            raise ConnectionError(f"answered {r.code}: {r.remark}")
        return fastjson.loads(r.body or b"{}")

    async def _wait_inactive(self, client: RemotingClient) -> None:
        deadline = time.monotonic() + HANDBACK_WAIT_S
        while time.monotonic() < deadline:
            table = (await self._ask(client, RequestCode.GET_BROKER_RUNTIME_INFO)).get("table") or {}
            if table.get("brokerActive") != "true":
                return
            await asyncio.sleep(CHECK_INTERVAL_S / 4)
        log.warning("slave %s still acts as master after %.0f s; taking its progress anyway",
                    client.address, HANDBACK_WAIT_S)

    async def _take_back(self, client: RemotingClient, addr: str, bid: int) -> None:
        b = self._broker
        taken = merge_higher(b.offsets, (await self._ask(client, RequestCode.GET_ALL_CONSUMER_OFFSET)).get(
            "offsetTable") or {})
        if taken:
            b.offsets.persist()
        delay = (await self._ask(client, RequestCode.GET_ALL_DELAY_OFFSET)).get("offsetTable") or {}
        own = b.store.schedule.offsets
        higher = {int(k): int(v) for k, v in delay.items() if int(v) > own.get(int(k), 0)}
        if higher:
            b.store.schedule.replace_offsets({**own, **higher})
        timer = await self._ask(client, RequestCode.GET_TIMER_CHECK_POINT)
        if timer and b.timer is not None:
            b.timer.adopt(int(timer["deliveredUntilMs"]), int(timer["ingestOffset"]))
        if taken or higher or timer:
            log.warning("took from slave %s (id %d): %d consumer offsets, %d delay levels, timer checkpoint %s",
                        addr, bid, taken, len(higher), timer or "-")
