"""Which sends the timer takes and when they are due (RocketMQ's HookUtils rules), and the recall
handle's wire format (RocketMQ 5.3's RecallMessageHandle v1), without a server."""

import base64

import pytest

from rocketq.broker.timer_messages import (
    TIMER_TOPIC,
    RecallHandle,
    TimerMessageIllegal,
    TimerNotEnabled,
    TimerPolicy,
    park,
    parked_due_ms,
    recall_handle,
    recall_marker,
    timer_due_ms,
)
from rocketq.common.message import DEFAULT_BORN_HOST, Message

NOW = 1_800_000_000_000
POLICY = TimerPolicy(enabled=True, max_delay_ms=60_000)


def _due(delay_level=0, topic="T", policy=POLICY, **props):
    m = Message(topic, b"x", properties={k: str(v) for k, v in props.items()}, delay_level=delay_level)
    return timer_due_ms(m, policy, now_ms=NOW), m


def test_due_time_precedence_and_what_is_not_a_timer_message():
    assert _due(TIMER_DELAY_SEC=2, TIMER_DELAY_MS=5, TIMER_DELIVER_MS=NOW + 9)[0] == NOW + 2000
    assert _due(TIMER_DELAY_MS=5, TIMER_DELIVER_MS=NOW + 9)[0] == NOW + 5
    assert _due(TIMER_DELIVER_MS=NOW + 9)[0] == NOW + 9
    assert _due()[0] is None
    assert _due(TIMER_DELAY_MS=0)[0] is None and _due(TIMER_DELIVER_MS=NOW - 1)[0] is None   # due: stored now
    assert _due(TIMER_DELAY_MS=60_000)[0] == NOW + 60_000                                  # the limit itself
    assert _due(topic=TIMER_TOPIC, TIMER_DELAY_MS=5)[0] is None                            # parked already
    assert _due(TIMER_OUT_MS=NOW, TIMER_DELAY_MS=5)[0] is None                             # delivered by a timer
    due, m = _due(delay_level=2, TIMER_DELAY_SEC=2, UNIQ_KEY="u")
    assert due is None and m.properties == {"UNIQ_KEY": "u"}                               # the level wins


def test_refusals():
    with pytest.raises(TimerMessageIllegal, match="max delay 60000ms"):
        _due(TIMER_DELAY_MS=60_001)
    with pytest.raises(TimerMessageIllegal, match="not an integer"):
        _due(TIMER_DELAY_SEC="1.5")
    with pytest.raises(TimerMessageIllegal):
        _due(TIMER_DELIVER_MS=NOW, TIMER_DEL_UNIQKEY="T+u")     # a recall marker must be due later
    with pytest.raises(TimerNotEnabled, match="timerWheelEnable"):
        _due(policy=TimerPolicy(enabled=False), TIMER_DELAY_SEC=1)
    assert _due(policy=TimerPolicy(enabled=False))[0] is None   # other messages do not care
    with pytest.raises(ValueError):
        TimerPolicy(max_delay_ms=0)


def test_park_and_recall_marker():
    m = park(Message("Dest", b"x", queue_id=3, properties={"UNIQ_KEY": "ID1"}), NOW + 5)
    assert (m.topic, m.queue_id) == (TIMER_TOPIC, 0)
    assert m.properties == {"UNIQ_KEY": "ID1", "TIMER_OUT_MS": str(NOW + 5), "REAL_TOPIC": "Dest", "REAL_QID": "3"}
    assert parked_due_ms(m.properties) == NOW + 5
    assert parked_due_ms({"TIMER_DELIVER_MS": "7"}) == 7 and parked_due_ms({}) == 0
    handle = RecallHandle.parse(recall_handle(m, "broker-a"))
    assert handle == RecallHandle("Dest", "broker-a", NOW + 5, "ID1")
    assert recall_handle(park(Message("Dest", b"x"), NOW + 5), "broker-a") is None          # no UNIQ_KEY
    assert recall_handle(park(Message("%RETRY%G", b"x", properties={"UNIQ_KEY": "u"}), NOW), "b") is None
    marker = recall_marker(handle, born_host=DEFAULT_BORN_HOST, now_ms=NOW)
    assert (marker.topic, marker.tags, marker.body) == (TIMER_TOPIC, "_RECALL_TAG_", b"0")
    assert marker.properties["TIMER_DEL_UNIQKEY"] == "Dest+ID1" and marker.properties["REAL_TOPIC"] == "Dest"
    assert parked_due_ms(marker.properties) == NOW + 5


def test_recall_handle_is_rocketmqs_v1_format():
    # RecallMessageHandle.HandleV1.buildHandle: URL-safe base64 (with padding) of the space-joined fields
    raw = "v1 topic broker-0 1700000000000 7F0000010001000000000000000A"
    golden = base64.urlsafe_b64encode(raw.encode()).decode()
    assert golden == "djEgdG9waWMgYnJva2VyLTAgMTcwMDAwMDAwMDAwMCA3RjAwMDAwMTAwMDEwMDAwMDAwMDAwMDAwMDBB"
    h = RecallHandle("topic", "broker-0", 1_700_000_000_000, "7F0000010001000000000000000A")
    assert h.encode() == golden and RecallHandle.parse(golden) == h
    # RecallMessageHandleTest#testHandleInvalid, plus a timestamp that is not a number
    for bad in ("", "v1 a b c d", base64.urlsafe_b64encode(b"v1 a b c").decode(),
                base64.urlsafe_b64encode(b"v2 a b c d").decode(), base64.urlsafe_b64encode(b"v1 a b c d").decode(),
                base64.urlsafe_b64encode(b"\xff\xfe").decode()):
        with pytest.raises(ValueError):
            RecallHandle.parse(bad)
