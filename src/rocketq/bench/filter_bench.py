"""The filter benchmark: how fast a consumer reads a backlog through a selective filter.

One real ``rocketq serve`` process (``enablePropertyFilter=true``, and RocketMQ's bit-map prefilter
on: ``enableConsumeQueueExt=true``, ``enableCalcFilterBitMap=true``; group ``BENCH_FILTER_PRE``
registers ``region = 'eu'`` in a heartbeat before the load, so every message's bit map is computed
at dispatch and the load time includes that work).  The benchmark loads ``n``
messages (100-byte bodies) into queue 0 of one topic with send batches of 500; every hundredth has
``region=eu`` and tag ``eu``, the rest ``region=us`` / ``us``, and each carries ``amount`` (0..999)
and ``sku``.  Then, from offset 0 to the end of the queue, it pulls with rocketq's remoting client
(PULL_MESSAGE, ``maxMsgNums`` 32 as Java's push consumer pulls) through:

* ``sql 1%``: ``region = 'eu'`` from a group that registered no filter (SQL92: each record's
  properties are evaluated on the broker, as without the prefilter);
* ``sql 1% + bit-map prefilter``: the same expression from ``BENCH_FILTER_PRE``, whose registered
  filter lets the broker skip the units whose bit map says "no match" without reading them;
* ``sql 1% (3 terms)``: ``region = 'eu' AND amount >= 0 AND sku IS NOT NULL``;
* ``tag 1%``: the tag ``eu`` (consume-queue tags hash codes, no CommitLog read for the others);
* ``no filter``: every message (for scale).

Per run it reports the pulls, the messages delivered, the wall time and the backlog scanned per
second (``n`` / time).  Run: ``rocketq bench filter --count 1000000`` (``--no-prefilter``: a broker
without the bit maps, to see what computing them costs the load).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from rocketq.bench.broker_bench import ServeProcess, _run

TOPIC = "FilterBench"
LOAD_BATCH = 500
PULL_BATCH = 32
SELECTIVITY = 100                   # one message in this many matches
DISPATCH_WAIT_S = 120.0
RUNS = 2                            # each read is timed this many times (the first also warms up)


PREFILTER_GROUP = "BENCH_FILTER_PRE"
EU = "region = 'eu'"


def _heartbeat(group: str, expression: str) -> dict:
    """What a push consumer of *group* subscribed to *expression* (SQL92) sends."""
    return {"clientID": "bench@filter", "producerDataSet": [], "consumerDataSet": [{
        "groupName": group, "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": [{
            "topic": TOPIC, "subString": expression, "expressionType": "SQL92", "subVersion": 1,
            "classFilterMode": False, "tagsSet": [], "codeSet": []}]}]}


async def _load(namesrv: str, n: int) -> float:
    from rocketq.client import Message, Producer
    async with Producer("BENCH_FILTER_PG", namesrv) as p:
        await p.send(Message(TOPIC, b"warm", properties={"region": "none"}))
        mq = next(q for q in await p.queues(TOPIC) if q.queue_id == 0)
        addr = (await p.instance.route(TOPIC)).broker_datas[0].master
        await p.instance.api.heartbeat(addr, _heartbeat(PREFILTER_GROUP, EU))
        t0 = time.perf_counter()
        for start in range(0, n, LOAD_BATCH):
            batch = []
            for i in range(start, min(n, start + LOAD_BATCH)):
                eu = i % SELECTIVITY == 0
                batch.append(Message(TOPIC, b"x" * 100, tags="eu" if eu else "us",
                                     properties={"region": "eu" if eu else "us", "amount": str(i % 1000),
                                                 "sku": f"sku-{i % 97}"}))
            await p.send_batch(batch, queue=mq)
        took = time.perf_counter() - t0
        deadline = time.monotonic() + DISPATCH_WAIT_S
        while await p.instance.api.max_offset(addr, mq) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.05)               # measured reads start once the consume queue holds all
        return took


async def _read(namesrv: str, expression: str, expression_type: str, group: str) -> dict:
    from rocketq.client.instance import ClientInstance
    from rocketq.client.model import MessageQueue
    instance = ClientInstance(namesrv)
    try:
        route = await instance.route(TOPIC, refresh=True)
        b = route.broker_datas[0]
        mq, api = MessageQueue(TOPIC, b.broker_name, 0), instance.api
        end = await api.max_offset(b.master, mq)
        offset, pulls, got = 0, 0, 0
        t0 = time.perf_counter()
        while offset < end:
            r = await api.pull(b.master, mq, group, offset, max_nums=PULL_BATCH,
                               expression=expression, expression_type=expression_type)
            pulls += 1
            got += len(r.messages)
            if r.next_begin_offset <= offset:
                break
            offset = r.next_begin_offset
        took = time.perf_counter() - t0
        return {"pulls": pulls, "delivered": got, "seconds": took, "scanned_per_s": end / took}
    finally:
        await instance.close()


async def _bench(namesrv: str, n: int, progress, prefilter: bool) -> dict:
    progress(f"loading {n:,} messages")
    load_s = await _load(namesrv, n)
    progress(f"loaded in {load_s:.1f} s ({n / load_s:,.0f} msg/s, "
             f"{'bit maps computed at dispatch' if prefilter else 'no bit maps'})")
    out = {}
    for name, expression, kind, group in [
            ("sql 1%", EU, "SQL92", "BENCH_FILTER_SQL92"),
            ("sql 1% + bit-map prefilter", EU, "SQL92", PREFILTER_GROUP),
            ("sql 1% (3 terms)", "region = 'eu' AND amount >= 0 AND sku IS NOT NULL", "SQL92", "BENCH_FILTER_SQL92"),
            ("tag 1%", "eu", "TAG", "BENCH_FILTER_TAG"),
            ("no filter", "*", "TAG", "BENCH_FILTER_TAG")]:
        if group == PREFILTER_GROUP and not prefilter:
            continue
        runs = [await _read(namesrv, expression, kind, group) for _ in range(RUNS)]
        out[name] = r = min(runs, key=lambda x: x["seconds"])
        each = ", ".join(f"{x['seconds']:.2f}" for x in runs)
        progress(f"{name:27s} {r['pulls']:7,d} pulls {r['delivered']:8,d} delivered {r['seconds']:7.2f} s "
                 f"{r['scanned_per_s']:12,.0f} scanned/s (best of {RUNS}: {each} s)")
    return out


def run_filter_bench(n: int, directory: Path | None = None, progress=print, *, prefilter: bool = True) -> dict:
    """*prefilter* False runs the broker without the bit maps (the default broker), to see their load cost."""
    os.environ["ROCKETQ_ENABLEPROPERTYFILTER"] = "true"
    os.environ["ROCKETQ_ENABLECONSUMEQUEUEEXT"] = os.environ["ROCKETQ_ENABLECALCFILTERBITMAP"] = str(prefilter).lower()
    with tempfile.TemporaryDirectory(dir=directory) as tmp, ServeProcess(Path(tmp)) as serve:
        return _run(_bench(serve.namesrv, n, progress, prefilter))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=200_000, help="messages in the backlog")
    ap.add_argument("--dir", type=Path, default=None, help="where the temporary store goes")
    ap.add_argument("--no-prefilter", action="store_true", help="run the broker without the bit-map prefilter")
    args = ap.parse_args()
    run_filter_bench(args.count, args.dir, prefilter=not args.no_prefilter)


if __name__ == "__main__":
    main()
