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
``batchSize`` (messages per SEND_BATCH_MESSAGE, default 1024), ``maxInFlight`` (batches awaiting
an answer per task, default 8), and the source's credential and TLS options (``accessKey``,
``secretKey``, ``tls``, ``tlsCaFile``, ..., ``profile``), resolved in each task's process.

Every send result is checked: anything but SEND_OK (or a send error) fails the task, so Spark
retries it or fails the write; no row is dropped silently.  Delivery into the topic is
at-least-once: a retried task sends its rows again (RocketMQ has no idempotent producer).
"""

from __future__ import annotations

import logging
from concurrent import futures
from dataclasses import dataclass

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from rocketq.client.model import MQClientError, SendStatus
from rocketq.common.javahash import java_hash
from rocketq.spark import broker_io
from rocketq.spark import options as opt
from rocketq.spark.sink_encode import RowError, chunks, encode

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
        self.access = opt.access_spec(options)
        self.namesrvs = opt.namesrvs(options, self.access.resolve())
        self.topic = options.get("topic")
        self.group = options.get("producerGroup") or DEFAULT_GROUP
        self.batch_size = opt.integer(options, "batchSize", 1024, minimum=1)
        self.in_flight = opt.integer(options, "maxInFlight", 8, minimum=1)


class _TaskSender:
    """Sends one task's rows with a producer of its own, a few batches in flight.

    Rows are encoded on the task's thread (:mod:`rocketq.spark.sink_encode`); sends run on the
    client loop thread.
    """

    def __init__(self, settings: _SinkSettings):
        from rocketq.client.producer import Producer
        self.s = settings
        access = broker_io.access_of(settings.access)
        self.producer = broker_io.call(_make(Producer, settings.group, settings.namesrvs,
                                             **broker_io.client_kwargs(access)))
        self._queues: dict[str, list] = {}

    def _destination(self, topic: str, hint):
        if hint is None:
            return None
        queues = self._queues.get(topic)
        if queues is None:
            queues = self._queues[topic] = broker_io.call(self.producer.queues(topic))
        if isinstance(hint, int):
            for q in queues:
                if q.queue_id == hint:
                    return q
            raise SinkError(f"topic {topic} has no writable queue {hint} (it has {len(queues)})")
        return queues[abs(java_hash(str(hint))) % len(queues)]

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
                try:
                    groups = encode(batch, self.s.topic, row0)
                except RowError as exc:
                    raise SinkError(str(exc)) from None
                row0 += batch.num_rows
                for group in groups:
                    queue = self._destination(group.topic, group.hint)
                    for body, count, nbytes in chunks(group, self.s.batch_size, MAX_BATCH_BYTES):
                        if len(pending) >= self.s.in_flight:
                            done, pending = futures.wait(pending, return_when=futures.FIRST_COMPLETED)
                            _count(done, sent)
                        pending.add(broker_io.submit(self._send_chunk(group.topic, body, count, nbytes, queue)))
            done, pending = futures.wait(pending)
            _count(done, sent)
        finally:
            for f in pending:
                f.cancel()
        return sent

    async def _send_chunk(self, topic: str, body: bytes, count: int, nbytes: int, queue) -> tuple[int, int]:
        try:
            result = await self.producer.send_encoded_batch(topic, body, queue=queue)
        except MQClientError as exc:                # a refusal says which option to set
            raise broker_io.refused(exc, self.s.access) from None
        if result.status != SendStatus.SEND_OK:
            raise SinkError(f"the broker answered {result.status.name} for {count} messages of topic "
                            f"{topic} on {result.queue}")
        return count, nbytes


async def _make(cls, *args, **kwargs):
    return await cls(*args, **kwargs).start()


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
