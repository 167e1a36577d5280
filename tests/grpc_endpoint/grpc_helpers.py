"""A real broker + gRPC endpoint on loopback ports, run on its own event-loop thread.

The official Python 5.x client is synchronous (it keeps its own loop on a thread of its own), so
the broker cannot share the test's thread: :class:`ServerThread` owns a loop thread and runs
coroutines on it for the test.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from concurrent.futures import Future

from broker_helpers import store_config

from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.broker.topic_config import TopicConfig
from rocketq.grpc_endpoint import EndpointSettings, GrpcEndpoint

# the endpoint's HTTP/2 server for every ServerThread that does not name one (the broker's default);
# ROCKETQ_TEST_GRPC_TRANSPORT=grpcio runs the whole gRPC suite on grpc.aio
DEFAULT_TRANSPORT = os.environ.get("ROCKETQ_TEST_GRPC_TRANSPORT", BrokerSettings().grpc_transport)
FAST = EndpointSettings(min_invisible_ms=1000, default_invisible_ms=5000, default_long_polling_ms=3000)


class ServerThread:
    def __init__(self, tmp_path, *, endpoint_settings: EndpointSettings = FAST, store_settings: dict | None = None,
                 **broker_settings):
        self.tmp_path = tmp_path
        self._endpoint_settings = endpoint_settings
        self._store_settings = store_settings or {}
        self._grpc_port = 0              # a restart keeps the first start's port (running clients dial it)
        self._broker_settings = {"grpc_transport": DEFAULT_TRANSPORT, **broker_settings}
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="grpc-test-broker", daemon=True)
        self._thread.start()
        self.broker = self.endpoint = None

    def run(self, coro, timeout_s: float = 30.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def call(self, fn, *args, timeout_s: float = 30.0):
        """Run a plain function on the loop thread (state is only touched there)."""
        fut: Future = Future()

        def go():
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:
                fut.set_exception(exc)
        self.loop.call_soon_threadsafe(go)
        return fut.result(timeout_s)

    def start(self) -> ServerThread:
        async def up():
            settings = {"port": 0, "transaction_check_interval_s": 0.3, "transaction_timeout_s": 0.3,
                        "timer_bucket_ms": 1000}
            settings.update(self._broker_settings)
            self.broker = await Broker(BrokerSettings(**settings),
                                       store_config(self.tmp_path, **self._store_settings)).start()
            self.endpoint = await GrpcEndpoint(self.broker, host="127.0.0.1", port=self._grpc_port,
                                               settings=self._endpoint_settings).start()
            self._grpc_port = self.endpoint.port
        self.run(up())
        return self

    def stop(self) -> None:
        async def down():
            if self.endpoint is not None:
                await self.endpoint.close()
            if self.broker is not None:
                await self.broker.close()
        try:
            self.run(down(), timeout_s=60)
        finally:
            self.broker = self.endpoint = None

    def shutdown(self) -> None:
        self.stop()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()

    @property
    def access_point(self) -> str:
        return f"127.0.0.1:{self.endpoint.port}"

    def create_topic(self, name: str, queues: int = 4, **attributes) -> None:
        self.call(self.broker.topics.update, TopicConfig(name, queues, queues, attributes=dict(attributes)))

    def set_group(self, name: str, **fields) -> None:
        def update():
            from dataclasses import replace
            cfg = self.broker.groups.get(name, create=True)
            self.broker.groups.update(replace(cfg, **fields))
        self.call(update)


def wait_until(predicate, timeout_s: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


def client_config(server: ServerThread, timeout_s: int = 5):
    from rocketmq import ClientConfiguration, Credentials
    return ClientConfiguration(server.access_point, Credentials(), request_timeout=timeout_s)


def message(topic: str, body: bytes, *, tag: str | None = "TagA", keys=None, group=None, deliver_at_s=None,
            props=None):
    from rocketmq import Message
    m = Message()
    m.topic = topic
    m.body = body
    if tag:
        m.tag = tag
    if keys:
        m.keys = keys
    if group:
        m.message_group = group
    if deliver_at_s:
        m.delivery_timestamp = deliver_at_s
    for k, v in (props or {}).items():
        m.add_property(k, v)
    return m


def receive_all(consumer, count: int, *, invisible_s: int = 10, timeout_s: float = 20.0, batch: int = 16):
    """Receive until *count* messages arrived (or fail after *timeout_s*)."""
    got = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"received {len(got)} of {count} messages in {timeout_s} s")
        got += consumer.receive(batch, invisible_s)
    return got


def sent_and_received(pub_config, sub_config, topic: str, group: str, n: int = 3) -> None:
    """The official client sends *n* messages with *pub_config* and receives and acks exactly those with
    *sub_config* in *group*."""
    from rocketmq import FilterExpression, Producer, SimpleConsumer
    p = Producer(pub_config, (topic,))
    p.startup()
    try:
        sent = {p.send(message(topic, f"m{i}".encode())).message_id for i in range(n)}
    finally:
        p.shutdown()
    c = SimpleConsumer(sub_config, group, {topic: FilterExpression()})
    c.startup()
    try:
        got = receive_all(c, n)
        assert {m.message_id for m in got} == sent
        for m in got:
            c.ack(m)
    finally:
        c.shutdown()


def remoting_call(server: ServerThread, build, timeout_s: float = 10.0):
    """One remoting request (built on the loop thread by *build*) to the server's broker port."""
    from rocketq.remoting import RemotingClient

    async def go():
        client = RemotingClient("127.0.0.1", server.broker.server.port)
        try:
            return await client.invoke(build(), timeout_s=timeout_s)
        finally:
            await client.close()
    return server.run(go())


def shutdown_within(client, timeout_s: float = 15.0) -> None:
    """``client.shutdown()`` on a daemon thread: a client stuck in its consume loop (what a failing
    test may have caused) must not hang the test run; the test has failed already then."""
    t = threading.Thread(target=client.shutdown, name="client-shutdown", daemon=True)
    t.start()
    t.join(timeout_s)


def quicken_client_schedulers(monkeypatch, factor: float, settings_factor: float | None = None) -> None:
    """Make the official 5.x client's periodic tasks (heartbeat 10 s, route refresh 30 s, push
    assignment 5 s; the settings tick, 300 s, by *settings_factor* when given) run *factor* times
    as often in this process.  Their behaviour is unchanged; the tests that need several of their
    rounds (a restart, a stream reopened at the settings tick) fit the CI budget this way.
    Call before the clients start."""
    from rocketmq.v5.client import client, client_route_manager, client_telemetry_manager
    from rocketmq.v5.client.scheduler import ClientScheduler
    from rocketmq.v5.consumer.push import push_consumer

    def quick(f):
        class Quick(ClientScheduler):
            def __init__(self, thread_name, target, initial_delay, delay, loop=None):
                super().__init__(thread_name, target, initial_delay / f, delay / f, loop)
        return Quick

    for module in (client, client_route_manager, push_consumer):
        monkeypatch.setattr(module, "ClientScheduler", quick(factor))
    monkeypatch.setattr(client_telemetry_manager, "ClientScheduler", quick(settings_factor or factor))


def make_telemetry_streams_on_the_client_loop() -> None:
    """Work around a thread bug of rocketmq-python-client 5.1.2 (not of the server under test).

    The client creates its Telemetry gRPC call on whatever thread asks for it: the main thread at
    start-up, and at a settings tick the scheduler thread or the io loop thread (whichever completes
    the failed settings write's callback).  grpc.aio takes the creating thread's current event loop;
    a thread without one - the main thread after any ``asyncio.run()`` earlier in the process, a
    scheduler thread always - raises "There is no current event loop in thread ...", and the client
    goes without a stream until a later settings tick (300 s): no settings answer (a SimpleConsumer's
    route query then failed in CI), no check-backs.  The client's own channels set its io loop as the
    current loop of the thread that makes them; this does the same where the stream is made.
    Reproduced for the tick by delaying the write callback 0.2 s (the check-back restart test then
    failed every time)."""
    from rocketmq.v5.client import client_telemetry_manager as m
    from rocketmq.v5.client.connection.rpc_client import RpcClient

    original = m.ClientTelemetryManager.retrieve_telemetry_stream_stream_call
    if getattr(original, "made_on_the_client_loop", False):
        return

    def retrieve(self, endpoints, rebuild=False):
        asyncio.set_event_loop(RpcClient.get_channel_io_loop())
        return original(self, endpoints, rebuild)
    retrieve.made_on_the_client_loop = True
    m.ClientTelemetryManager.retrieve_telemetry_stream_stream_call = retrieve
