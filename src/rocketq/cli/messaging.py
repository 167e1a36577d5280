"""``rocketq send`` and ``rocketq consume``: messages from and to the terminal, through a running
NameServer (``--namesrv``, ``ROCKETQ_NAMESRV`` or the client profile's; default ``127.0.0.1:9876``),
with the credentials and TLS settings of :mod:`rocketq.cli.client_options`.

``send`` sends one message (BODY, ``--file``, or stdin with ``--file -``), or ``--count N --size S``
generated ones with many in flight and a progress bar, ending with a summary (messages/s, MB/s,
latency percentiles).  ``consume`` prints messages as they arrive - one line each, or JSON lines
with ``--json`` - and stops after ``--count`` messages, after ``--idle`` seconds without one, or on
Ctrl-C.  With ``--group`` it is a member of that consumer group (subscribed, rebalanced, offsets
committed when it stops); without, it reads as no group: every queue assigned, no heartbeat, offsets
kept in memory (RocketMQ's tools read as ``TOOLS_CONSUMER`` the same way), so the brokers keep no
trace of it - no subscription group, no ``%RETRY%`` topic, no offsets.  A topic without a route is
an error unless ``--wait``.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import sys
import time

import click
from rich.markup import escape
from rich.table import Table

from rocketq.cli.client_options import call, client_options
from rocketq.cli.ui import err, out, step_progress


def run(coro):
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))] if sorted_values else 0.0


def _message(topic, body, tag, keys, props, delay):
    from rocketq.client import Message
    return Message(topic, body, tags=tag or None, keys=list(keys) or None, properties=dict(props), delay_level=delay)


def _parse_props(values: tuple[str, ...]) -> list[tuple[str, str]]:
    out_ = []
    for item in values:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise click.BadParameter(f"{item!r} is not key=value", param_hint="--property")
        out_.append((k, v))
    return out_


@click.command()
@click.argument("topic")
@click.argument("body", required=False)
@click.option("--file", "file_", type=click.File("rb"), help="Read the body from a file ('-' for stdin).")
@click.option("--count", type=click.IntRange(min=1), help="Send COUNT generated messages of --size bytes.")
@click.option("--size", type=click.IntRange(min=1, max=4 * 1024 * 1024), default=1024, show_default=True)
@click.option("--inflight", type=click.IntRange(min=1, max=10_000), default=256, show_default=True,
              help="Sends in flight at once with --count.")
@click.option("--tag", help="The message's tag.")
@click.option("--key", "keys", multiple=True, help="A key to find the message by (repeatable).")
@click.option("--property", "props", multiple=True, metavar="K=V", help="A user property (repeatable).")
@click.option("--delay-level", type=click.IntRange(min=0, max=18), default=0, help="Deliver later (1=1s ... 18=2h).")
@click.option("--sharding-key", help="Messages with the same sharding key go to one queue, in order.")
@click.option("--group", default="rocketq-cli-producer", show_default=True, help="Producer group.")
@click.option("--json", "as_json", is_flag=True, help="Print results as JSON.")
@client_options
def send(topic, body, access, file_, count, size, inflight, tag, keys, props, delay_level, sharding_key, group,
         as_json) -> None:
    """Send a message to TOPIC: BODY, --file, or --count N generated ones."""
    props = _parse_props(props)
    given = [what for what, v in (("BODY", body), ("--file", file_), ("--count", count)) if v is not None]
    if len(given) > 1:
        raise click.UsageError(f"give one of BODY, --file and --count, not {' and '.join(given)}")
    if count is None:
        if file_ is not None:
            data = file_.read()
        elif body is not None:
            data = body.encode()
        else:
            raise click.UsageError("give a BODY, --file PATH (or - for stdin), or --count N")
        result = call(access, _send_one(access, group, _message(topic, data, tag, keys, props, delay_level),
                                        sharding_key))
        row = {"msg_id": result.msg_id, "offset_msg_id": result.offset_msg_id, "status": result.status.value,
               "broker": result.queue.broker_name, "queue_id": result.queue.queue_id,
               "queue_offset": result.queue_offset}
        if as_json:
            click.echo(json.dumps(row))
        else:
            click.echo(f"{row['status']} msgId={row['msg_id']} queue={topic}@{row['broker']}#{row['queue_id']} "
                       f"offset={row['queue_offset']}")
        return
    summary = call(access, _send_many(access, group, topic, count, size, inflight, tag, keys, props, delay_level,
                                      sharding_key))
    if as_json:
        click.echo(json.dumps(summary))
    else:
        table = Table(title=f"sent {summary['sent']:,} messages of {size:,} B to {escape(topic)}")
        for col in ("msgs/s", "MB/s", "p50 ms", "p99 ms", "p999 ms", "failed"):
            table.add_column(col, justify="right")
        table.add_row(f"{summary['msgs_per_s']:,.0f}", f"{summary['mb_per_s']:.1f}", f"{summary['p50_ms']:.3f}",
                      f"{summary['p99_ms']:.3f}", f"{summary['p999_ms']:.3f}", str(summary["failed"]))
        out().print(table)
    if summary["failed"]:
        from rocketq.client.access import explain
        raise click.ClickException(f"{summary['failed']} of {count} sends failed; first error: "
                                   f"{explain(summary['error'], access)}")


async def _send_one(access, group, msg, sharding_key):
    from rocketq.client import Producer
    async with Producer(group, access.namesrv, **access.client_kwargs()) as p:
        return await p.send(msg, sharding_key=sharding_key)


async def _send_many(access, group, topic, count, size, inflight, tag, keys, props, delay, sharding_key) -> dict:
    from rocketq.client import MQClientError, Producer
    body = os.urandom(16).hex().encode() * (size // 32 + 1)
    body = body[:size]
    lat: list[float] = []
    failed, first_error = 0, ""
    bar, task = step_progress(count, "sending")
    async with Producer(group, access.namesrv, **access.client_kwargs()) as p:
        sem = asyncio.Semaphore(inflight)

        async def one():
            nonlocal failed, first_error
            async with sem:
                t = time.perf_counter()
                try:
                    await p.send(_message(topic, body, tag, keys, props, delay), sharding_key=sharding_key)
                    lat.append(time.perf_counter() - t)
                except MQClientError as exc:
                    failed += 1
                    first_error = first_error or str(exc)
                bar.advance(task)
        with bar:
            t0 = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(count)))
            elapsed = time.perf_counter() - t0
    lat.sort()
    sent = len(lat)
    return {"sent": sent, "failed": failed, "error": first_error, "seconds": elapsed,
            "msgs_per_s": sent / elapsed, "mb_per_s": sent * size / elapsed / 1e6,
            "p50_ms": percentile(lat, 0.5) * 1000, "p99_ms": percentile(lat, 0.99) * 1000,
            "p999_ms": percentile(lat, 0.999) * 1000}


def _parse_from(value: str):
    from rocketq.client import ConsumeFrom
    if value == "first":
        return ConsumeFrom.FIRST, 0
    if value == "last":
        return ConsumeFrom.LAST, 0
    if value.isdigit():
        return ConsumeFrom.TIMESTAMP, int(value)
    try:
        return ConsumeFrom.TIMESTAMP, int(dt.datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not first, last, a timestamp in ms or an ISO date",
                                 param_hint="--from") from None


def message_row(m) -> dict:
    body = m.body
    try:
        text, encoding = body.decode(), "utf-8"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(body).decode(), "base64"
    return {"topic": m.topic, "queue_id": m.queue_id, "queue_offset": m.queue_offset, "msg_id": m.uniq_key or m.msg_id,
            "offset_msg_id": m.msg_id, "tags": m.tags, "keys": m.keys, "born_timestamp": m.born_timestamp,
            "store_timestamp": m.store_timestamp, "reconsume_times": m.reconsume_times,
            "properties": m.properties, "body": text, "body_encoding": encoding}


ROUTE_WAIT_INTERVAL_S = 1.0           # --wait: how often the NameServers are asked for the topic


@click.command()
@click.argument("topic")
@click.option("--group", help="Consumer group; it is registered with the brokers and its offsets are committed "
                              "on exit. Without --group the messages are read as no group: nothing is "
                              "registered and nothing committed (RocketMQ's TOOLS_CONSUMER reads).")
@click.option("--tag", "tags", default="*", show_default=True, help="Tag expression, e.g. 'TagA || TagB'.")
@click.option("--from", "from_", default="last", show_default=True,
              help="Where to start: first, last (the end of each queue), a timestamp in ms, or an ISO date. "
                   "With --group it applies only while the group has no offset for a queue, and then, as in "
                   "RocketMQ, 'last' starts a young queue (one that still holds its first message, offset 0) "
                   "at 0: a new group reads a new topic from its beginning.")
@click.option("--count", type=click.IntRange(min=1), help="Stop after COUNT messages.")
@click.option("--idle", type=click.FloatRange(min=0.1), help="Stop after IDLE seconds without a message.")
@click.option("--wait", "wait_for_topic", is_flag=True,
              help="If TOPIC does not exist yet, wait for it (up to --idle seconds) instead of failing.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message (body as text or base64).")
@client_options
def consume(topic, access, group, tags, from_, count, idle, wait_for_topic, as_json) -> None:
    """Print the messages of TOPIC as they arrive."""
    consume_from, ts = _parse_from(from_)
    got = call(access, _consume(topic, access, group, tags, consume_from, ts, count, idle, wait_for_topic, as_json))
    who = f"as group {escape(group)}" if group else "as no group (nothing committed)"
    err().print(f"[dim]{got} message(s) from {escape(topic)} {who}[/dim]")


async def _consume(topic, access, group, tags, consume_from, ts, count, idle, wait_for_topic, as_json) -> int:
    from rocketq.client import LitePullConsumer
    from rocketq.client.offset_store import MemoryOffsetStore
    from rocketq.common.system_names import TOOLS_CONSUMER_GROUP
    c = LitePullConsumer(group or TOOLS_CONSUMER_GROUP, access.namesrv, consume_from=consume_from,
                         consume_timestamp_ms=ts, offset_store=None if group else MemoryOffsetStore(),
                         **access.client_kwargs())
    try:
        route = await _await_route(c.instance, topic, access.namesrv, wait_for_topic, idle)
        if route is None:
            return 0
        if group:
            c.subscribe(topic, tags)
        else:       # every queue, no rebalancing and no heartbeat: the brokers keep no trace of this reader
            await c.assign(sorted(route.read_queues()), tags)
        await c.start()
        return await _print_messages(c, count, idle, as_json)
    finally:
        await c.shutdown() if c.running else await c.instance.close()


async def _await_route(instance, topic, namesrv, wait: bool, idle: float | None):
    """The route of *topic*; without --wait a missing topic is an error, with it None after --idle."""
    deadline = time.monotonic() + idle if idle is not None else None
    while True:
        route = await instance.route(topic, refresh=True)
        if route is not None:
            return route
        if not wait:
            raise click.ClickException(f"topic {topic} does not exist (the NameServers at {namesrv} have no route "
                                       f"for it); create it with `rocketq topic create {topic}`, send to it, or "
                                       "pass --wait to wait for it")
        if deadline is not None and time.monotonic() >= deadline:
            return None
        await asyncio.sleep(ROUTE_WAIT_INTERVAL_S)


async def _print_messages(c, count, idle, as_json) -> int:
    got, last = 0, time.monotonic()
    while count is None or got < count:
        msgs = await c.poll(0.5, max_messages=(count - got) if count else 1024)
        if not msgs and c.refusal is not None:        # the broker refuses this reader: waiting will not help
            raise c.refusal
        if not msgs:
            if idle is not None and time.monotonic() - last >= idle:
                break
            continue
        last = time.monotonic()
        for m in msgs:
            row = message_row(m)
            if as_json:
                sys.stdout.write(json.dumps(row) + "\n")
            else:
                sys.stdout.write(f"{m.topic}#{m.queue_id}@{m.queue_offset} {row['msg_id']} "
                                 f"tags={m.tags or '-'} keys={','.join(m.keys) or '-'} {row['body']}\n")
            got += 1
        sys.stdout.flush()
    return got
