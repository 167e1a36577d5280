"""``format("rocketq")``: topics as DataFrames, batch and streaming, and the sink back into topics.

Source options (names follow Spark's Kafka source where they fit):

``namesrv`` (or ``endpoints``)   NameServer address(es), ``host:port[;host:port]`` or comma-separated
``topics`` / ``topicPattern``     comma-separated topics, or a regular expression over the topic list
``startingOffsets``              ``earliest`` | ``latest`` | JSON ``{"T": {"broker-a": {"0": 42}}}``
                                 (-2 earliest, -1 latest; queues not named start at earliest).
                                 Default ``earliest`` for batch, ``latest`` for streaming
``endingOffsets``                batch only: ``latest`` (default) | JSON as above
``startingTimestamp`` / ``endingTimestamp``  ms: offsets from the broker's search by store time
``maxOffsetsPerTrigger``         streaming: messages per micro-batch, shared across queues by backlog
``consumerGroup``                pull as this group and commit the query's progress as its consumer
                                 offsets (one batch behind Spark's checkpoint), so lag tools see it
``tags``                         ``a || b`` or ``a,b``: only messages with these tags
``failOnDataLoss``               ``true`` (default) fail when offsets are gone; ``false`` warn and skip
``accessKey`` / ``secretKey``    ACL credentials; ``tls``, ``tlsCaFile``, ``tlsCertFile`` / ``tlsKeyFile``,
                                 ``tlsInsecure``: TLS; ``profile``: a client profile.  Options win over
                                 ROCKETQ_* variables and the profile file, read in each process
                                 (:mod:`rocketq.spark.options`); the sink takes the same options

One input partition per (topic, broker, queue) with messages in range.  Offsets are
``{topic: {broker: {queue: offset}}}``; queues and brokers that appear between micro-batches
are picked up from their earliest offset.  ``Trigger.AvailableNow`` freezes the end offsets
when the query starts.  The sink is in :mod:`rocketq.spark.sink`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from rocketq.spark import options as opt
from rocketq.spark.broker_io import Catalog, QueueRef, flatten, nest, parse_offsets_json
from rocketq.spark.decode import TOPIC_COLUMNS, ddl
from rocketq.spark.queue_reader import DataLossError, QueueTask, read_queue

log = logging.getLogger(__name__)

DEFAULT_GROUP = "rocketq-spark"
EARLIEST, LATEST = -2, -1


@dataclass
class QueueRange(InputPartition):
    task: QueueTask


class _Settings:
    """The source's options, parsed once on the driver (plain data: pickled with the reader)."""

    def __init__(self, options, *, streaming: bool):
        self.access = opt.access_spec(options)
        self.namesrvs = opt.namesrvs(options, self.access.resolve())
        self.topics = opt.listing(options, "topics") or opt.listing(options, "subscribe")
        self.pattern = options.get("topicPattern") or options.get("subscribePattern")
        if bool(self.topics) == bool(self.pattern):
            raise opt.OptionError("give exactly one of options 'topics' (comma-separated) and 'topicPattern'")
        self.starting = str(options.get("startingOffsets") or ("latest" if streaming else "earliest")).strip()
        self.ending = str(options.get("endingOffsets") or "latest").strip()
        self.starting_ts = opt.integer(options, "startingTimestamp", None, minimum=0)
        self.ending_ts = opt.integer(options, "endingTimestamp", None, minimum=0)
        self.max_per_trigger = opt.integer(options, "maxOffsetsPerTrigger", None, minimum=1)
        self.group = options.get("consumerGroup")
        tags = str(options.get("tags") or "").replace("||", ",")
        self.tags = tuple(sorted({t.strip() for t in tags.split(",") if t.strip() and t.strip() != "*"}))
        self.fail_on_data_loss = opt.boolean(options, "failOnDataLoss", True)
        if streaming and options.get("endingOffsets"):
            raise opt.OptionError("option 'endingOffsets' is for batch queries; a stream runs until stopped "
                                  "(use trigger(availableNow=True) to stop at the offsets of its start)")

    def task(self, ref: QueueRef, start: int, end: int) -> QueueTask:
        return QueueTask(ref, start, end, self.group or DEFAULT_GROUP, self.tags, self.fail_on_data_loss,
                         tuple(self.namesrvs), self.access)


def _resolve(spec: str, timestamp: int | None, option: str, catalog: Catalog, queues: list[QueueRef],
             bounds: dict, default: int, fail_on_data_loss: bool) -> dict:
    """Concrete offsets for *queues* from an offsets option (clamped into each queue's bounds)."""
    if timestamp is not None:
        return catalog.search(queues, timestamp)
    keyed = {(q.topic, q.broker, q.queue_id): q for q in queues}
    if spec.lower() in ("earliest", "latest"):
        wanted = dict.fromkeys(keyed, EARLIEST if spec.lower() == "earliest" else LATEST)
    else:
        given = flatten(parse_offsets_json(spec, option))
        unknown = sorted(set(given) - set(keyed))
        if unknown:
            t, b, q = unknown[0]
            raise opt.OptionError(f"option {option!r} names topic {t} broker {b} queue {q}, which the topics "
                                  f"of this query do not have")
        wanted = {k: given.get(k, default) for k in keyed}
    out = {}
    for k, want in wanted.items():
        lo, hi = bounds[k]
        out[k] = lo if want == EARLIEST else hi if want == LATEST else int(want)
        if not lo <= out[k] <= hi:
            text = (f"option {option!r}: offset {out[k]} of topic {k[0]} broker {k[1]} queue {k[2]} is outside "
                    f"what the broker holds ({lo}..{hi})")
            if fail_on_data_loss:
                raise DataLossError(text + "; set failOnDataLoss=false to start from the nearest offset held")
            log.warning("%s; using %d", text, min(max(out[k], lo), hi))
            out[k] = min(max(out[k], lo), hi)
    return out


class _Planner:
    """Driver-side state shared by the batch and the streaming reader."""

    def __init__(self, settings: _Settings):
        self.settings = settings
        self._catalog: Catalog | None = None

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:               # created where used: sockets do not pickle
            self._catalog = Catalog(self.settings.namesrvs, self.settings.access)
        return self._catalog

    def queues(self) -> list[QueueRef]:
        s = self.settings
        topics = self.catalog.resolve_topics(s.topics, s.pattern)
        return self.catalog.queues(topics)

    def __getstate__(self):
        return {"settings": self.settings, "_catalog": None}


def _ranges(settings: _Settings, queues: list[QueueRef], start: dict, end: dict) -> list[QueueRange]:
    by_key = {(q.topic, q.broker, q.queue_id): q for q in queues}
    out = []
    for key, stop in sorted(end.items()):
        begin = start.get(key, stop)
        if stop > begin and key in by_key:
            out.append(QueueRange(settings.task(by_key[key], begin, stop)))
    return out


class TopicReader(DataSourceReader):
    def __init__(self, options):
        self.settings = _Settings(options, streaming=False)
        planner = _Planner(self.settings)
        queues = planner.queues()
        bounds = planner.catalog.bounds(queues)
        start = _resolve(self.settings.starting, self.settings.starting_ts, "startingOffsets", planner.catalog,
                         queues, bounds, EARLIEST, self.settings.fail_on_data_loss)
        end = _resolve(self.settings.ending, self.settings.ending_ts, "endingOffsets", planner.catalog, queues,
                       bounds, LATEST, self.settings.fail_on_data_loss)
        self._ranges = _ranges(self.settings, queues, start, end)

    def partitions(self):
        return list(self._ranges)

    def read(self, partition):
        if not isinstance(partition, QueueRange):
            return iter(())
        return read_queue(partition.task)


class TopicStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        self.settings = _Settings(options, streaming=True)
        self.planner = _Planner(self.settings)
        self._frozen: dict | None = None
        self._queues: list[QueueRef] = []
        self._latest: dict | None = None

    # -- offsets (driver: one long-lived process per query) ----------------------------------

    def _discover(self) -> tuple[dict, dict]:
        """(max offsets, min offsets) of every queue the query's topics have now."""
        self._queues = self.planner.queues()
        bounds = self.planner.catalog.bounds(self._queues)
        return {k: hi for k, (lo, hi) in bounds.items()}, {k: lo for k, (lo, hi) in bounds.items()}

    def initialOffset(self) -> dict:
        queues = self.planner.queues()
        bounds = self.planner.catalog.bounds(queues)
        return nest(_resolve(self.settings.starting, self.settings.starting_ts, "startingOffsets",
                             self.planner.catalog, queues, bounds, EARLIEST, self.settings.fail_on_data_loss))

    def prepareForTriggerAvailableNow(self) -> None:
        latest, _ = self._discover()
        self._frozen = latest

    def getDefaultReadLimit(self):
        n = self.settings.max_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict, limit) -> dict:
        begin = flatten(start)
        latest, earliest = self._discover()
        if self._frozen is not None:
            latest = {k: min(v, self._frozen.get(k, earliest.get(k, v))) for k, v in latest.items()}
        for k in latest:
            begin.setdefault(k, earliest[k])             # a new queue or broker: from its earliest
        target = {k: max(begin[k], latest.get(k, begin[k])) for k in begin}
        if isinstance(limit, ReadMaxRows):
            target = _share(begin, target, limit.max_rows)
        self._latest = nest({k: max(latest.get(k, v), v) for k, v in target.items()})
        return nest(target)

    def reportLatestOffset(self):
        return self._latest

    def partitions(self, start: dict, end: dict):
        begin, stop = flatten(start), flatten(end)
        known = {(q.topic, q.broker, q.queue_id) for q in self._queues}
        if not known.issuperset(stop):                  # after a restart, or queues new since the last look
            self._queues = self.planner.queues()
        missing = {k for k in stop if k not in begin}
        if missing:                                     # queues new in this batch start at their earliest
            bounds = self.planner.catalog.bounds([q for q in self._queues
                                                  if (q.topic, q.broker, q.queue_id) in missing])
            for k in missing:
                begin[k] = bounds.get(k, (stop[k], stop[k]))[0]
        return _ranges(self.settings, self._queues, begin, stop)

    def read(self, partition):
        return read_queue(partition.task)

    def commit(self, end: dict) -> None:
        group = self.settings.group
        if group:
            try:
                self.planner.catalog.commit(group, self._queues or self.planner.queues(), flatten(end))
            except Exception as exc:             # progress is in Spark's checkpoint: a failed commit only lags
                log.warning("could not commit offsets of group %s: %s", group, exc)


def _share(begin: dict, target: dict, max_rows: int) -> dict:
    """Cap the batch at *max_rows* messages, shared across queues in proportion to their backlog."""
    backlog = {k: target[k] - begin[k] for k in target}
    total = sum(backlog.values())
    if total <= max_rows:
        return target
    out, given = {}, 0
    for k in sorted(backlog):
        take = backlog[k] * max_rows // total
        out[k] = take
        given += take
    for k in sorted(backlog, key=lambda k: -backlog[k]):    # hand out the rounding remainder
        if given >= max_rows:
            break
        if out[k] < backlog[k]:
            out[k] += 1
            given += 1
    return {k: begin[k] + out[k] for k in target}


class RocketqDataSource(DataSource):
    """``format("rocketq")``: read topics (batch, streaming) and write messages (batch, streaming)."""

    @classmethod
    def name(cls) -> str:
        return "rocketq"

    def schema(self):
        return ddl(TOPIC_COLUMNS)

    def reader(self, schema):
        return TopicReader(self.options)

    def streamReader(self, schema):
        return TopicStreamReader(self.options)

    def writer(self, schema, overwrite: bool):
        from rocketq.spark.sink import TopicWriter
        return TopicWriter(self.options, schema)

    def streamWriter(self, schema, overwrite: bool):
        from rocketq.spark.sink import TopicStreamWriter
        return TopicStreamWriter(self.options, schema)
