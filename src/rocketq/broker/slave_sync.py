"""What a slave copies from its master besides the CommitLog (RocketMQ's SlaveSynchronize):
topic config, subscription groups, consumer offsets and delay-level progress, every
``SYNC_INTERVAL_S`` (10 s), over the master's ordinary remoting port (GET_ALL_TOPIC_CONFIG,
GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_CONSUMER_OFFSET, GET_ALL_DELAY_OFFSET).  The master's address comes from the NameServers' answer to the slave's
registration.

With slave acting master (:mod:`rocketq.broker.acting_services`) three things differ: delay-level
offsets are only ever raised (a slave that escaped delayed messages keeps its further progress until
its master takes it back); consumer offsets are merged, not replaced, while this slave holds offsets
from its time as acting master that the master has not taken yet; and the master's timer
checkpoint (GET_TIMER_CHECK_POINT) is kept, for the timer to start from if this slave acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging

from rocketq.broker.acting_master import merge_higher
from rocketq.broker.subscription_groups import SubscriptionGroupConfig
from rocketq.broker.topic_config import TopicConfig
from rocketq.common import fastjson
from rocketq.common.aio import cancel_and_wait
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

SYNC_INTERVAL_S = 10.0


class SlaveSync:
    def __init__(self, broker, master_addr):
        self._broker, self._master_addr = broker, master_addr     # master_addr: () -> "host:port" | None
        self._client: RemotingClient | None = None
        self._task: asyncio.Task | None = None
        self.rounds = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        if self._client is not None:
            await self._client.close()

    async def _loop(self) -> None:
        while True:
            try:
                await self.sync_once()
            except PermissionError as exc:        # wrong or no credentials: say so loudly, keep trying
                log.error("slave sync: %s", exc)
            except Exception as exc:              # master away: keep serving what we have
                log.info("slave sync from master failed: %s", exc)
            await asyncio.sleep(SYNC_INTERVAL_S if self.rounds else 1.0)

    async def _ask(self, code: int) -> bytes:
        addr = self._master_addr()
        if not addr:
            raise ConnectionError("master address not known yet")
        if self._client is None or self._client.address != addr:
            if self._client is not None:
                await self._client.close()
            host, _, port = addr.rpartition(":")
            self._client = RemotingClient(host, int(port), ssl_context=self._broker.client_ssl_context())
        # admin reads: a master with ACL on answers them to an admin account only
        r = await self._client.invoke(self._broker.sign_outgoing(RemotingCommand.create_request(code, {})), timeout_s=5)
        if r.code == ResponseCode.NO_PERMISSION:
            raise PermissionError(f"master {addr} refused {RequestCode(code).name}: {r.remark} (set "
                                  "innerClientAuthenticationCredentials to an admin account of the master's "
                                  "plain_acl.yml)")
        if r.code != ResponseCode.SUCCESS:
            raise ConnectionError(f"master answered {r.code}: {r.remark}")
        return r.body

    async def sync_once(self) -> None:
        b = self._broker
        topics = fastjson.loads(await self._ask(RequestCode.GET_ALL_TOPIC_CONFIG)).get("topicConfigTable") or {}
        for name, raw in topics.items():
            tc = TopicConfig.from_json(dict(raw, topicName=name))
            if b.topics.get(name) != tc:
                with contextlib.suppress(ValueError):
                    b.topics.update(tc)
        groups = json.loads(await self._ask(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        for name, raw in (groups.get("subscriptionGroupTable") or {}).items():
            cfg = SubscriptionGroupConfig.from_json(dict(raw, groupName=name))
            if b.groups.get(name) != cfg:
                b.groups.update(cfg)
        offsets = fastjson.loads(await self._ask(RequestCode.GET_ALL_CONSUMER_OFFSET)).get("offsetTable") or {}
        acting = getattr(b, "acting_master", None)
        if acting is not None and (acting.active or acting.services.keeps_progress(offsets)):
            merge_higher(b.offsets, offsets)          # its own progress first goes back to the master
        else:
            b.offsets.replace_all({k: {int(q): int(o) for q, o in v.items()} for k, v in offsets.items()})
        delay = json.loads(await self._ask(RequestCode.GET_ALL_DELAY_OFFSET)).get("offsetTable") or {}
        if not b.store.schedule.running:              # a promoted slave delivers from its own progress
            own = b.store.schedule.offsets
            b.store.schedule.replace_offsets({**own, **{int(k): max(int(v), own.get(int(k), 0))
                                                        for k, v in delay.items()}})
        if acting is not None and b.timer is not None and not b.timer.running:
            with contextlib.suppress(ConnectionError):     # a master without GET_TIMER_CHECK_POINT
                timer = json.loads(await self._ask(RequestCode.GET_TIMER_CHECK_POINT) or b"{}")
                if timer:
                    await asyncio.to_thread(b.timer.save_master_checkpoint, timer)
        self.rounds += 1
