"""``rocketq group reset-offset`` and ``rocketq broker config get|set``: operator commands on running brokers.

``group reset-offset GROUP --topic T --to earliest|latest|TIME`` moves the group's offsets on every
master of the topic (INVOKE_BROKER_TO_RESET_OFFSET); consumers that are running follow without a
restart (RESET_CONSUMER_CLIENT_OFFSET, and the reset answers their next pull).  ``TIME`` is ms
since the epoch or an ISO date (local time unless it names a zone).

``broker config get [KEY...]`` shows the settings of every master (or ``--broker``);
``broker config set KEY=VALUE...`` changes them (UPDATE_BROKER_CONFIG): the broker says which took
effect at once and which it saved for its next start.
"""

from __future__ import annotations

import datetime as dt
import json

import click
from rich.markup import escape

from rocketq.cli.admin_cmds import _emit, _table, _with_admin, group, json_option
from rocketq.cli.client_options import call, client_options
from rocketq.cli.serve_cmd import broker


def parse_reset_target(value: str) -> int:
    """earliest -> 0, latest -> -1, ms since the epoch, or an ISO 8601 date/time -> ms."""
    if value == "earliest":
        return 0
    if value == "latest":
        return -1
    if value.isdigit():
        return int(value)
    try:
        return int(dt.datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not earliest, latest, ms since the epoch or an ISO date",
                                 param_hint="--to") from None


@group.command("reset-offset")
@click.argument("name")
@click.option("--topic", "topic_name", required=True, help="The topic whose offsets move.")
@click.option("--to", "target", required=True, metavar="earliest|latest|TIME",
              help="earliest (each queue's first message), latest (its end), or a time: ms since the epoch or "
                   "an ISO date (the first message stored at or after it).")
@json_option
@client_options
def group_reset_offset(name, topic_name, target, access, as_json) -> None:
    """Move consumer group NAME's offsets on a topic; running consumers follow without a restart."""
    ts = parse_reset_target(target)
    offsets = call(access, _with_admin(access, lambda a: a.reset_offset(name, topic_name, ts)))
    rows = [{"broker": mq.broker_name, "queue_id": mq.queue_id, "offset": o} for mq, o in sorted(offsets.items())]
    t = _table(f"offsets of {escape(name)} on {escape(topic_name)} now", "broker", "queue", "offset")
    for r in rows:
        t.add_row(r["broker"], str(r["queue_id"]), f"{r['offset']:,}")
    _emit(as_json, {"group": name, "topic": topic_name, "queues": rows}, t)


@broker.group("config")
def broker_config() -> None:
    """Read and change the settings of running brokers (GET / UPDATE_BROKER_CONFIG)."""


@broker_config.command("get")
@click.argument("keys", nargs=-1)
@click.option("--broker", "broker_addr", help="Only this broker address (default: every master).")
@json_option
@client_options
def config_get(keys, access, broker_addr, as_json) -> None:
    """Show the settings (all, or KEYS) of every master."""
    configs = call(access, _with_admin(access, lambda a: a.broker_configs(broker_addr)))
    shown = {addr: {k: v for k, v in c.items() if not keys or k in keys} for addr, c in configs.items()}
    if as_json:
        click.echo(json.dumps(shown, indent=1))
        return
    for addr, c in sorted(shown.items()):
        t = _table(f"settings of {escape(addr)}", "key", "value")
        for k, v in sorted(c.items()):
            t.add_row(k, escape(v))
        _emit(False, None, t)


@broker_config.command("set")
@click.argument("pairs", nargs=-1, required=True, metavar="KEY=VALUE...")
@click.option("--broker", "broker_addr", help="Only this broker address (default: every master).")
@client_options
def config_set(pairs, access, broker_addr) -> None:
    """Change settings on every master; says which took effect now and which need a restart."""
    settings = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{pair!r} is not KEY=VALUE", param_hint="KEY=VALUE")
        settings[key.strip()] = value.strip()
    answers = call(access, _with_admin(access, lambda a: a.update_broker_config(settings, broker_addr=broker_addr)))
    for addr, remark in sorted(answers.items()):
        click.echo(f"{addr}: {remark or 'done'}")
