"""/metrics scraped over HTTP after real traffic: counters match what was sent and consumed, with
RocketMQ 5's names and labels; ACL guards the endpoint; the counters' bounds hold."""

from __future__ import annotations

import asyncio
import base64
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "client"))
from cluster import cluster  # noqa: E402

from rocketq.broker.stats import MAX_SERIES, OVERFLOW_LABEL, BrokerStats  # noqa: E402
from rocketq.client import LitePullConsumer, Message, Producer  # noqa: E402

SENT, CONSUMED_AT_LEAST = 12, 5


async def scrape(port: int, auth: tuple[str, str] | None = None) -> dict:
    """{series name: [(labels, value)]} of one scrape."""
    def get() -> str:
        req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
        if auth:
            req.add_header("Authorization", "Basic " + base64.b64encode(":".join(auth).encode()).decode())
        with urllib.request.urlopen(req, timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/plain; version=")      # the exposition format
            return r.read().decode()
    out: dict = {}
    for family in text_string_to_metric_families(await asyncio.to_thread(get)):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def only(series: list, **labels) -> float:
    hits = [v for lab, v in series if all(lab.get(k) == v2 for k, v2 in labels.items())]
    assert len(hits) == 1, (labels, series)
    return hits[0]


async def _consume(addr: str, group: str, topic: str, at_least: int) -> int:
    consumer = LitePullConsumer(group, addr)
    consumer.subscribe(topic)
    await consumer.start()
    got = []
    try:
        async with asyncio.timeout(30):
            while len(got) < at_least:
                got += await consumer.poll(1.0)
        await consumer.commit()
    finally:
        await consumer.shutdown()
    return len(got)


def test_counters_match_traffic_with_rocketmq_names_and_labels(tmp_path):
    async def scenario():
        async with cluster(tmp_path, metrics_exporter_type="PROM") as c:
            broker = c.brokers[0]
            async with Producer("PID_METRICS", c.addr) as producer:
                for i in range(SENT):
                    await producer.send(Message(topic="MetricsTopic", body=b"m" * 100, keys=f"k{i}"))
                await producer.send_batch([Message(topic="MetricsTopic", body=b"b" * 2000) for _ in range(3)])
            consumed = await _consume(c.addr, "GID_METRICS", "MetricsTopic", SENT + 3)
            m = await scrape(broker.metrics.port)
            return consumed, m
    consumed, m = asyncio.run(scenario())
    common = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-a"}
    topic = {**common, "topic": "MetricsTopic", "message_type": "normal", "is_system": "false"}
    assert only(m["rocketmq_messages_in_total"], **topic) == SENT + 3
    thrown_in = only(m["rocketmq_throughput_in_total"], **topic)
    assert thrown_in >= SENT * 100 + 3 * 2000
    # RocketMQ observes one size per put: written bytes / messages (13 puts: 12 single, 1 batch of ~2 KB each)
    assert only(m["rocketmq_message_size_count"], **topic) == SENT + 1
    assert only(m["rocketmq_message_size_bucket"], **topic, le="1024.0") == SENT
    assert only(m["rocketmq_message_size_bucket"], **topic, le="4096.0") == SENT + 1
    out = {**common, "topic": "MetricsTopic", "consumer_group": "GID_METRICS", "is_retry": "false", "is_system": "false"}
    assert only(m["rocketmq_messages_out_total"], **out) == consumed == SENT + 3
    assert only(m["rocketmq_throughput_out_total"], **out) > 0
    assert only(m["rocketmq_consumer_lag_messages"], **out) == 0        # everything consumed and committed
    assert only(m["rocketmq_consumer_ready_messages"], **out) == 0
    sends = [v for lab, v in m["rocketmq_rpc_latency_count"]
             if lab["request_code"] == "send_message_v2" and lab["response_code"] == "success"
             and lab["protocol_type"] == "remoting"]
    assert sends == [SENT]
    assert any(lab["request_code"] == "send_batch_message" for lab, _ in m["rocketmq_rpc_latency_count"])
    assert any(lab["request_code"] == "pull_message" for lab, _ in m["rocketmq_rpc_latency_count"])
    for name in ("rocketmq_storage_flush_behind_bytes", "rocketmq_storage_dispatch_behind_bytes",
                 "rocketmq_storage_size", "rocketmq_storage_message_reserve_time"):
        assert only(m[name], **common, storage_type="local", storage_medium="disk") >= 0
    assert only(m["rocketmq_storage_size"], **common) > 0
    assert only(m["rocketmq_timer_dequeue_total"], **common) == 0
    assert only(m["rocketmq_processor_watermark"], **common, processor="send") == 0
    assert only(m["rocketq_remoting_connections"], **common) >= 0


def test_lag_rises_with_unconsumed_messages_and_inflight_counts_pulled_ones(tmp_path):
    async def scenario():
        async with cluster(tmp_path, metrics_exporter_type="PROM") as c:
            async with Producer("PID_LAG", c.addr) as producer:
                for _ in range(4):
                    await producer.send(Message(topic="LagTopic", body=b"x"))
            await _consume(c.addr, "GID_LAG", "LagTopic", 4)
            async with Producer("PID_LAG", c.addr) as producer:
                for _ in range(7):
                    await producer.send(Message(topic="LagTopic", body=b"y"))
            return await scrape(c.brokers[0].metrics.port)
    m = asyncio.run(scenario())
    labels = {"topic": "LagTopic", "consumer_group": "GID_LAG"}
    assert only(m["rocketmq_consumer_lag_messages"], **labels) == 7
    assert only(m["rocketmq_consumer_ready_messages"], **labels) + only(
        m["rocketmq_consumer_inflight_messages"], **labels) == 7
    assert only(m["rocketmq_consumer_lag_latency"], **labels) >= 0


def test_acl_on_metrics_need_an_admin_accounts_basic_credentials(tmp_path):
    acl = tmp_path / "plain_acl.yml"
    acl.write_text("accounts:\n"
                   "  - accessKey: RocketMQ\n    secretKey: '12345678'\n    admin: true\n"
                   "  - accessKey: reader\n    secretKey: readerSecret\n    admin: false\n"
                   "    defaultTopicPerm: SUB\n    defaultGroupPerm: SUB\n")

    async def scenario():
        async with cluster(tmp_path, metrics_exporter_type="PROM", acl_enable=True, acl_file=str(acl)) as c:
            port = c.brokers[0].metrics.port
            codes = []
            for auth in (None, ("RocketMQ", "wrong"), ("reader", "readerSecret"), ("nobody", "x")):
                try:
                    await scrape(port, auth)
                    codes.append(200)
                except urllib.error.HTTPError as exc:
                    codes.append(exc.code)
                    assert exc.headers["WWW-Authenticate"].startswith("Basic")
            ok = await scrape(port, ("RocketMQ", "12345678"))
            return codes, ok
    codes, ok = asyncio.run(scenario())
    assert codes == [401, 401, 401, 401]
    assert "rocketmq_broker_permission" in ok


def test_series_tables_are_bounded_against_made_up_names():
    stats = BrokerStats()
    for i in range(MAX_SERIES + 50):
        stats.put(f"T{i}", 1, 10)
        stats.rpc(i, 0, 1000)
    assert len(stats.puts) <= MAX_SERIES + 1 and len(stats.rpcs) <= MAX_SERIES + 1
    assert stats.puts[(OVERFLOW_LABEL, OVERFLOW_LABEL)][0] == 50
    assert sum(row[0] for row in stats.puts.values()) == MAX_SERIES + 50


def test_metrics_are_off_unless_configured_and_a_bad_exporter_type_is_refused(tmp_path):
    from rocketq.broker.broker import BrokerSettings
    with pytest.raises(ValueError, match="metricsExporterType"):
        BrokerSettings(metrics_exporter_type="OTLP_GRPC")

    async def scenario():
        async with cluster(tmp_path) as c:
            return c.brokers[0].metrics, [w for w, _, _ in c.brokers[0].listeners()]
    metrics, listeners = asyncio.run(scenario())
    assert metrics is None and "metrics" not in listeners
