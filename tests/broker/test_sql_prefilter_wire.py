"""The SQL92 bit-map prefilter over the wire (issue 19): a broker with ``enableCalcFilterBitMap``
answers rocketq's client's pulls through a registered filter exactly as it answers them without
the prefilter."""

import asyncio
import random

from broker_helpers import send_v2, store_config
from test_heartbeat_filter_wire import heartbeat, java_pull

from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.broker.topic_config import TopicConfig
from rocketq.client.api import MQClientAPI
from rocketq.client.model import MessageQueue
from rocketq.remoting import RemotingClient, ResponseCode

EXPR = "region = 'eu' AND amount > 100"


async def pull_all(api, addr, mq, group, end, **kw):
    got, offset = [], 0
    while offset < end:
        r = await api.pull(addr, mq, group, offset, max_nums=32, **kw)
        got += [(m.queue_offset, m.body) for m in r.messages]
        assert r.next_begin_offset > offset
        offset = r.next_begin_offset
    return got


def test_prefiltered_pulls_return_what_plain_pulls_return(tmp_path):
    seed = random.randrange(1 << 32)
    print(f"seed {seed}")
    rng = random.Random(seed)

    async def scenario():
        broker = await Broker(BrokerSettings(port=0, enable_property_filter=True),
                              store_config(tmp_path, enable_consume_queue_ext=True,
                                           enable_calc_filter_bitmap=True)).start()
        raw = RemotingClient("127.0.0.1", broker.server.port)
        api = MQClientAPI()
        try:
            broker.topics.update(TopicConfig("Pre", 1, 1))
            assert (await raw.invoke(heartbeat("GID_PRE", "Pre", EXPR, "SQL92"))).code == ResponseCode.SUCCESS
            for i in range(2000):
                props = f"region\x01{rng.choice(['eu', 'us', 'ap'])}\x02amount\x01{rng.randrange(120)}\x02"
                r = await raw.invoke(send_v2("Pre", b"m%d" % i, props=props))
                assert r.code == ResponseCode.SUCCESS, r.remark
            await asyncio.to_thread(broker.store.wait_dispatched)
            assert broker.store.filter_bitmaps.prefilter("GID_PRE", "Pre", EXPR) is not None
            mq, addr = MessageQueue("Pre", broker.settings.broker_name, 0), broker.address
            end = broker.store.max_offset("Pre", 0)
            without = await pull_all(api, addr, mq, "GID_OTHER", end, expression=EXPR, expression_type="SQL92")
            assert broker.store.filter_bitmaps.units_skipped == 0
            with_prefilter = await pull_all(api, addr, mq, "GID_PRE", end, expression=EXPR, expression_type="SQL92")
            assert with_prefilter == without and len(without) > 0, f"seed {seed}"
            assert broker.store.filter_bitmaps.units_skipped > 1000, f"seed {seed}"   # ~2/3 of 2,000 say no
            # the Java push consumer's pull (no subscription: the heartbeat's filter), prefiltered too
            r = await raw.invoke(java_pull("GID_PRE", "Pre"))
            assert r.code in (ResponseCode.SUCCESS, ResponseCode.PULL_RETRY_IMMEDIATELY), r.remark
        finally:
            await api.close()
            await raw.close()
            await broker.close()
    asyncio.run(scenario())
