"""A real third-party RocketMQ remoting client, ali-ons 3.12.0 (Node.js, from npm), against rocketq.

Each test starts a real NameServer and broker on loopback ports and runs phases of
``scenario.js`` as separate ``node`` processes, so a consumer that "restarts" is a new process
that knows only what the broker remembers for its group.  Every phase also asserts that rocketq
answered none of the client's requests with REQUEST_CODE_NOT_SUPPORTED (see compat_helpers).
What was checked and what was found is written up in docs/compatibility.md.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter

import pytest

from compat_helpers import (
    committed_offsets, consume, create_topic, ensure_client, max_offsets, query_by_key, run_phase, serve_process,
    servers,
)
from rocketq.remoting import ResponseCode
from rocketq.store.record import StoredMessage

COMPRESSED_FLAG = 0x1


@pytest.fixture(scope="module", autouse=True)
def _client_installed():
    ensure_client()


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def _messages(prefix: str, count: int, tags: list[str]) -> list[dict]:
    return [{"key": f"{prefix}-{i}", "tag": tags[i % len(tags)], "body": f"{prefix} body {i}"} for i in range(count)]


def _by_key(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for row in rows:
        out.setdefault(row["key"], []).append(row)
    return out


async def _produce(env, topic: str, messages: list[dict]) -> dict[str, dict]:
    result = await run_phase(env, "produce", topic=topic, messages=messages)
    sent = {s["key"]: s for s in result["sent"]}
    assert [s["sendStatus"] for s in result["sent"]] == ["SEND_OK"] * len(messages), result
    assert all(len(s["msgId"]) == 32 for s in sent.values()) and len({s["msgId"] for s in sent.values()}) == len(sent)
    return sent


def test_produce_consume_commit_resume_and_retry(tmp_path):
    """Produce with tags and keys, consume in a group with one failure retried through %RETRY%,
    offsets committed on the broker, then a new consumer process resumes with only new messages."""
    topic, group, queues = "CompatOrders", "GID_COMPAT", 4

    async def scenario():
        async with servers(tmp_path) as env:
            await create_topic(env, topic, queues)
            first = _messages("order", 12, ["TagA", "TagB"])
            sent = await _produce(env, topic, first)
            assert {s["queueId"] for s in sent.values()} == set(range(queues))     # the client round-robins

            result = await consume(env, topic=topic, group=group, failOnce=["order-3"],
                                   expect={m["key"]: 2 if m["key"] == "order-3" else 1 for m in first})
            got = _by_key(result["deliveries"])
            assert sorted(got) == sorted(m["key"] for m in first)
            for m in first:
                d = got[m["key"]][0]
                assert (d["tag"], d["bodyMd5"], d["reconsumeTimes"]) == (m["tag"], _md5(m["body"]), 0)
                assert (d["msgId"], d["queueId"]) == (sent[m["key"]]["msgId"], sent[m["key"]]["queueId"])
            assert Counter(len(v) for v in got.values()) == {1: 11, 2: 1}, "only the failed message comes twice"
            retried = got["order-3"][1]
            assert retried["reconsumeTimes"] == 1 and retried["realTopic"] == f"%RETRY%{group}"
            assert retried["retryTopic"] == topic and retried["topic"] == topic
            assert retried["originMsgId"] == sent["order-3"]["msgId"] and retried["bodyMd5"] == _md5(first[3]["body"])

            # committed over the wire: every queue consumed to its end, and the retry queue too
            assert await committed_offsets(env, group, topic, queues) == await max_offsets(env, topic, queues)
            assert await committed_offsets(env, group, f"%RETRY%{group}", 1) == {0: 1}

            later = _messages("late", 5, ["TagA", "TagB"])
            await _produce(env, topic, later)
            resumed = await consume(env, topic=topic, group=group, expect={m["key"]: 1 for m in later})
            keys = Counter(d["key"] for d in resumed["deliveries"])
            duplicates = {k: n for k, n in keys.items() if k not in {m["key"] for m in later} or n > 1}
            # ali-ons commits its offsets when it closes, so a clean restart redelivers nothing
            assert duplicates == {}, f"redelivered after a clean restart: {duplicates}"
            assert sorted(keys) == sorted(m["key"] for m in later)
            assert await committed_offsets(env, group, topic, queues) == await max_offsets(env, topic, queues)
    asyncio.run(scenario())


def test_tag_filtering_happens_on_the_broker(tmp_path):
    """A group subscribed to "TagA || TagC" gets only those; the broker never ships it a TagB."""
    topic, group, queues = "CompatTags", "GID_TAGS", 4

    async def scenario():
        async with servers(tmp_path) as env:
            await create_topic(env, topic, queues)
            msgs = _messages("tagged", 12, ["TagA", "TagB", "TagC"])
            sent = await _produce(env, topic, msgs)
            wanted = [m for m in msgs if m["tag"] != "TagB"]
            result = await consume(env, topic=topic, group=group, subExpression="TagA || TagC",
                                   expect={m["key"]: 1 for m in wanted})
            assert sorted(d["key"] for d in result["deliveries"]) == sorted(m["key"] for m in wanted)
            assert result["pulled"] == {"TagA": 4, "TagC": 4}, "what the broker returned to the client's pulls"
            # Committed: at least past the last delivered message of each queue.  ali-ons commits the
            # offset after the last message it delivered; a filtered-out message at a queue's end is
            # committed only after the next long poll comes back empty (as against Apache's broker).
            past_delivered = {q: 0 for q in range(queues)}
            for m in wanted:
                s = sent[m["key"]]
                past_delivered[s["queueId"]] = max(past_delivered[s["queueId"]], s["queueOffset"] + 1)
            committed, ends = await committed_offsets(env, group, topic, queues), await max_offsets(env, topic, queues)
            assert all(past_delivered[q] <= committed[q] <= ends[q] for q in range(queues)), (committed, ends)
    asyncio.run(scenario())


def test_sharding_key_order_delay_level_and_compressed_body(tmp_path):
    """ali-ons's producer extras: a sharding key pins messages to one queue (consumed in order), a
    delay level goes through SCHEDULE_TOPIC_XXXX, and bodies over 4 KiB are sent deflated."""
    topic, group, queues = "CompatExtras", "GID_EXTRAS", 4

    async def scenario():
        async with servers(tmp_path) as env:
            await create_topic(env, topic, queues)
            ordered = [{"key": f"seq-{i}", "tag": "Seq", "body": f"step {i}", "shardingKey": "customer-42"}
                       for i in range(6)]
            big = {"key": "big", "tag": "Big", "body": "0123456789abcdef", "repeat": 400}      # 6,400 bytes
            delayed = {"key": "delayed", "tag": "Later", "body": "after a delay", "delayLevel": 2}
            sent = await _produce(env, topic, ordered + [big, delayed])
            assert len({sent[m["key"]]["queueId"] for m in ordered}) == 1

            result = await consume(env, topic=topic, group=group,
                                   expect={m["key"]: 1 for m in ordered + [big, delayed]})
            got = _by_key(result["deliveries"])
            seq = [d for d in result["deliveries"] if d["key"].startswith("seq-")]
            assert [d["key"] for d in seq] == [m["key"] for m in ordered]
            assert [d["queueOffset"] for d in seq] == sorted(d["queueOffset"] for d in seq)
            assert got["big"][0]["bodyLen"] == 6400 and got["big"][0]["bodyMd5"] == _md5(big["body"] * 400)
            assert got["delayed"][0]["realTopic"] == topic, "delivered through SCHEDULE_TOPIC_XXXX"
            # SEND_MESSAGE_V2's answer names the queue the client asked for, also for a delayed message
            assert sent["delayed"]["queueId"] == got["delayed"][0]["queueId"]

            stored = await query_by_key(env, topic, "big")
            assert stored.code == ResponseCode.SUCCESS, stored.remark
            record = StoredMessage(stored.body[:int.from_bytes(stored.body[:4], "big")])
            assert record.sys_flag & COMPRESSED_FLAG and len(record.body) < 6400, "stored as the client deflated it"
    asyncio.run(scenario())


def test_rocketq_serve_as_users_start_it(tmp_path):
    """The standalone process (``rocketq serve``) with its own defaults: produce, consume in a group,
    offsets committed, a restarted consumer gets only what is new."""
    topic, group, queues = "CompatServe", "GID_SERVE", 4

    async def scenario():
        async with serve_process(tmp_path) as env:
            await create_topic(env, topic, queues)
            first = _messages("served", 8, ["TagA"])
            await _produce(env, topic, first)
            result = await consume(env, topic=topic, group=group, expect={m["key"]: 1 for m in first})
            assert sorted(d["key"] for d in result["deliveries"]) == sorted(m["key"] for m in first)
            assert await committed_offsets(env, group, topic, queues) == await max_offsets(env, topic, queues)
            later = _messages("again", 3, ["TagA"])
            await _produce(env, topic, later)
            resumed = await consume(env, topic=topic, group=group, expect={m["key"]: 1 for m in later})
            assert sorted(d["key"] for d in resumed["deliveries"]) == sorted(m["key"] for m in later)
    asyncio.run(scenario())
