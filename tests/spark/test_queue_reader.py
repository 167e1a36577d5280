"""The topic source's task (:func:`rocketq.spark.queue_reader.read_queue`) against a real broker, without
Spark: every message once and in order (also when the broker's byte cap ends pulls early), pulls going
on while the task thread holds a batch (and only so far ahead), and errors of the pulling coroutine
raised in the task's thread.  The limits are made small so that a few hundred messages take many pulls
and several batches."""

from __future__ import annotations

import dataclasses
import time

import pyarrow as pa
import pytest

from rocketq.client.sync import Producer
from rocketq.common.message import Message
from rocketq.spark import queue_reader as qr
from rocketq.spark.broker_io import Catalog, QueueRef
from spark_helpers import CountingRelay, produce, queued, wait_until

PULL, WINDOW, DECODE, AHEAD = 16, 2, 64, 96       # messages a pull, pulls in flight, rows a batch, rows ahead


@pytest.fixture
def small_limits(monkeypatch):
    monkeypatch.setattr(qr, "MAX_PULL_MESSAGES", PULL)
    monkeypatch.setattr(qr, "PULL_WINDOW", WINDOW)
    monkeypatch.setattr(qr, "DECODE_ROWS", DECODE)
    monkeypatch.setattr(qr, "AHEAD_ROWS", AHEAD)


def _fullest_queue(namesrv: str, topic: str) -> tuple[QueueRef, int]:
    catalog = Catalog([namesrv])
    refs = catalog.queues([topic])
    bounds = catalog.bounds(refs)
    ref = max(refs, key=lambda q: bounds[(q.topic, q.broker, q.queue_id)][1])
    return ref, bounds[(ref.topic, ref.broker, ref.queue_id)][1]


def _task(ref: QueueRef, start: int, end: int, **kw) -> qr.QueueTask:
    return qr.QueueTask(ref, start, end, "spark-queue-reader-test", **kw)


def _rows(batches) -> list[dict]:
    return pa.Table.from_batches(list(batches)).select(["queue_offset", "msg_id", "body"]).to_pylist()


def test_every_message_of_the_range_once_in_offset_order(server, small_limits):
    sent = produce(server.namesrv, "SparkQueueReader", 1200, batch=100)
    ref, end = _fullest_queue(server.namesrv, "SparkQueueReader")
    assert end >= 300
    rows = _rows(qr.read_queue(_task(ref, 0, end)))
    assert [r["queue_offset"] for r in rows] == list(range(end))
    assert all(sent[r["msg_id"]] == r["body"] for r in rows)

    inner = _rows(qr.read_queue(_task(ref, 7, end - 5)))          # a range that is not a multiple of a pull
    assert [r["queue_offset"] for r in inner] == list(range(7, end - 5))


def test_pulls_go_on_while_the_task_thread_holds_a_batch_and_only_so_far(server, small_limits):
    produce(server.namesrv, "SparkQueueReaderAhead", 2000, batch=500)
    ref, end = _fullest_queue(server.namesrv, "SparkQueueReaderAhead")
    assert end >= DECODE + AHEAD + PULL
    with CountingRelay(ref.addr) as relay:
        batches = qr.read_queue(_task(dataclasses.replace(ref, addr=relay.addr), 0, end))
        first = next(batches)                        # the task thread now holds it, as Spark takes it
        assert first.num_rows == DECODE
        # the pulling goes on: the held batch's messages plus AHEAD_ROWS more were asked for
        wait_until(lambda: relay.requests >= (DECODE + AHEAD) // PULL, 10, "pulls while the batch is held")
        time.sleep(0.3)                              # no condition shows "no more pulls": a short look
        assert relay.requests == (DECODE + AHEAD) // PULL
        rest = _rows(batches)
    assert [r["queue_offset"] for r in rest] == list(range(DECODE, end))


def test_pulls_the_byte_cap_ends_early_are_walked_again_from_where_they_ended(server, monkeypatch):
    # 8 x 600 KiB asked a pull, the broker's 4 MiB cap answers 6: the pull ahead is dropped and the
    # walk goes on from the 7th
    monkeypatch.setattr(qr, "MAX_PULL_MESSAGES", 8)
    body = b"b" * (600 << 10)
    before = queued(server.namesrv, "SparkQueueReaderBig")
    with Producer("spark-queue-reader-big", server.namesrv) as p:
        for i in range(40):
            p.send(Message("SparkQueueReaderBig", body + i.to_bytes(2, "big")))
    wait_until(lambda: queued(server.namesrv, "SparkQueueReaderBig") >= before + 40, 30, "the queues to hold 40")
    ref, end = _fullest_queue(server.namesrv, "SparkQueueReaderBig")
    assert end > 8
    rows = _rows(qr.read_queue(_task(ref, 0, end)))
    assert [r["queue_offset"] for r in rows] == list(range(end))
    assert all(r["body"][:-2] == body for r in rows)


def test_data_loss_found_by_the_pulling_coroutine_is_raised_in_the_task_thread(server, small_limits, caplog):
    produce(server.namesrv, "SparkQueueReaderLoss", 400, batch=100)
    ref, end = _fullest_queue(server.namesrv, "SparkQueueReaderLoss")
    with pytest.raises(qr.DataLossError) as e:
        list(qr.read_queue(_task(ref, 0, end + 50)))
    assert f"queue {ref.queue_id}" in str(e.value) and "failOnDataLoss" in str(e.value)

    rows = _rows(qr.read_queue(_task(ref, 0, end + 50, fail_on_data_loss=False)))
    assert [r["queue_offset"] for r in rows] == list(range(end))
    assert "skipping to what is there" in caplog.text


def test_pulled_bodies_are_given_back_and_the_next_pulls_read_into_them(server, small_limits, monkeypatch):
    from rocketq.remoting import receive
    from rocketq.spark import broker_io
    monkeypatch.setattr(receive, "BIG_BODY_BYTES", 256)          # every pulled body gets its own buffer ...
    monkeypatch.setattr(receive, "STAGE_BYTES", 512)             # ... as it does not fit the staging buffer
    monkeypatch.setattr(receive, "MIN_READ_BYTES", 64)
    monkeypatch.setattr(broker_io, "_APIS", {})                  # new connections, with those sizes
    given = []

    def give(bodies, give=receive.BODIES.give):
        given.extend(id(b) for b in bodies if type(b) is bytearray)
        give(bodies)

    monkeypatch.setattr(receive.BODIES, "give", give)
    sent = produce(server.namesrv, "SparkQueueBodies", 600, batch=100)
    ref, end = _fullest_queue(server.namesrv, "SparkQueueBodies")
    for _ in range(2):                                           # the second read reuses the first's buffers
        rows = _rows(qr.read_queue(_task(ref, 0, end)))
        assert [r["queue_offset"] for r in rows] == list(range(end))
        assert all(sent[r["msg_id"]] == r["body"] for r in rows)
    broker_io.call(broker_io.api().close())
    assert len(given) >= 2 * end // PULL and len(set(given)) < len(given)
