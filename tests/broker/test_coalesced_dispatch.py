"""One-at-a-time sends share a dispatch when nobody waits for them, without a reader ever missing one.

The broker dispatches single sends on its loop ``coalesce_s`` after the first of them when no long poll
or pop waits (store/dispatcher.py); these tests stretch that window to WINDOW_S so that only the rules
that must not wait for it can pass them: a request after a send's answer finds the message (the broker
catches dispatch up before every request that is not a send), and a held long poll or pop is woken by
an arrival at once.
"""

import asyncio
import time

from broker_helpers import pull, send_v2, split_records, with_broker

from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode

WINDOW_S = 60.0          # far beyond every wait below: a pass never comes from the timer
WAIT_S = 10.0


def _max_offset(topic, queue_id):
    return RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id})


def _stretch(broker):
    broker.store.dispatcher.coalesce_s = WINDOW_S


def _queue_end(broker, topic, queue_id):
    cq = broker.store.consume_queue(topic, queue_id)
    return 0 if cq is None else cq.max_offset()


def test_sends_nobody_waits_for_share_a_dispatch_and_the_next_request_sees_them(tmp_path):
    async def scenario(broker, client):
        _stretch(broker)
        for i in range(5):
            r = await client.invoke(send_v2("Coalesced", b"m%d" % i), timeout_s=WAIT_S)
            assert r.code == ResponseCode.SUCCESS, r.remark
        assert _queue_end(broker, "Coalesced", 0) == 0          # pending: one drain will take all five
        r = await client.invoke(_max_offset("Coalesced", 0), timeout_s=WAIT_S)
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["offset"] == "5"
        resp = await client.invoke(pull("Coalesced", 0, 0), timeout_s=WAIT_S)
        assert [m.body for m in split_records(resp.body)] == [b"m%d" % i for i in range(5)]
    asyncio.run(with_broker(tmp_path, scenario))


def test_a_held_long_poll_is_woken_at_once_not_after_the_window(tmp_path):
    async def scenario(broker, client):
        _stretch(broker)
        r = await client.invoke(send_v2("Held", b"first"), timeout_s=WAIT_S)      # the topic exists
        assert r.code == ResponseCode.SUCCESS, r.remark
        consumer = RemotingClient("127.0.0.1", broker.server.port)
        try:
            waiting = asyncio.ensure_future(consumer.invoke(pull("Held", 0, 1, suspend_ms=30_000), timeout_s=40))
            deadline = time.monotonic() + WAIT_S
            while not broker.long_polling.held and time.monotonic() < deadline:
                await asyncio.sleep(0.005)
            assert broker.long_polling.held == 1
            r = await client.invoke(send_v2("Held", b"now"), timeout_s=WAIT_S)
            assert r.code == ResponseCode.SUCCESS, r.remark
            resp = await asyncio.wait_for(waiting, WAIT_S)
            assert resp.code == ResponseCode.SUCCESS and [m.body for m in split_records(resp.body)] == [b"now"]
        finally:
            await consumer.close()
    asyncio.run(with_broker(tmp_path, scenario))


def test_a_pop_watch_finds_sends_answered_before_it(tmp_path):
    async def scenario(broker, client):
        _stretch(broker)
        r = await client.invoke(send_v2("Popped", b"before"), timeout_s=WAIT_S)
        assert r.code == ResponseCode.SUCCESS, r.remark
        popper = broker.pop.popper
        fut = popper.watch(["Popped"])
        try:
            assert _queue_end(broker, "Popped", 0) == 1            # the pop that follows its watch reads it
        finally:
            popper.unwatch(["Popped"], fut)
    asyncio.run(with_broker(tmp_path, scenario))


def test_without_readers_a_send_is_dispatched_within_the_default_window(tmp_path):
    async def scenario(broker, client):
        r = await client.invoke(send_v2("Alone", b"x"), timeout_s=WAIT_S)
        assert r.code == ResponseCode.SUCCESS, r.remark
        deadline = time.monotonic() + WAIT_S
        while _queue_end(broker, "Alone", 0) < 1 and time.monotonic() < deadline:
            await asyncio.sleep(0.001)
        assert _queue_end(broker, "Alone", 0) == 1
    asyncio.run(with_broker(tmp_path, scenario))
