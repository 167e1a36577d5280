"""RocketMQ's trace record format (TraceDataEncoder): golden text decoded, encoded back, garbage tolerated."""

from hypothesis import given, settings, strategies as st

from rocketq.common import trace

# what a Java 4.9+/5.x producer and push consumer write (fields split by \x01, records ended by \x02)
GOLDEN = ("Pub\x011700000000000\x01DefaultRegion\x01PID_A\x01OrderTopic\x017F0000010001\x01TagA\x01k1\x01"
          "127.0.0.1:10911\x0111\x013\x010\x01C0A8000100002A9F0000000000000000\x01true\x02"
          "SubBefore\x011700000000100\x01DefaultRegion\x01GID_A\x01req-9\x017F0000010001\x010\x01k1\x02"
          "SubAfter\x01req-9\x017F0000010001\x0125\x01true\x01k1\x010\x011700000000125\x02")


def test_golden_records_decode_field_by_field():
    pub, before, after = trace.decode(GOLDEN.encode())
    assert (pub.kind, pub.group, pub.topic, pub.msg_id, pub.tags, pub.keys) == \
        ("Pub", "PID_A", "OrderTopic", "7F0000010001", "TagA", "k1")
    assert (pub.store_host, pub.body_length, pub.cost_ms, pub.msg_type, pub.success) == \
        ("127.0.0.1:10911", 11, 3, "Normal_Msg", True)
    assert pub.offset_msg_id == "C0A8000100002A9F0000000000000000"
    assert (before.kind, before.group, before.request_id, before.retry_times) == ("SubBefore", "GID_A", "req-9", 0)
    assert (after.kind, after.request_id, after.cost_ms, after.success, after.timestamp_ms) == \
        ("SubAfter", "req-9", 25, True, 1700000000125)


def test_encode_writes_the_golden_text_back():
    assert "".join(trace.encode(r) for r in trace.decode(GOLDEN)) == GOLDEN.replace(
        "\x01true\x02Sub", "\x01true\x01\x02Sub", 1)          # Pub gains the (empty) clientHost field


def test_path_joins_sub_after_to_its_sub_before_in_time_order():
    steps = trace.path_of("7F0000010001", trace.decode(GOLDEN))
    assert [s.kind for s in steps] == ["sent", "delivered", "consumed"]
    assert steps[2].group == "GID_A" and steps[2].status == "success" and steps[2].cost_ms == 25
    assert trace.path_of("OTHER", trace.decode(GOLDEN)) == []


def test_older_and_broken_records_are_reported_not_raised():
    old_pub = "Pub\x011\x01r\x01g\x01t\x01id\x01tag\x01key\x01host\x0110\x011\x010\x01true\x02"     # 13 fields
    recs = trace.decode(old_pub + "Pub\x01x\x02Nope\x01a\x02SubAfter\x01r\x01id\x01notanumber\x01true\x01k\x02")
    assert recs[0].kind == "Pub" and recs[0].success is True and recs[0].offset_msg_id == ""
    assert [r.kind for r in recs[1:]] == ["Unreadable"] * 3
    assert "at least 12" in recs[1].problem and "unknown record type" in recs[2].problem
    assert "not a number" in recs[3].problem


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_decode_without_raising(data):
    for r in trace.decode(data):
        assert r.kind in ("Pub", "SubBefore", "SubAfter", "EndTransaction", "Unreadable")
