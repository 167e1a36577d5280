"""``df.write.format("rocketq")`` / ``writeStream.format("rocketq")``: rows sent as messages.

Columns read from each row (any other column is ignored):

``topic``         string; the option ``topic`` is used where the column is absent or null
``body``          binary or string (required, not empty)
``tags``          string
``keys``          string, space-separated keys
``properties``    map<string,string>, user properties
``queue_id``      int: send to this queue (of the first broker that has it)
``sharding_key``  string: messages with the same key go to the same queue (RocketMQ's orderly send)

Options: ``namesrv``, ``topic``, ``producerGroup`` (default ``rocketq-spark-sink``),
``batchSize`` (messages per SEND_BATCH_MESSAGE, default 256), ``maxInFlight`` (batches awaiting
an answer per task, default 4).

Every send result is checked: anything but SEND_OK (or a send error) fails the task, so Spark
retries it or fails the write; no row is dropped silently.  Delivery into the topic is
at-least-once: a retried task sends its rows again (RocketMQ has no idempotent producer).
"""

from __future__ import annotations

import logging
from concurrent import futures
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from rocketq.client.model import SendStatus
from rocketq.common.javahash import java_hash
from rocketq.common.message import Message
from rocketq.spark import broker_io
from rocketq.spark import options as opt

log = logging.getLogger(__name__)

DEFAULT_GROUP = "rocketq-spark-sink"
MAX_BATCH_BYTES = 1 << 20


class SinkError(RuntimeError):
    """A row could not be turned into a message, or the broker did not accept a send."""


@dataclass
class SentCount(WriterCommitMessage):
    messages: int
    bytes: int


class _SinkSettings:
    def __init__(self, options):
        text = options.get("namesrv") or options.get("endpoints")
        if not text or not str(text).strip():
            raise opt.OptionError("option 'namesrv' is required: the NameServer address, e.g. 127.0.0.1:9876")
        self.namesrvs = [a.strip() for a in str(text).replace(",", ";").split(";") if a.strip()]
        self.topic = options.get("topic")
        self.group = options.get("producerGroup") or DEFAULT_GROUP
        self.batch_size = opt.integer(options, "batchSize", 256, minimum=1)
        self.in_flight = opt.integer(options, "maxInFlight", 4, minimum=1)


def _messages(batch: pa.RecordBatch, default_topic: str | None, row0: int) -> list[tuple[Message, object]]:
    """(message, destination hint) per row: hint is a queue id (int), a sharding key (str) or None."""
    names = set(batch.schema.names)
    if "body" not in names:
        raise SinkError("the rows to write need a 'body' column (binary or string)")
    cols = {n: batch.column(n).to_pylist() for n in ("topic", "body", "tags", "keys", "properties", "queue_id",
                                                      "sharding_key") if n in names}
    n = batch.num_rows
    none = [None] * n
    topics, bodies, tags, keys, props, qids, shard = (cols.get(c, none) for c in (
        "topic", "body", "tags", "keys", "properties", "queue_id", "sharding_key"))
    out = []
    for i in range(n):
        topic = topics[i] or default_topic
        body = bodies[i]
        if not topic:
            raise SinkError(f"row {row0 + i}: no topic (set a 'topic' column or the 'topic' option)")
        if not body:
            raise SinkError(f"row {row0 + i} (topic {topic}): the body is null or empty")
        if isinstance(body, str):
            body = body.encode()
        p = props[i]
        msg = Message(topic, bytes(body), tags=tags[i], keys=keys[i], properties=dict(p) if p else {})
        out.append((msg, qids[i] if qids[i] is not None else shard[i]))
    return out


class _TaskSender:
    """Sends one task's rows with a producer of its own, a few batches in flight.

    Rows are turned into messages on the task's thread; sends run on the client loop thread.
    """

    def __init__(self, settings: _SinkSettings):
        from rocketq.client.producer import Producer
        self.s = settings
        self.producer = broker_io.call(_make(Producer, settings.group, settings.namesrvs))
        self._queues: dict[str, list] = {}

    def _destination(self, msg: Message, hint):
        queues = self._queues.get(msg.topic)
        if queues is None:
            queues = self._queues[msg.topic] = broker_io.call(self.producer.queues(msg.topic))
        if isinstance(hint, int):
            for q in queues:
                if q.queue_id == hint:
                    return q
            raise SinkError(f"topic {msg.topic} has no writable queue {hint} (it has {len(queues)})")
        if hint is not None:
            return queues[abs(java_hash(str(hint))) % len(queues)]
        return None

    def send(self, batches) -> SentCount:
        try:
            return self._send_all(batches)
        finally:
            broker_io.call(self.producer.shutdown())

    def _send_all(self, batches) -> SentCount:
        sent = SentCount(0, 0)
        pending: set[futures.Future] = set()
        row0 = 0
        try:
            for batch in batches:
                groups: dict = {}
                for msg, hint in _messages(batch, self.s.topic, row0):
                    groups.setdefault((msg.topic, self._destination(msg, hint)), []).append(msg)
                row0 += batch.num_rows
                for (_, q), msgs in groups.items():
                    for chunk in _chunks(msgs, self.s.batch_size):
                        if len(pending) >= self.s.in_flight:
                            done, pending = futures.wait(pending, return_when=futures.FIRST_COMPLETED)
                            _count(done, sent)
                        pending.add(broker_io.submit(self._send_chunk(chunk, q)))
            done, pending = futures.wait(pending)
            _count(done, sent)
        finally:
            for f in pending:
                f.cancel()
        return sent

    async def _send_chunk(self, chunk: list[Message], queue) -> tuple[int, int]:
        result = await self.producer.send_batch(chunk, queue=queue) if len(chunk) > 1 \
            else await self.producer.send(chunk[0], queue=queue)
        if result.status != SendStatus.SEND_OK:
            raise SinkError(f"the broker answered {result.status.name} for {len(chunk)} messages of topic "
                            f"{chunk[0].topic} on {result.queue}")
        return len(chunk), sum(len(m.body) for m in chunk)


async def _make(cls, *args):
    return await cls(*args).start()


def _chunks(msgs: list[Message], size: int):
    chunk, nbytes = [], 0
    for m in msgs:
        if chunk and (len(chunk) >= size or nbytes + len(m.body) > MAX_BATCH_BYTES):
            yield chunk
            chunk, nbytes = [], 0
        chunk.append(m)
        nbytes += len(m.body)
    if chunk:
        yield chunk


def _count(done, sent: SentCount) -> None:
    for t in done:
        n, b = t.result()                  # re-raises a failed send: the task fails
        sent.messages += n
        sent.bytes += b


def write_batches(settings: _SinkSettings, iterator) -> SentCount:
    return _TaskSender(settings).send(iterator)


class TopicWriter(DataSourceArrowWriter):
    def __init__(self, options, schema):
        self.settings = _SinkSettings(options)

    def write(self, iterator) -> SentCount:
        return write_batches(self.settings, iterator)

    def commit(self, messages) -> None:
        total = sum(m.messages for m in messages if m is not None)
        log.info("rocketq sink: %d messages sent", total)

    def abort(self, messages) -> None:
        sent = sum(m.messages for m in messages if m is not None)
        log.warning("rocketq sink: write aborted; %d messages were already sent by finished tasks", sent)


class TopicStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options, schema):
        self.settings = _SinkSettings(options)

    def write(self, iterator) -> SentCount:
        return write_batches(self.settings, iterator)

    def commit(self, messages, batchId) -> None:
        log.info("rocketq sink: micro-batch %s sent %d messages", batchId,
                 sum(m.messages for m in messages if m is not None))

    def abort(self, messages, batchId) -> None:
        log.warning("rocketq sink: micro-batch %s aborted", batchId)
