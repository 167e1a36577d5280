"""Comparisons shared by the reference-client suites: what a client reported sending or receiving (JSON,
bodies in base64) against what rocketq stored (read back over the wire by rocketq's own client)."""

from __future__ import annotations

import base64
from collections import Counter

SYSTEM_PROPERTIES_SET_BY_BROKER = {"MIN_OFFSET", "MAX_OFFSET", "CONSUME_START_TIME", "CLUSTER", "TRACE_ON"}


def body(item: dict) -> bytes:
    return base64.b64decode(item["body"])


def by_uniq(stored) -> dict:
    out = {}
    for m in stored:
        assert m.uniq_key not in out, f"two stored messages with UNIQ_KEY {m.uniq_key}"
        out[m.uniq_key] = m
    return out


def assert_stored_as_sent(sent: list[dict], stored, *, topic: str) -> None:
    """Every sent message stored once, byte for byte: body, topic, tags, keys, user properties, and the
    queue and offset the send result named; nothing else stored."""
    index = by_uniq(stored)
    assert len(stored) == len(sent), f"{len(sent)} sent, {len(stored)} stored"
    for s in sent:
        m = index.get(s["uniqId"])
        assert m is not None, f"{s['mode']} message {s['keys']} ({s['uniqId']}) not stored"
        assert m.body == body(s), f"{s['keys']}: body differs"
        assert m.topic == topic and m.tags == s["tags"] and " ".join(m.keys) == s["keys"], (m.topic, m.tags, m.keys)
        props = m.properties
        assert {k: v for k, v in props.items() if k.startswith("u.")} == s["userProps"]
        if s.get("msgId"):                       # a send result: ids, queue and offset are the stored ones
            assert s["msgId"] == m.uniq_key, (s, m.uniq_key)
            if s["mode"] not in ("delay", "transaction"):    # those name the record parked for later
                assert s["offsetMsgId"] == m.msg_id, (s, m.msg_id)
        if "queueOffset" in s and s["mode"] in ("sync", "async", "orderly"):
            assert (s["queueId"], s["queueOffset"]) == (m.queue_id, m.queue_offset), s["keys"]


def assert_received_as_stored(received: list[dict], stored, *, exactly_once: bool = True) -> None:
    """Every delivery matches the stored record it names (body, ids, queue, offset, properties)."""
    index = by_uniq(stored)
    for r in received:
        m = index.get(r["msgId"])
        assert m is not None, f"received {r['msgId']} ({r['keys']}), which is not in the topic"
        assert body(r) == m.body, f"{r['keys']}: delivered body differs from the stored one"
        assert (r["queueId"], r["queueOffset"]) == (m.queue_id, m.queue_offset), r["keys"]
        assert r.get("offsetMsgId") in (None, m.msg_id), (r["offsetMsgId"], m.msg_id)
        assert r["storeTimestamp"] == m.store_timestamp and r["bornTimestamp"] == m.born_timestamp
        for k, v in m.properties.items():
            assert r["properties"].get(k) == v, f"{r['keys']}: property {k} stored {v!r}, delivered " \
                                                 f"{r['properties'].get(k)!r}"
    if exactly_once:
        counts = Counter(r["msgId"] for r in received)
        dupes = {k: n for k, n in counts.items() if n > 1}
        assert not dupes, f"delivered more than once: {dupes}"
        missing = set(index) - set(counts)
        assert not missing, f"never delivered: {sorted(missing)}"
