"""Remoting sends with TIMER_DELIVER_MS / TIMER_DELAY_SEC / TIMER_DELAY_MS go through the broker's
timer, as on a RocketMQ 5 broker: on time, never early, across a restart, and with the gRPC endpoint
off; refused with RocketMQ's codes where RocketMQ refuses them."""

import asyncio
import time

from broker_helpers import send_v2, with_broker
from grpc_helpers import ServerThread, client_config, message, remoting_call, wait_until

from rocketq.broker.timer_messages import TIMER_TOPIC, RecallHandle
from rocketq.common.sysflag import SCHEDULE_TOPIC
from rocketq.remoting import RemotingClient, ResponseCode

LATE_LIMIT_MS = 100 + 250            # due + 100 ms, and slack for a busy test machine


def _props(uniq, **timer):
    return f"TAGS\x01TagT\x02UNIQ_KEY\x01{uniq}\x02" + "".join(f"{k}\x01{v}\x02" for k, v in timer.items())


def _send(server, topic, uniq, *, qid=0, **timer):
    return remoting_call(server, lambda: send_v2(topic, uniq.encode(), queue_id=qid, props=_props(uniq, **timer)))


def _messages(server, topic, qid=0):
    return server.call(lambda: server.broker.store.get_messages(topic, qid, 0, 64).messages)


def _count(server, topic, qid=0):
    return server.call(lambda: server.broker.store.max_offset(topic, qid))


def _check_on_time(m):
    due = int(m.properties["TIMER_OUT_MS"])
    late_ms = m.store_timestamp - due
    assert 0 <= late_ms <= LATE_LIMIT_MS, f"{m.body!r} delivered {late_ms} ms after its due time"
    return due


def test_timer_properties_deliver_on_time(server):
    server.create_topic("Later", 2)
    t0 = int(time.time() * 1000)
    sent = {"at": _send(server, "Later", "at", qid=1, TIMER_DELIVER_MS=t0 + 1200),
            "sec": _send(server, "Later", "sec", qid=1, TIMER_DELAY_SEC=1),
            "ms": _send(server, "Later", "ms", qid=1, TIMER_DELAY_MS=1500)}
    t1 = int(time.time() * 1000)
    for r in sent.values():
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueId"] == "1"                # the queue it is for, as Java answers
        handle = RecallHandle.parse(r.ext_fields["recallHandle"])
        assert (handle.topic, handle.broker_name) == ("Later", server.broker.settings.broker_name)
    wait_until(lambda: _count(server, TIMER_TOPIC) == 3, what="three parked messages")
    assert _count(server, "Later", 1) == 0                   # none early
    wait_until(lambda: _count(server, "Later", 1) == 3, what="three timer deliveries")
    got = {m.body.decode(): m for m in _messages(server, "Later", 1)}
    due = {name: _check_on_time(m) for name, m in got.items()}
    print("remoting timer lateness ms:", {name: m.store_timestamp - due[name] for name, m in got.items()})
    assert due["at"] == t0 + 1200
    assert t0 + 1000 <= due["sec"] <= t1 + 1000 and t0 + 1500 <= due["ms"] <= t1 + 1500
    for name, m in got.items():
        assert "REAL_TOPIC" not in m.properties and "REAL_QID" not in m.properties and m.tags == "TagT"
        assert m.uniq_key == name and m.queue_id == 1
    assert RecallHandle.parse(sent["at"].ext_fields["recallHandle"]).due_ms == t0 + 1200


def test_what_is_not_parked_and_what_is_refused(server):
    server.create_topic("Checked", 1)
    three_days_s = 3 * 24 * 3600
    far = _send(server, "Checked", "far", TIMER_DELAY_SEC=three_days_s + 1)
    assert far.code == ResponseCode.MESSAGE_ILLEGAL and "max delay 259200000ms" in far.remark
    assert _send(server, "Checked", "nan", TIMER_DELIVER_MS="soon").code == ResponseCode.MESSAGE_ILLEGAL
    assert _send(server, "Checked", "edge", TIMER_DELAY_SEC=three_days_s - 60).code == ResponseCode.SUCCESS
    past = _send(server, "Checked", "past", TIMER_DELAY_MS=-5)               # due already: stored at once
    assert past.code == ResponseCode.SUCCESS and "recallHandle" not in past.ext_fields
    wait_until(lambda: _count(server, "Checked") == 1, what="the past-due message")
    # a delay level wins over the timer properties, which are dropped (HookUtils#checkIfTimerMessage)
    leveled = remoting_call(server, lambda: send_v2("Checked", b"lvl", props=_props("lvl", DELAY=3, TIMER_DELAY_SEC=1)))
    assert leveled.code == ResponseCode.SUCCESS and "recallHandle" not in leveled.ext_fields
    wait_until(lambda: _count(server, SCHEDULE_TOPIC, 2) == 1, what="the delay-level message")
    [parked] = _messages(server, SCHEDULE_TOPIC, 2)
    assert "TIMER_DELAY_SEC" not in parked.properties
    wait_until(lambda: _count(server, TIMER_TOPIC) == 1, what="the parked message")
    assert [m.uniq_key for m in _messages(server, TIMER_TOPIC)] == ["edge"]    # only "edge" went to the timer


def test_timer_limits_follow_the_broker_settings(tmp_path):
    from rocketmq import Producer
    short = ServerThread(tmp_path / "short", timer_max_delay_sec=60).start()
    try:
        short.create_topic("Short", 1)
        assert _send(short, "Short", "ok", TIMER_DELAY_SEC=59).code == ResponseCode.SUCCESS
        assert _send(short, "Short", "no", TIMER_DELAY_MS=61_000).code == ResponseCode.MESSAGE_ILLEGAL
    finally:
        short.shutdown()
    off = ServerThread(tmp_path / "off", timer_wheel_enable=False).start()
    try:
        off.create_topic("Off", 1)
        refused = _send(off, "Off", "x", TIMER_DELAY_SEC=5)
        assert refused.code == ResponseCode.SYSTEM_ERROR and "timerWheelEnable" in refused.remark
        p = Producer(client_config(off), ("Off",))
        p.startup()
        try:
            try:
                p.send(message("Off", b"later", deliver_at_s=int(time.time()) + 5))
                raise AssertionError("a DELAY message was taken with the timer off")
            except Exception as exc:             # UNSUPPORTED: the client raises UnsupportedException
                assert "timerWheelEnable" in str(exc)
            assert p.send(message("Off", b"plain")).message_id      # other messages are fine
        finally:
            p.shutdown()
        assert _count(off, TIMER_TOPIC) == 0
    finally:
        off.shutdown()


def test_a_timer_message_survives_a_restart(server):
    server.create_topic("Restarted", 1)
    r = _send(server, "Restarted", "kept", TIMER_DELAY_MS=1500)
    assert r.code == ResponseCode.SUCCESS
    server.stop()
    server.start()
    wait_until(lambda: _count(server, "Restarted") == 1, what="the delivery after the restart")
    due = _check_on_time(_messages(server, "Restarted")[0])
    wait_until(lambda: server.call(lambda: server.broker.timer.watermark_ms) > due + 200, what="the watermark")
    assert _count(server, "Restarted") == 1                  # once


def test_the_timer_runs_without_the_grpc_endpoint(tmp_path):
    async def scenario(broker, client: RemotingClient):
        assert broker.timer.running
        r = await client.invoke(send_v2("Alone", b"tick", props=_props("tick", TIMER_DELAY_MS=300)), timeout_s=10)
        assert r.code == ResponseCode.SUCCESS, r.remark
        deadline = time.monotonic() + 10
        while broker.store.max_offset("Alone", 0) < 1:
            assert time.monotonic() < deadline, "not delivered"
            await asyncio.sleep(0.02)
        _check_on_time(broker.store.get_messages("Alone", 0, 0, 1).messages[0])
    asyncio.run(with_broker(tmp_path, scenario))
