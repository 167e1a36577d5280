"""What the console reads from and does to the cluster, through :class:`rocketq.client.Admin`.

One :class:`Admin` (and, for test messages, one :class:`Producer`) per set of credentials: the
anonymous one when ACL is off, one per logged-in account when it is on, at most
``MAX_CLIENTS`` kept (the least recently used is closed).  Results are plain dicts and lists
for the templates.  Time-range search reads each queue of the topic between the offsets the
brokers find for the two times (RocketMQ Dashboard's way), at most ``forms.MAX_RESULTS`` messages.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict

from rocketq.client import Admin, Message, Producer
from rocketq.client.model import Credentials, MessageQueue, MQClientError
from rocketq.common import fastjson
from rocketq.common.system_names import is_system_group
from rocketq.console import forms
from rocketq.remoting import RequestCode, ResponseCode

MAX_CLIENTS = 16
TOOLS_GROUP = "TOOLS_CONSUMER"        # RocketMQ's MixAll.TOOLS_CONSUMER_GROUP: reads for the tools
CONSOLE_PRODUCER_GROUP = "rocketq_console"
PULL_BATCH = 32


class ConsoleData:
    def __init__(self, namesrv: str, *, ssl_context=None, timeout_s: float = 5.0):
        self._namesrv, self._ssl, self._timeout_s = namesrv, ssl_context, timeout_s
        self._admins: OrderedDict[tuple, Admin] = OrderedDict()
        self._producers: OrderedDict[tuple, Producer] = OrderedDict()

    async def close(self) -> None:
        for client in [*self._admins.values(), *self._producers.values()]:
            await (client.close() if isinstance(client, Admin) else client.shutdown())
        self._admins.clear()
        self._producers.clear()

    def admin(self, creds: Credentials | None = None) -> Admin:
        return self._cached(self._admins, creds, lambda: Admin(self._namesrv, credentials=creds,
                                                               ssl_context=self._ssl, timeout_s=self._timeout_s))

    def _cached(self, table: OrderedDict, creds, make):
        key = (creds.access_key, creds.secret_key) if creds else ()
        client = table.get(key)
        if client is None:
            client = table[key] = make()
            while len(table) > MAX_CLIENTS:
                _, old = table.popitem(last=False)
                asyncio.ensure_future(old.close() if isinstance(old, Admin) else old.shutdown())
        table.move_to_end(key)
        return client

    # -- cluster -----------------------------------------------------------------------------

    async def brokers(self, creds=None) -> list[dict]:
        admin, rows = self.admin(creds), []
        for b in await admin.brokers():
            for bid, addr in sorted(b.addrs.items()):
                try:
                    info = await admin.broker_runtime(addr)
                except (MQClientError, OSError, asyncio.TimeoutError) as exc:
                    info = {"error": str(exc)}
                rows.append({"cluster": b.cluster, "broker": b.broker_name, "id": bid, "address": addr, **info})
        return rows

    async def totals(self, creds=None) -> tuple[int, int]:
        """Messages put and got today across every broker (the throughput chart's source)."""
        put = got = 0
        for row in await self.brokers(creds):
            put += int(row.get("msgPutTotalTodayNow") or 0)
            got += int(row.get("msgGetTotalTodayNow") or 0)
        return put, got

    # -- topics ------------------------------------------------------------------------------

    async def topics(self, creds=None) -> list[dict]:
        kinds = await self.admin(creds).topic_kinds()
        return [{"topic": t, "kind": k} for t, k in sorted(kinds.items())]

    async def topic(self, name: str, creds=None) -> dict:
        admin = self.admin(creds)
        route = await admin.route(name)
        queues = []
        for b in route.broker_datas:
            if b.master is None:
                continue
            r = await admin.api.invoke(b.master, RequestCode.GET_TOPIC_STATS_INFO, {"topic": name},
                                       expect=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
            table = fastjson.loads(r.body).get("offsetTable") or {} if r.code == ResponseCode.SUCCESS else {}
            for key, v in sorted(table.items(), key=lambda kv: int(kv[0]["queueId"])):
                queues.append({"broker": key["brokerName"], "queue_id": int(key["queueId"]),
                               "min": int(v.get("minOffset", 0)), "max": int(v.get("maxOffset", 0)),
                               "last": int(v.get("lastUpdateTimestamp", 0))})
        perms = [{"broker": q.broker_name, "read": q.read_queue_nums, "write": q.write_queue_nums, "perm": q.perm}
                 for q in route.queue_datas]
        return {"topic": name, "queues": queues, "route": perms,
                "messages": sum(q["max"] - q["min"] for q in queues)}

    async def create_topic(self, name: str, queues: int, order: bool, creds=None) -> list[str]:
        return await self.admin(creds).create_topic(name, queues=queues, order=order)

    async def delete_topic(self, name: str, creds=None) -> None:
        await self.admin(creds).delete_topic(name)

    # -- groups ------------------------------------------------------------------------------

    async def groups(self, creds=None, *, show_all: bool = False) -> list[str]:
        return [g for g in await self.admin(creds).groups() if show_all or not is_system_group(g)]

    async def lag(self, group: str, creds=None) -> list[dict]:
        return [{"topic": q.queue.topic, "broker": q.queue.broker_name, "queue_id": q.queue.queue_id,
                 "broker_offset": q.broker_offset, "consumer_offset": q.consumer_offset, "lag": q.lag,
                 "last": q.last_timestamp} for q in await self.admin(creds).consumer_lag(group)]

    async def lag_by_queue(self, group: str, creds=None) -> dict[str, int]:
        return {f"{r['topic']}@{r['broker']}#{r['queue_id']}": r["lag"] for r in await self.lag(group, creds)}

    async def members(self, group: str, creds=None) -> list[dict]:
        admin, out = self.admin(creds), []
        for b in await admin.brokers():
            if 0 not in b.addrs:
                continue
            r = await admin.api.invoke(b.addrs[0], RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": group},
                                       expect=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
            if r.code == ResponseCode.SUCCESS:
                body = json.loads(r.body)
                for c in body.get("connectionSet") or ():
                    out.append({"broker": b.broker_name, "client": c.get("clientId", ""),
                                "address": c.get("clientAddr", ""), "model": body.get("messageModel", ""),
                                "subscriptions": sorted(body.get("subscriptionTable") or {})})
        return out

    async def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int, creds=None) -> list[dict]:
        """Move *group*'s offset of every queue of *topic* to the first message stored at or after
        *timestamp_ms*, on every master (INVOKE_BROKER_TO_RESET_OFFSET, RocketMQ 5's server-side reset:
        running consumers follow without a restart)."""
        offsets = await self.admin(creds).reset_offset(group, topic, timestamp_ms)
        return [{"broker": mq.broker_name, "queue_id": mq.queue_id, "offset": offset}
                for mq, offset in sorted(offsets.items())]

    # -- messages ----------------------------------------------------------------------------

    async def by_key(self, topic: str, key: str, creds=None) -> list:
        return (await self.admin(creds).query_by_key(topic, key, forms.MAX_RESULTS))[:forms.MAX_RESULTS]

    async def by_id(self, msg_id: str, topic: str | None, creds=None):
        return await self.admin(creds).view_by_id(msg_id, topic)

    async def by_time(self, topic: str, begin_ms: int, end_ms: int, creds=None) -> list:
        admin, found = self.admin(creds), []
        route = await admin.route(topic)
        for mq in route.read_queues():
            addr = route.read_addr_of(mq.broker_name)
            if addr is None:
                continue
            offset = await admin.api.search_offset(addr, mq, begin_ms)
            end = await admin.api.search_offset(addr, mq, end_ms + 1)
            while offset < end and len(found) < forms.MAX_RESULTS:
                r = await admin.api.pull(addr, mq, TOOLS_GROUP, offset, max_nums=min(PULL_BATCH, end - offset))
                if not r.messages:
                    break
                found += [m for m in r.messages if begin_ms <= m.store_timestamp <= end_ms]
                offset = r.next_begin_offset
        return sorted(found, key=lambda m: m.store_timestamp)[:forms.MAX_RESULTS]

    async def trace(self, msg_id: str, creds=None):
        return await self.admin(creds).trace(msg_id)

    async def send(self, topic: str, body: bytes, tags: str, keys: str, creds=None):
        producer = self._cached(self._producers, creds, lambda: Producer(
            CONSOLE_PRODUCER_GROUP, self._namesrv, credentials=creds, ssl_context=self._ssl,
            timeout_s=self._timeout_s))
        await producer.start()
        msg = Message(topic=topic, body=body, tags=tags or None, keys=keys.split() if keys else None)
        return await producer.send(msg)


__all__ = ["ConsoleData", "Credentials", "MessageQueue", "MQClientError"]
