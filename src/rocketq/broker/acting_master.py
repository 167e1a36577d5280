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

This module adds the two parts that do need doing:

* **On a slave**: every ``CHECK_INTERVAL_S`` it asks the NameServers for the group's members
  (GET_BROKER_CLUSTER_INFO; RocketMQ uses GET_BROKER_MEMBER_GROUP and the NameServer's min-broker-id
  notice) and keeps :attr:`ActingMaster.acting` - true while the group has no master and this is
  its smallest id.  On a change it registers at once, so its topics reach the routes (read-only)
  without waiting for the 30 s registration, and logs the change.
* **On a master starting**: RocketMQ's ``syncMetadataReverse`` - before the slaves copy its offsets
  again, it takes from each slave of its group (GET_ALL_CONSUMER_OFFSET) every consumer offset
  higher than its own, so what consumers committed to an acting slave is not consumed twice.  The
  race with a slave's next SlaveSynchronize round (which copies the master's older offsets first)
  can only cause redelivery, never loss.

Not done (RocketMQ does them on an acting master): delivering delayed and timer messages that come
due by "escaping" them to another group's master, running transaction check-backs and POP revive.
rocketq's acting slave keeps them stored; the master delivers them when it comes back.
"""

from __future__ import annotations

import asyncio
import logging

from rocketq.common import fastjson
from rocketq.common.aio import cancel_and_wait
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0             # how soon a slave notices its master is gone (and back)
REQUEST_TIMEOUT_S = 5.0
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


class ActingMaster:
    def __init__(self, broker):
        self._broker = broker
        self.acting = False
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        b = self._broker
        if b.registrar is None:
            return
        is_slave = b.settings.broker_role == "SLAVE"
        self._task = asyncio.create_task(self._watch() if is_slave else self._sync_reverse())

    async def close(self) -> None:
        await cancel_and_wait(self._task)

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
                        self.acting = acting
                        log.warning("broker %s (id %d) %s", b.settings.broker_name, b.settings.broker_id,
                                    "acts as master: its group has no master (reads and offset commits here, "
                                    "no writes)" if acting else "no longer acts as master")
                        await b.registrar.register_once()
            except Exception as exc:               # NameServers away: keep the last view
                log.info("acting-master check failed: %s", exc)
            await asyncio.sleep(CHECK_INTERVAL_S)

    async def _sync_reverse(self) -> None:
        """Once, at a master's start: consumer offsets committed to an acting slave come back."""
        b = self._broker
        try:
            members = await self._members() or {}
        except Exception as exc:
            log.info("no reverse offset sync: NameServers not reachable: %s", exc)
            return
        for bid, addr in sorted(members.items()):
            if bid == MASTER_ID or addr == b.address:
                continue
            host, _, port = addr.rpartition(":")
            client = RemotingClient(host, int(port), ssl_context=b.client_ssl_context())
            try:
                r = await client.invoke(b.sign_outgoing(RemotingCommand.create_request(
                    RequestCode.GET_ALL_CONSUMER_OFFSET, {})), timeout_s=REQUEST_TIMEOUT_S)
                if r.code != ResponseCode.SUCCESS:
                    raise ConnectionError(f"answered {r.code}: {r.remark}")
                taken = merge_higher(b.offsets, fastjson.loads(r.body or b"{}").get("offsetTable") or {})
                if taken:
                    b.offsets.persist()
                    log.warning("took %d consumer offsets from slave %s (id %d) committed while it acted as master",
                                taken, addr, bid)
            except Exception as exc:
                log.info("reverse offset sync from slave %s failed: %s", addr, exc)
            finally:
                await client.close()
