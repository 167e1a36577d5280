"""The broker's Prometheus metrics, with RocketMQ 5's names and labels, built when scraped.

RocketMQ 5.1+ exports its broker metrics through OpenTelemetry (``BrokerMetricsManager``,
``RemotingMetricsManager``, ``DefaultStoreMetricsManager``); dashboards and alerts written for it
select these series, so rocketq uses the same names, label names and label values:

=========================================  ========  ===================================================
series                                     type      labels besides cluster, node_type, node_id
=========================================  ========  ===================================================
rocketmq_messages_in_total                 counter   topic, message_type, is_system
rocketmq_throughput_in_total (bytes)       counter   topic, message_type, is_system
rocketmq_message_size (bytes)              histogram topic, message_type, is_system
rocketmq_messages_out_total                counter   topic, consumer_group, is_retry, is_system
rocketmq_throughput_out_total (bytes)      counter   topic, consumer_group, is_retry, is_system
rocketmq_consumer_lag_messages             gauge     topic, consumer_group, is_retry, is_system
rocketmq_consumer_ready_messages           gauge     (the same)
rocketmq_consumer_inflight_messages        gauge     (the same)
rocketmq_consumer_lag_latency (ms)         gauge     (the same)
rocketmq_send_to_dlq_messages_total        counter   topic, consumer_group, is_system
rocketmq_rpc_latency (ms)                  histogram protocol_type, request_code, response_code
rocketmq_producer_connections              gauge     language, version, protocol_type
rocketmq_consumer_connections              gauge     consumer_group, language, version, consume_mode,
                                                     protocol_type, is_system
rocketmq_processor_watermark               gauge     processor
rocketmq_storage_size (bytes)              gauge     storage_type, storage_medium
rocketmq_storage_flush_behind_bytes        gauge     storage_type, storage_medium
rocketmq_storage_dispatch_behind_bytes     gauge     storage_type, storage_medium
rocketmq_storage_message_reserve_time (ms) gauge     storage_type, storage_medium
rocketmq_timer_dequeue_total               counter   storage_type, storage_medium
rocketmq_timer_enqueue_lag                 gauge     storage_type, storage_medium
rocketmq_timer_dequeue_latency (ms)        gauge     storage_type, storage_medium
=========================================  ========  ===================================================

rocketq's own figures carry the ``rocketq_`` prefix: the group commit (fsyncs, seconds in them,
producers waiting), open remoting connections, commitlog bytes, recalls pending in the timer.
``cluster`` is brokerClusterName, ``node_type`` is ``broker``, ``node_id`` is brokerName, as RocketMQ
labels them; request and response codes are RocketMQ's constant names in lower case.

Where rocketq differs: retry and DLQ topics are left out of messages_in as RocketMQ leaves them
out; rpc_latency has no ``is_long_polling`` / ``result`` labels (a held pull is timed whole) and
covers the remoting protocol only; messages_out counts remoting pulls and gRPC PullMessage (a gRPC
PullMessage names no group: ``consumer_group`` is empty there), not gRPC ReceiveMessage.

Everything is read from plain ints (:class:`rocketq.broker.stats.BrokerStats`) and from the
broker's state when ``collect`` runs, on the event loop; nothing on the request path touches a
Prometheus object.  Lag series cover at most ``MAX_LAG_SERIES`` (group, topic) pairs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from rocketq.broker.stats import MESSAGE_SIZE_BUCKETS_BYTES, RPC_LATENCY_BUCKETS_MS
from rocketq.common.validation import is_system_topic
from rocketq.remoting.codes import RequestCode, ResponseCode

MAX_LAG_SERIES = 2_000            # (group, topic) pairs the lag gauges cover
SYSTEM_GROUP_PREFIX = "cid_rmq_sys_"      # RocketMQ's MixAll.CID_RMQ_SYS_PREFIX, compared in lower case
RETRY_PREFIX, DLQ_PREFIX = "%RETRY%", "%DLQ%"
BROKER_PERMISSION_RW = 6
_COMMON = ("cluster", "node_type", "node_id")
_STORE = _COMMON + ("storage_type", "storage_medium")
_LAG = _COMMON + ("topic", "consumer_group", "is_retry", "is_system")
_REQUEST_NAMES = {int(c): c.name.lower() for c in RequestCode}
_RESPONSE_NAMES = {int(c): c.name.lower() for c in ResponseCode}


def _flag(value: bool) -> str:
    return "true" if value else "false"


def is_system_group(group: str) -> bool:
    return group.lower().startswith(SYSTEM_GROUP_PREFIX)


def code_name(names: dict[int, str], code) -> str:
    return names.get(code, str(code)) if isinstance(code, int) else str(code)


def histogram_buckets(bounds, counts) -> list[tuple[str, int]]:
    """Cumulative (le, count) pairs from per-bucket *counts* (the last one: over every bound)."""
    out, total = [], 0
    for bound, n in zip(bounds, counts):
        total += n
        out.append((str(float(bound)), total))       # le="1024.0", as Prometheus writes bounds
    out.append(("+Inf", total + counts[-1]))
    return out


class BrokerCollector(Collector):
    """Collects one broker's metrics (register it in a ``CollectorRegistry`` of its own)."""

    def __init__(self, broker, *, clock=time.time):
        self._broker = broker
        self._clock = clock
        s = broker.settings
        self._common = (s.cluster_name, "broker", s.broker_name)

    def collect(self) -> Iterator:
        yield from self._messages_in()
        yield from self._messages_out()
        yield from self._lag()
        yield from self._rpc()
        yield from self._connections()
        yield from self._store()
        yield from self._timer()

    # -- requests ----------------------------------------------------------------------------

    def _messages_in(self):
        labels = _COMMON + ("topic", "message_type", "is_system")
        msgs = CounterMetricFamily("rocketmq_messages_in_total", "Total number of incoming messages", labels=labels)
        size = CounterMetricFamily("rocketmq_throughput_in_total", "Total traffic of incoming messages (bytes)",
                                   labels=labels)
        hist = HistogramMetricFamily("rocketmq_message_size", "Incoming messages size (bytes)", labels=labels)
        for (topic, kind), row in list(self._broker.stats.puts.items()):
            if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
                continue
            values = (*self._common, topic, kind, _flag(is_system_topic(topic)))
            msgs.add_metric(values, row[0])
            size.add_metric(values, row[1])
            hist.add_metric(values, histogram_buckets(MESSAGE_SIZE_BUCKETS_BYTES, row[2:]), sum_value=row[1])
        return msgs, size, hist

    def _messages_out(self):
        msgs = CounterMetricFamily("rocketmq_messages_out_total", "Total number of outgoing messages", labels=_LAG)
        size = CounterMetricFamily("rocketmq_throughput_out_total", "Total traffic of outgoing messages (bytes)",
                                   labels=_LAG)
        for (topic, group), row in list(self._broker.stats.gets.items()):
            values = self._lag_labels(topic, group)
            msgs.add_metric(values, row[0])
            size.add_metric(values, row[1])
        dlq = CounterMetricFamily("rocketmq_send_to_dlq_messages_total", "Consumer send to DLQ messages",
                                  labels=_COMMON + ("topic", "consumer_group", "is_system"))
        for (group, topic), row in list(self._broker.stats.dead_lettered.items()):
            dlq.add_metric((*self._common, topic, group,
                            _flag(is_system_topic(topic) or is_system_group(group))), row[0])
        return msgs, size, dlq

    def _lag_labels(self, topic: str, group: str) -> tuple[str, ...]:
        return (*self._common, topic, group, _flag(topic.startswith(RETRY_PREFIX)),
                _flag(is_system_topic(topic) or is_system_group(group)))

    def _rpc(self):
        hist = HistogramMetricFamily("rocketmq_rpc_latency", "Rpc latency (milliseconds)",
                                     labels=_COMMON + ("protocol_type", "request_code", "response_code"))
        for (request, response), row in list(self._broker.stats.rpcs.items()):
            hist.add_metric((*self._common, "remoting", code_name(_REQUEST_NAMES, request),
                             code_name(_RESPONSE_NAMES, response)),
                            histogram_buckets(RPC_LATENCY_BUCKETS_MS, row[2:]), sum_value=row[1] / 1e6)
        watermark = GaugeMetricFamily("rocketmq_processor_watermark", "Request processor watermark",
                                      labels=_COMMON + ("processor",))
        flow = getattr(self._broker, "flow_control", None)
        watermark.add_metric((*self._common, "send"), flow.inflight_sends if flow is not None else 0)
        perm = GaugeMetricFamily("rocketmq_broker_permission", "Broker permission", labels=_COMMON)
        perm.add_metric(self._common, BROKER_PERMISSION_RW)
        return hist, watermark, perm

    # -- consumers ---------------------------------------------------------------------------

    def _lag(self):
        fams = {name: GaugeMetricFamily(name, doc, labels=_LAG) for name, doc in (
            ("rocketmq_consumer_lag_messages", "Consumer lag messages"),
            ("rocketmq_consumer_ready_messages", "Consumer ready messages"),
            ("rocketmq_consumer_inflight_messages", "Consumer inflight messages"),
            ("rocketmq_consumer_lag_latency", "Consumer lag time (milliseconds)"))}
        now_ms = int(self._clock() * 1000)
        for group, topic, lag, ready, inflight, oldest_ms in self._lag_rows():
            values = self._lag_labels(topic, group)
            fams["rocketmq_consumer_lag_messages"].add_metric(values, lag)
            fams["rocketmq_consumer_ready_messages"].add_metric(values, ready)
            fams["rocketmq_consumer_inflight_messages"].add_metric(values, inflight)
            fams["rocketmq_consumer_lag_latency"].add_metric(values, max(0, now_ms - oldest_ms) if oldest_ms else 0)
        return fams.values()

    def _lag_rows(self):
        """(group, topic, lag, ready, inflight, store time of the oldest unconsumed message or 0)."""
        b = self._broker
        pulled = b.stats.pull_offsets
        for key in list(b.offsets.table)[:MAX_LAG_SERIES]:
            topic, _, group = key.partition("@")
            tc = b.topics.get(topic)
            if tc is None or not group:
                continue
            committed = b.offsets.offsets(group, topic)
            lag = ready = inflight = 0
            oldest = 0
            for qid in range(tc.read_queue_nums):
                top = b.store.max_offset(topic, qid)
                done = max(0, committed.get(qid, 0))
                asked = max(done, min(top, pulled.get((group, topic, qid), done)))
                lag += max(0, top - done)
                ready += max(0, top - asked)
                inflight += asked - done
                if top > done:
                    at = b.store.store_time_at(topic, qid, done)
                    oldest = min(oldest, at) if oldest and at else (at or oldest)
            yield group, topic, lag, ready, inflight, oldest

    def _connections(self):
        clients = self._broker.clients
        producers = GaugeMetricFamily("rocketmq_producer_connections", "Producer connections",
                                      labels=_COMMON + ("language", "version", "protocol_type"))
        counted: dict[tuple, int] = {}
        for members in list(clients.producers.values()):
            for conn in list(members.values()):
                key = _client_of(conn)
                counted[key] = counted.get(key, 0) + 1
        for (language, version), n in counted.items():
            producers.add_metric((*self._common, language, version, "remoting"), n)
        consumers = GaugeMetricFamily("rocketmq_consumer_connections", "Consumer connections",
                                      labels=_COMMON + ("consumer_group", "language", "version", "consume_mode",
                                                        "protocol_type", "is_system"))
        counted = {}
        for name, info in list(clients.consumers.items()):
            mode = "push" if info.consume_type == "CONSUME_PASSIVELY" else "pull"
            for conn, _ in list(info.clients.values()):
                key = (name, *_client_of(conn), mode)
                counted[key] = counted.get(key, 0) + 1
        for (name, language, version, mode), n in counted.items():
            consumers.add_metric((*self._common, name, language, version, mode, "remoting",
                                  _flag(is_system_group(name))), n)
        server = getattr(self._broker, "server", None)
        open_conns = GaugeMetricFamily("rocketq_remoting_connections", "Open connections on the broker port",
                                       labels=_COMMON)
        open_conns.add_metric(self._common, len(server.connections) if server is not None else 0)
        return producers, consumers, open_conns

    # -- store and timer ---------------------------------------------------------------------

    def _store(self):
        store = self._broker.store
        values = (*self._common, "local", "disk")
        out = []

        def gauge(name: str, doc: str, value: float) -> None:
            g = GaugeMetricFamily(name, doc, labels=_STORE)
            g.add_metric(values, value)
            out.append(g)
        if not store.running:
            return out
        gauge("rocketmq_storage_size", "Broker storage size (bytes used on the store's file system)",
              _used_bytes(store.config.store_path))
        gauge("rocketmq_storage_flush_behind_bytes", "Broker flush behind bytes",
              max(0, store.commitlog.max_offset() - store.commitlog.flushed_offset()))
        gauge("rocketmq_storage_dispatch_behind_bytes", "Broker dispatch behind bytes", store.dispatch_behind_bytes())
        earliest = store.earliest_physical_time()
        if earliest > 0:
            gauge("rocketmq_storage_message_reserve_time", "Broker message reserve time (milliseconds)",
                  max(0, int(self._clock() * 1000) - earliest))
        gauge("rocketq_commitlog_bytes", "Bytes between the CommitLog's first and last offset",
              store.commitlog.max_offset() - store.commitlog.min_offset())
        gc = store.group_commit
        if gc is not None:
            syncs = CounterMetricFamily("rocketq_group_commit_syncs_total", "fdatasync calls of the group commit "
                                        "(SYNC_FLUSH): one serves every producer waiting for it", labels=_STORE)
            syncs.add_metric(values, gc.syncs)
            took = CounterMetricFamily("rocketq_group_commit_seconds_total", "Seconds spent in group-commit flushes",
                                       labels=_STORE)
            took.add_metric(values, gc.sync_seconds)
            out += [syncs, took]
            gauge("rocketq_group_commit_waiting", "Producers waiting for the next group-commit fsync", gc.waiting())
        return out

    def _timer(self):
        timer = getattr(self._broker, "timer", None)
        if timer is None or not timer.running:
            return ()
        from rocketq.broker.timer_messages import TIMER_TOPIC
        values = (*self._common, "local", "disk")
        delivered = CounterMetricFamily("rocketmq_timer_dequeue_total", "Total number of timer dequeue",
                                        labels=_STORE)
        delivered.add_metric(values, timer.delivered)
        enqueue_lag = GaugeMetricFamily("rocketmq_timer_enqueue_lag", "Timer enqueue messages lag", labels=_STORE)
        enqueue_lag.add_metric(values, max(0, self._broker.store.max_offset(TIMER_TOPIC, 0) - timer.ingest_offset))
        latency = GaugeMetricFamily("rocketmq_timer_dequeue_latency", "Timer dequeue latency (milliseconds)",
                                    labels=_STORE)
        latency.add_metric(values, max(0, int(self._clock() * 1000) - timer.watermark_ms))
        recalls = GaugeMetricFamily("rocketq_timer_pending_recalls", "Recalled timer messages not yet due",
                                    labels=_STORE)
        recalls.add_metric(values, timer.pending_recalls)
        return delivered, enqueue_lag, latency, recalls


def _client_of(conn) -> tuple[str, str]:
    """(language, version) a client's heartbeat said, in lower case as RocketMQ labels them."""
    language, version = getattr(conn, "context", {}).get("client", ("unknown", "unknown"))
    return str(language).lower(), str(version).lower()


def _used_bytes(path) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return (st.f_blocks - st.f_bfree) * st.f_frsize
