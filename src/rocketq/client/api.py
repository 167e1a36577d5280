"""Low-level calls to NameServers and brokers (RocketMQ's ``MQClientAPIImpl``), asyncio.

One :class:`RemotingClient` per address, made on first use and reused.  Every method sends one
request and returns a typed result or raises :class:`MQClientError` naming the response code,
the broker's remark and the address.  With :class:`Credentials` every request is signed (ACL 1.0);
with an SSL context every connection uses TLS.  This is the layer the producers, consumers, the
admin API, the command line and the Spark connector share.
"""

from __future__ import annotations

import json
import time

from rocketq import _native
from rocketq.acl.signing import sign
from rocketq.client.model import (
    Credentials,
    MessageQueue,
    MQClientError,
    PullResult,
    PullStatus,
    SendResult,
    SendStatus,
    TopicRoute,
)
from rocketq.common import fastjson
from rocketq.common.message import Message
from rocketq.remoting import (
    LanguageCode,
    RemotingClient,
    RemotingCommand,
    RequestCode,
    ResponseCode,
)
from rocketq.remoting.connection import Handler
from rocketq.store.record import StoredMessage

DEFAULT_TIMEOUT_S = 3.0
PULL_FLAG_COMMIT_OFFSET, PULL_FLAG_SUSPEND, PULL_FLAG_SUBSCRIPTION = 0x1, 0x2, 0x4

_SEND_STATUS = {ResponseCode.SUCCESS: SendStatus.SEND_OK, ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
                ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
                ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE}
_SEND_EXPECT = tuple(_SEND_STATUS)
_PULL_STATUS = {ResponseCode.SUCCESS: PullStatus.FOUND, ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
                ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
                ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL}
_PULL_EXPECT = tuple(_PULL_STATUS)


def split_records(body: bytes) -> list:
    """The records of a PULL_MESSAGE / POP_MESSAGE / QUERY_MESSAGE body, back to back in store format,
    as messages: one native call walks and checks them and makes a ``RecordView`` per record (every
    attribute of :class:`StoredMessage`, read in place from the body; ``rocketq._native``)."""
    try:
        return _native.pulled_messages(bytes(body))
    except ValueError as exc:
        raise MQClientError(-1, str(exc)) from None


def parse_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.strip().rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    return host.strip("[]"), int(port)


class MQClientAPI:
    remoting_client = RemotingClient      # the class of its connections' clients (one per address)

    def __init__(self, *, credentials: Credentials | None = None, ssl_context=None,
                 handler: Handler | None = None, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.credentials = credentials
        self._ssl = ssl_context
        self._handler = handler
        self.timeout_s = timeout_s
        self._clients: dict[str, RemotingClient] = {}

    # -- plumbing ----------------------------------------------------------------------------

    def client(self, addr: str) -> RemotingClient:
        c = self._clients.get(addr)
        if c is None:
            host, port = parse_addr(addr)
            c = self._clients[addr] = self.remoting_client(host, port, handler=self._handler, ssl_context=self._ssl)
        return c

    async def invoke(self, addr: str, code: int, header: dict | None = None, body: bytes = b"", *,
                     timeout_s: float | None = None, expect: tuple[int, ...] = (ResponseCode.SUCCESS,)
                     ) -> RemotingCommand:
        return await self.invoke_command(addr, RemotingCommand.create_request(code, header or {}, body),
                                         timeout_s=timeout_s, expect=expect)

    async def invoke_command(self, addr: str, cmd: RemotingCommand, *, timeout_s: float | None = None,
                             expect: tuple[int, ...] = (ResponseCode.SUCCESS,)) -> RemotingCommand:
        """:meth:`invoke` for a request built already (its extFields ``str -> str``, as a hot path builds them)."""
        if self.credentials is not None:
            sign(cmd, self.credentials.access_key, self.credentials.secret_key)
        client = self._clients.get(addr) or self.client(addr)
        try:
            r = await client.invoke(cmd, timeout_s=timeout_s or self.timeout_s)
        except MQClientError:
            raise
        except Exception as exc:             # connect / timeout / closed: one error type for callers
            raise MQClientError(-1, f"{type(exc).__name__}: {exc}", addr) from exc
        if r.code not in expect:
            raise MQClientError(r.code, r.remark, addr)
        return r

    async def oneway(self, addr: str, code: int, header: dict, body: bytes = b"") -> None:
        cmd = RemotingCommand.create_request(code, header, body, oneway=True)
        if self.credentials is not None:
            sign(cmd, self.credentials.access_key, self.credentials.secret_key)
        await self.client(addr).invoke_oneway(cmd, timeout_s=self.timeout_s)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.close()

    # -- NameServer --------------------------------------------------------------------------

    async def _any_namesrv(self, namesrvs: list[str], code: int, header: dict) -> RemotingCommand:
        last: MQClientError | None = None
        for addr in namesrvs:
            try:
                return await self.invoke(addr, code, header)
            except MQClientError as exc:
                if exc.code >= 0:               # a real answer (e.g. TOPIC_NOT_EXIST): do not ask the next one
                    raise
                last = exc
        raise last or MQClientError(-1, "no NameServer address configured")

    async def get_route(self, namesrvs: list[str], topic: str) -> TopicRoute:
        r = await self._any_namesrv(namesrvs, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        return TopicRoute.parse(topic, r.body)

    async def cluster_info(self, namesrvs: list[str]) -> dict:
        r = await self._any_namesrv(namesrvs, RequestCode.GET_BROKER_CLUSTER_INFO, {})
        return fastjson.loads(r.body)

    async def topic_list(self, namesrvs: list[str]) -> list[str]:
        r = await self._any_namesrv(namesrvs, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {})
        return sorted(fastjson.loads(r.body).get("topicList") or [])

    async def delete_topic_in_namesrv(self, namesrv: str, topic: str) -> None:
        await self.invoke(namesrv, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})

    # -- producing ---------------------------------------------------------------------------

    async def send(self, addr: str, mq: MessageQueue, msg: Message, group: str, *,
                   batch: list[Message] | None = None, encoded: bytes | None = None,
                   timeout_s: float | None = None) -> SendResult:
        """SEND_MESSAGE_V2 for *msg*, or SEND_BATCH_MESSAGE for *batch* or an *encoded* batch body
        (all of mq's topic; *msg* then only gives the header's topic and flags)."""
        # extFields as the strings they go out as (Java's toString of each value): no normalising copy
        header = {"a": group, "b": mq.topic, "c": "TBW102", "d": "4", "e": str(mq.queue_id), "f": str(msg.sys_flag),
                  "g": str(int(time.time() * 1000)), "h": str(msg.flag), "i": msg.properties_string(),
                  "j": str(msg.reconsume_times), "k": "false"}
        if batch is not None or encoded is not None:
            header["m"] = "true"
            try:
                body = encoded if encoded is not None else _native.encode_send_batch(batch)
            except ValueError as exc:
                raise MQClientError(-1, str(exc)) from None
            code = RequestCode.SEND_BATCH_MESSAGE
        else:
            body = msg.body
            code = RequestCode.SEND_REPLY_MESSAGE_V2 if msg.properties.get("MSG_TYPE") == "reply" \
                else RequestCode.SEND_MESSAGE_V2          # a reply (request_reply.create_reply_message)
        cmd = RemotingCommand(code, LanguageCode.PYTHON, 0, 0, 0, None, header, body)
        r = await self.invoke_command(addr, cmd, timeout_s=timeout_s, expect=_SEND_EXPECT)
        uniq = ",".join(m.properties.get("UNIQ_KEY", "") for m in batch) if batch is not None \
            else msg.properties.get("UNIQ_KEY", "")
        f = r.ext_fields
        queue_id = f.get("queueId")
        queue = mq if queue_id is None or queue_id == str(mq.queue_id) else \
            MessageQueue(mq.topic, mq.broker_name, int(queue_id))
        return SendResult(_SEND_STATUS[r.code], uniq, f.get("msgId", ""), queue,
                          int(f.get("queueOffset", -1)), f.get("transactionId"), f.get("recallHandle") or None)

    async def send_oneway(self, addr: str, mq: MessageQueue, msg: Message, group: str) -> None:
        header = {"a": group, "b": mq.topic, "c": "TBW102", "d": 4, "e": mq.queue_id, "f": msg.sys_flag,
                  "g": int(time.time() * 1000), "h": msg.flag, "i": msg.properties_string(), "j": 0, "k": False}
        await self.oneway(addr, RequestCode.SEND_MESSAGE_V2, header, msg.body)

    async def recall(self, addr: str, topic: str, recall_handle: str, producer_group: str = "") -> str:
        """RECALL_MESSAGE: the recalled message's id (its UNIQ_KEY)."""
        header = {"topic": topic, "recallHandle": recall_handle}
        if producer_group:
            header["producerGroup"] = producer_group
        r = await self.invoke(addr, RequestCode.RECALL_MESSAGE, header)
        return r.ext_fields.get("msgId", "")

    async def end_transaction(self, addr: str, header: dict) -> None:
        await self.oneway(addr, RequestCode.END_TRANSACTION, header)

    # -- consuming ---------------------------------------------------------------------------

    async def pull(self, addr: str, mq: MessageQueue, group: str, offset: int, *, max_nums: int = 32,
                   expression: str = "*", expression_type: str = "TAG", suspend_ms: int = 0, commit_offset: int = -1,
                   timeout_s: float | None = None) -> PullResult:
        result, body = await self.pull_raw(addr, mq, group, offset, max_nums=max_nums, expression=expression,
                                           expression_type=expression_type, suspend_ms=suspend_ms,
                                           commit_offset=commit_offset, timeout_s=timeout_s)
        result.messages = split_records(body) if body else []
        return result

    async def pull_raw(self, addr: str, mq: MessageQueue, group: str, offset: int, *, max_nums: int = 32,
                       expression: str = "*", expression_type: str = "TAG", suspend_ms: int = 0,
                       commit_offset: int = -1, timeout_s: float | None = None) -> tuple[PullResult, bytes]:
        """PULL_MESSAGE with the found records left as the broker sent them (store format, back to back)."""
        flags = (PULL_FLAG_SUSPEND if suspend_ms else 0) | (PULL_FLAG_COMMIT_OFFSET if commit_offset >= 0 else 0)
        header = {"consumerGroup": group, "topic": mq.topic, "queueId": str(mq.queue_id), "queueOffset": str(offset),
                  "maxMsgNums": str(max_nums), "sysFlag": str(flags | PULL_FLAG_SUBSCRIPTION),
                  "commitOffset": str(max(commit_offset, 0)), "suspendTimeoutMillis": str(suspend_ms),
                  "subscription": expression, "subVersion": "0", "expressionType": expression_type}
        wait = (timeout_s or self.timeout_s) + suspend_ms / 1000
        r = await self.invoke_command(addr, RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=header),
                                      timeout_s=wait, expect=_PULL_EXPECT)   # the fields are strings already
        f = r.ext_fields
        body = r.body if r.code == ResponseCode.SUCCESS else b""
        return PullResult(_PULL_STATUS[r.code], int(f.get("nextBeginOffset", offset)), int(f.get("minOffset", 0)),
                          int(f.get("maxOffset", 0)), [], int(f.get("suggestWhichBrokerId", 0) or 0)), body

    async def check_client_config(self, addr: str, group: str, client_id: str, topic: str, expression: str,
                                  expression_type: str) -> None:
        """CHECK_CLIENT_CONFIG: raises MQClientError when the broker will not serve the subscription
        (SQL92 without enablePropertyFilter, or an expression it cannot parse)."""
        body = {"clientId": client_id, "group": group, "subscriptionData": {
            "topic": topic, "subString": expression, "expressionType": expression_type, "tagsSet": [], "codeSet": [],
            "subVersion": 0, "classFilterMode": False}}
        await self.invoke(addr, RequestCode.CHECK_CLIENT_CONFIG, {}, json.dumps(body).encode())

    # -- pop (RocketMQ 5's broker-side consumption state) ------------------------------------------

    async def pop(self, addr: str, group: str, topic: str, *, queue_id: int = -1, max_nums: int = 32,
                  invisible_ms: int = 60_000, poll_ms: int = 0, expression: str = "*", expression_type: str = "TAG",
                  order: bool = False) -> tuple[RemotingCommand, list[StoredMessage]]:
        """POP_MESSAGE: the broker's answer (header fields in ``ext_fields``; SUCCESS, POLLING_TIMEOUT
        or POLLING_FULL) and the records it holds."""
        header = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "maxMsgNums": max_nums,
                  "invisibleTime": invisible_ms, "pollTime": poll_ms, "bornTime": int(time.time() * 1000),
                  "initMode": 0, "expType": expression_type, "exp": expression, "order": order}
        r = await self.invoke(addr, RequestCode.POP_MESSAGE, header, timeout_s=self.timeout_s + poll_ms / 1000,
                              expect=(ResponseCode.SUCCESS, ResponseCode.POLLING_TIMEOUT, ResponseCode.POLLING_FULL,
                                      ResponseCode.PULL_NOT_FOUND))
        return r, (split_records(r.body) if r.code == ResponseCode.SUCCESS and r.body else [])

    async def ack(self, addr: str, group: str, topic: str, queue_id: int, offset: int, extra_info: str) -> bool:
        """ACK_MESSAGE; False when the broker had no such copy in flight (NO_MESSAGE)."""
        r = await self.invoke(addr, RequestCode.ACK_MESSAGE, {
            "consumerGroup": group, "topic": topic, "queueId": queue_id, "offset": offset, "extraInfo": extra_info},
            expect=(ResponseCode.SUCCESS, ResponseCode.NO_MESSAGE))
        return r.code == ResponseCode.SUCCESS

    async def batch_ack(self, addr: str, broker_name: str, acks: list[dict]) -> None:
        """BATCH_ACK_MESSAGE of ``{"c", "t", "r", "so", "q", "rq", "pt", "it", "b"}`` entries."""
        await self.invoke(addr, RequestCode.BATCH_ACK_MESSAGE, {},
                          json.dumps({"brokerName": broker_name, "acks": acks}).encode())

    async def change_invisible_time(self, addr: str, group: str, topic: str, queue_id: int, offset: int,
                                    extra_info: str, invisible_ms: int) -> dict:
        """CHANGE_MESSAGE_INVISIBLETIME: the new ``popTime``/``invisibleTime``/``reviveQid``."""
        r = await self.invoke(addr, RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
            "consumerGroup": group, "topic": topic, "queueId": queue_id, "offset": offset, "extraInfo": extra_info,
            "invisibleTime": invisible_ms})
        return r.ext_fields

    async def query_offset(self, addr: str, group: str, mq: MessageQueue) -> int:
        """The group's committed offset, or -1 when it has none."""
        r = await self.invoke(addr, RequestCode.QUERY_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id},
            expect=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        return int(r.ext_fields.get("offset", -1)) if r.code == ResponseCode.SUCCESS else -1

    async def update_offset(self, addr: str, group: str, mq: MessageQueue, offset: int) -> None:
        await self.invoke(addr, RequestCode.UPDATE_CONSUMER_OFFSET, {
            "consumerGroup": group, "topic": mq.topic, "queueId": mq.queue_id, "commitOffset": offset})

    async def max_offset(self, addr: str, mq: MessageQueue) -> int:
        r = await self.invoke(addr, RequestCode.GET_MAX_OFFSET, {"topic": mq.topic, "queueId": mq.queue_id})
        return int(r.ext_fields["offset"])

    async def min_offset(self, addr: str, mq: MessageQueue) -> int:
        r = await self.invoke(addr, RequestCode.GET_MIN_OFFSET, {"topic": mq.topic, "queueId": mq.queue_id})
        return int(r.ext_fields["offset"])

    async def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int) -> int:
        r = await self.invoke(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, {
            "topic": mq.topic, "queueId": mq.queue_id, "timestamp": timestamp_ms})
        return int(r.ext_fields["offset"])

    async def heartbeat(self, addr: str, data: dict) -> None:
        await self.invoke(addr, RequestCode.HEART_BEAT, {}, json.dumps(data).encode())

    async def unregister_client(self, addr: str, client_id: str, *, producer_group: str = "",
                                consumer_group: str = "") -> None:
        header = {"clientID": client_id}
        if producer_group:
            header["producerGroup"] = producer_group
        if consumer_group:
            header["consumerGroup"] = consumer_group
        await self.invoke(addr, RequestCode.UNREGISTER_CLIENT, header)

    async def consumer_ids(self, addr: str, group: str) -> list[str]:
        r = await self.invoke(addr, RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group},
                              expect=(ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR))
        return json.loads(r.body).get("consumerIdList") or [] if r.code == ResponseCode.SUCCESS else []

    async def send_back(self, addr: str, msg: StoredMessage, group: str, *, delay_level: int = 0,
                        max_reconsume_times: int = 16) -> None:
        await self.invoke(addr, RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": msg.physical_offset, "group": group, "delayLevel": delay_level,
            "originMsgId": msg.uniq_key or msg.msg_id, "originTopic": msg.topic, "unitMode": False,
            "maxReconsumeTimes": max_reconsume_times}, timeout_s=5.0)

    async def lock_batch(self, addr: str, group: str, client_id: str, queues: list[MessageQueue]) -> set[MessageQueue]:
        body = json.dumps({"consumerGroup": group, "clientId": client_id,
                           "mqSet": [q.to_json() for q in queues]}).encode()
        r = await self.invoke(addr, RequestCode.LOCK_BATCH_MQ, {}, body)
        return {MessageQueue(q["topic"], q["brokerName"], int(q["queueId"]))
                for q in json.loads(r.body).get("lockOKMQSet") or ()}

    async def unlock_batch(self, addr: str, group: str, client_id: str, queues: list[MessageQueue]) -> None:
        body = json.dumps({"consumerGroup": group, "clientId": client_id,
                           "mqSet": [q.to_json() for q in queues]}).encode()
        await self.invoke(addr, RequestCode.UNLOCK_BATCH_MQ, {}, body)

    # -- queries and admin -------------------------------------------------------------------

    async def query_message(self, addr: str, topic: str, key: str, max_num: int = 32, begin_ms: int = 0,
                            end_ms: int | None = None, *, unique: bool = False) -> list[StoredMessage]:
        r = await self.invoke(addr, RequestCode.QUERY_MESSAGE, {
            "topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin_ms,
            "endTimestamp": end_ms if end_ms is not None else int(time.time() * 1000) + 60_000,
            "_UNIQUE_KEY_QUERY": str(unique).lower()}, expect=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND))
        return split_records(r.body) if r.code == ResponseCode.SUCCESS else []

    async def view_message(self, addr: str, offset: int) -> StoredMessage:
        r = await self.invoke(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
        return StoredMessage(r.body)

    async def create_topic(self, addr: str, topic: str, *, read_queues: int = 8, write_queues: int = 8,
                           perm: int = 6, order: bool = False, attributes: str | None = None) -> None:
        """UPDATE_AND_CREATE_TOPIC; *attributes* as mqadmin's ``-a``: ``+message.type=FIFO,-key``."""
        header = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": read_queues,
                  "writeQueueNums": write_queues, "perm": perm, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                  "order": order}
        if attributes:
            header["attributes"] = attributes
        await self.invoke(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, header)

    async def topic_config(self, addr: str, topic: str) -> dict:
        """GET_TOPIC_CONFIG: the broker's TopicConfig of *topic* (MQClientError TOPIC_NOT_EXIST if none)."""
        r = await self.invoke(addr, RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
        return fastjson.loads(r.body)

    async def reset_offset(self, addr: str, topic: str, group: str, timestamp_ms: int) -> dict[MessageQueue, int]:
        """INVOKE_BROKER_TO_RESET_OFFSET: the group's offsets on *topic* to the first message stored at
        or after *timestamp_ms* (negative: each queue's end); the new offset per queue."""
        r = await self.invoke(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {
            "topic": topic, "group": group, "timestamp": timestamp_ms, "isForce": True, "queueId": -1})
        table = fastjson.loads(r.body or b"{}").get("offsetTable") or {}
        return {MessageQueue(k["topic"], k["brokerName"], int(k["queueId"])): int(v) for k, v in table.items()}

    async def broker_config(self, addr: str) -> dict[str, str]:
        """GET_BROKER_CONFIG: every setting by its RocketMQ key, as text."""
        r = await self.invoke(addr, RequestCode.GET_BROKER_CONFIG, {})
        out = {}
        for line in (r.body or b"").decode().splitlines():
            key, sep, value = line.partition("=")
            if sep and not key.startswith("#"):
                out[key.strip()] = value.strip()
        return out

    async def update_broker_config(self, addr: str, settings: dict[str, str]) -> str:
        """UPDATE_BROKER_CONFIG; the broker's remark says which keys applied now and which need a restart."""
        body = "".join(f"{k}={v}\n" for k, v in settings.items()).encode()
        r = await self.invoke(addr, RequestCode.UPDATE_BROKER_CONFIG, {}, body)
        return r.remark or ""

    async def delete_topic_in_broker(self, addr: str, topic: str) -> None:
        await self.invoke(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})

    async def all_topic_config(self, addr: str) -> dict:
        r = await self.invoke(addr, RequestCode.GET_ALL_TOPIC_CONFIG, {})
        return fastjson.loads(r.body)

    async def consume_stats(self, addr: str, group: str, topic: str = "") -> dict[MessageQueue, dict]:
        """Per queue: brokerOffset, consumerOffset, lastTimestamp ({} when the group has none here)."""
        header = {"consumerGroup": group}
        if topic:
            header["topic"] = topic
        r = await self.invoke(addr, RequestCode.GET_CONSUME_STATS, header,
                              expect=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE))
        if r.code != ResponseCode.SUCCESS:
            return {}
        table = fastjson.loads(r.body).get("offsetTable") or {}
        return {MessageQueue(k["topic"], k["brokerName"], int(k["queueId"])): v for k, v in table.items()}

    async def all_groups(self, addr: str) -> dict:
        r = await self.invoke(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, {})
        return json.loads(r.body).get("subscriptionGroupTable") or {}

    async def runtime_info(self, addr: str) -> dict[str, str]:
        r = await self.invoke(addr, RequestCode.GET_BROKER_RUNTIME_INFO, {})
        return json.loads(r.body).get("table") or {}

