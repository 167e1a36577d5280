"""Shared by the broker tests: a real broker on a loopback port, and raw requests for it."""


from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode
from rocketq.store import StoreConfig
from rocketq.store.record import StoredMessage


def store_config(path, **kw):
    return StoreConfig(**{"store_path": path, "commitlog_file_size": 1 << 20, "consume_queue_entries": 1000,
                          "index_slots": 1009, "index_max_entries": 4000, **kw})


def split_records(body: bytes) -> list[StoredMessage]:
    out, pos = [], 0
    while pos < len(body):
        size = int.from_bytes(body[pos:pos + 4], "big")
        out.append(StoredMessage(body[pos:pos + size]))
        pos += size
    return out


async def with_broker(tmp_path, scenario, *, store: dict | None = None, **settings):
    broker = await Broker(BrokerSettings(port=0, **settings), store_config(tmp_path, **(store or {}))).start()
    client = RemotingClient("127.0.0.1", broker.server.port)
    try:
        await scenario(broker, client)
    finally:
        await client.close()
        await broker.close()


def send_v2(topic, body, queue_id=0, props="TAGS\x01TagA\x02KEYS\x01order-1\x02"):
    # numbers and booleans as a JSON-only client sends them (PROTOCOLS.md A)
    return RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {
        "a": "PID_TEST", "b": topic, "c": "TBW102", "d": 4, "e": queue_id, "f": 0, "g": 1795336474369, "h": 0,
        "i": props, "j": 0, "k": False}, body)


def pull(topic, queue_id, offset, *, suspend_ms=0, subscription="*"):
    return RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "G", "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": 0x2 if suspend_ms else 0, "commitOffset": 0, "suspendTimeoutMillis": suspend_ms,
        "subscription": subscription, "subVersion": 0})


async def transaction_producer(port: int, on_check, *, group: str = "PID_TX") -> RemotingClient:
    """A producer connection of *group*, its heartbeat sent, whose CHECK_TRANSACTION_STATE requests from the
    broker go to *on_check* (called with the request; nothing is answered). The caller closes it."""
    import json

    async def handler(conn, cmd):
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
            on_check(cmd)
        return None

    producer = RemotingClient("127.0.0.1", port, handler=handler)
    hb = {"clientID": "p1", "producerDataSet": [{"groupName": group}], "consumerDataSet": []}
    await producer.invoke(RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, json.dumps(hb).encode()),
                          timeout_s=5)
    return producer
