"""``rocketq topic|group|cluster|message``: administration through the NameServers (:class:`Admin`).

Human tables by default, ``--json`` for scripts.  An unreachable NameServer, an unknown topic, a
refusal by a secured server (said with what to set: :mod:`rocketq.cli.client_options`) or a
message id that finds nothing is one line on stderr and exit code 1.
"""

from __future__ import annotations

import datetime as dt
import json

import click
from rich.markup import escape
from rich.table import Table

from rocketq.cli.client_options import call, client_options
from rocketq.cli.messaging import message_row
from rocketq.cli.ui import out


def _emit(as_json: bool, data, table: Table | None) -> None:
    if as_json:
        click.echo(json.dumps(data, indent=1, default=str))
    elif table is not None:
        out().print(table)


def _table(title: str, *cols: str) -> Table:
    t = Table(title=title)
    for c in cols:
        t.add_column(c)
    return t


def _admin(access):
    from rocketq.client import Admin
    return Admin(access.namesrv, **access.client_kwargs())


async def _with_admin(access, fn):
    async with _admin(access) as admin:
        return await fn(admin)


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


# -- topic ------------------------------------------------------------------------------------

@click.group()
def topic() -> None:
    """Create, show, list and delete topics."""


@topic.command("create")
@click.argument("name")
@click.option("--queues", type=click.IntRange(1, 1024), default=8, show_default=True)
@click.option("--cluster", help="Create on every master of this cluster (default: every master).")
@click.option("--broker", "broker_addr", help="Create on this broker address only.")
@click.option("--order", is_flag=True, help="Mark the topic as ordered.")
@click.option("--attributes", "-a", metavar="+KEY=VALUE,-KEY",
              help="Add, change (+key=value) or remove (-key) topic attributes, as mqadmin's -a: "
                   "+message.type=NORMAL|FIFO|DELAY|TRANSACTION. Attributes not named stay as they are.")
@client_options
def topic_create(name, access, queues, cluster, broker_addr, order, attributes) -> None:
    """Create (or update) topic NAME."""
    addrs = call(access, _with_admin(access, lambda a: a.create_topic(name, queues=queues, cluster=cluster,
                                                               broker_addr=broker_addr, order=order,
                                                               attributes=attributes)))
    click.echo(f"topic {name} created with {queues} queues on {', '.join(addrs)}")


@topic.command("config")
@click.argument("name")
@json_option
@client_options
def topic_config(name, access, as_json) -> None:
    """Show topic NAME's configuration on each master: queues, permission, attributes."""
    configs = call(access, _with_admin(access, lambda a: a.topic_configs(name)))
    t = _table(f"configuration of {escape(name)}", "broker", "read / write queues", "perm", "order", "attributes")
    for addr, c in sorted(configs.items()):
        attrs = ", ".join(f"{k}={v}" for k, v in sorted((c.get("attributes") or {}).items())) or "-"
        t.add_row(addr, f"{c.get('readQueueNums')} / {c.get('writeQueueNums')}", str(c.get("perm")),
                  str(bool(c.get("order"))).lower(), escape(attrs))
    _emit(as_json, {"topic": name, "brokers": configs}, t)


@topic.command("route")
@click.argument("name")
@json_option
@client_options
def topic_route(name, access, as_json) -> None:
    """Show which brokers and queues serve topic NAME."""
    route = call(access, _with_admin(access, lambda a: a.route(name)))
    brokers = {b.broker_name: b for b in route.broker_datas}
    rows = [{"broker": q.broker_name, "read_queues": q.read_queue_nums, "write_queues": q.write_queue_nums,
             "perm": q.perm, "addresses": {str(k): v for k, v in sorted(brokers[q.broker_name].addrs.items())}
             if q.broker_name in brokers else {}} for q in route.queue_datas]
    t = _table(f"route of {escape(name)}", "broker", "read queues", "write queues", "perm", "addresses")
    for r in rows:
        t.add_row(r["broker"], str(r["read_queues"]), str(r["write_queues"]), str(r["perm"]),
                  ", ".join(f"{k}={v}" for k, v in r["addresses"].items()))
    _emit(as_json, {"topic": name, "queues": rows}, t)


@topic.command("delete")
@click.argument("name")
@click.option("--cluster", help="Delete on the masters of this cluster (default: every master).")
@client_options
def topic_delete(name, access, cluster) -> None:
    """Delete topic NAME from the brokers and the NameServers."""
    call(access, _with_admin(access, lambda a: a.delete_topic(name, cluster=cluster)))
    click.echo(f"topic {name} deleted")


@topic.command("list")
@click.option("--all", "show_all", is_flag=True,
              help="Also list system topics, %RETRY% / %DLQ% topics and the topics brokers register under "
                   "their cluster and broker names, with a KIND column.")
@json_option
@client_options
def topic_list(access, show_all, as_json) -> None:
    """List the topics the NameServers know (your topics; --all for every one)."""
    from rocketq.common.system_names import USER
    kinds = call(access, _with_admin(access, lambda a: a.topic_kinds()))
    rows = [{"topic": t, "kind": k} for t, k in sorted(kinds.items()) if show_all or k == USER]
    if as_json:
        click.echo(json.dumps(rows))
    elif show_all:
        width = max((len(r["topic"]) for r in rows), default=0)
        click.echo("\n".join(f"{r['topic']:<{width}}  {r['kind']}" for r in rows))
    else:
        click.echo("\n".join(r["topic"] for r in rows))


# -- group ------------------------------------------------------------------------------------

@click.group()
def group() -> None:
    """Consumer groups and their lag."""


@group.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also list RocketMQ's system groups (TOOLS_CONSUMER, "
                                                          "CID_RMQ_SYS_*, ...).")
@json_option
@client_options
def group_list(access, show_all, as_json) -> None:
    """List the subscription groups of every master."""
    from rocketq.common.system_names import is_system_group
    groups = [g for g in call(access, _with_admin(access, lambda a: a.groups())) if show_all or not is_system_group(g)]
    click.echo(json.dumps(groups) if as_json else "\n".join(groups))


@group.command("lag")
@click.argument("name")
@click.option("--topic", "topic_name", help="Only this topic.")
@json_option
@client_options
def group_lag(name, access, topic_name, as_json) -> None:
    """Per-queue lag of consumer group NAME: broker offset - committed offset."""
    lags = call(access, _with_admin(access, lambda a: a.consumer_lag(name, topic_name)))
    if not lags:
        raise click.ClickException(f"group {name} has no committed offsets"
                                   + (f" for topic {topic_name}" if topic_name else ""))
    rows = [{"topic": q.queue.topic, "broker": q.queue.broker_name, "queue_id": q.queue.queue_id,
             "broker_offset": q.broker_offset, "consumer_offset": q.consumer_offset, "lag": q.lag,
             "last_consumed": q.last_timestamp} for q in lags]
    t = _table(f"lag of {escape(name)}", "topic", "broker", "queue", "broker offset", "consumer offset", "lag",
               "last consumed")
    for r in rows:
        last = dt.datetime.fromtimestamp(r["last_consumed"] / 1000).isoformat(" ", "seconds") \
            if r["last_consumed"] > 0 else "-"
        t.add_row(r["topic"], r["broker"], str(r["queue_id"]), f"{r['broker_offset']:,}",
                  f"{r['consumer_offset']:,}", f"{r['lag']:,}", last)
    t.add_row("total", "", "", "", "", f"{sum(r['lag'] for r in rows):,}", "")
    _emit(as_json, {"group": name, "queues": rows, "total_lag": sum(r["lag"] for r in rows)}, t)


# -- cluster ----------------------------------------------------------------------------------

@click.command()
@json_option
@client_options
def cluster(access, as_json) -> None:
    """Clusters, brokers, their addresses and runtime figures."""
    async def collect(admin):
        rows, errors = [], []
        for b in await admin.brokers():
            for bid, addr in sorted(b.addrs.items()):
                try:
                    info = await admin.broker_runtime(addr)
                except Exception as exc:      # one broker down must not hide the others
                    info = {"error": str(exc)}
                    errors.append(exc)
                rows.append({"cluster": b.cluster, "broker": b.broker_name, "id": bid, "address": addr,
                             "role": _role(bid, info, 0 in b.addrs),
                             "put_tps": info.get("putTps", ""), "get_tps": info.get("getTransferedTps", ""),
                             "put_total": info.get("msgPutTotalTodayNow", ""),
                             "get_total": info.get("msgGetTotalTodayNow", ""), "version": info.get("brokerVersionDesc",
                                                                                                   info.get("error"))})
        if errors and len(errors) == len(rows):    # no broker answered: an error, not a table of errors
            raise errors[0]
        return rows
    rows = call(access, _with_admin(access, collect))
    t = _table("cluster", "cluster", "broker", "id", "role", "address", "put TPS (10s 1m 10m)", "get TPS",
               "put today", "got today", "version")
    for r in rows:
        t.add_row(*(str(r[k]) for k in ("cluster", "broker", "id", "role", "address", "put_tps", "get_tps",
                                        "put_total", "get_total", "version")))
    _emit(as_json, rows, t)


def _role(broker_id: int, info: dict, has_master: bool) -> str:
    """master, slave, or "acting master": a slave that delivers for its masterless group (brokerActive)."""
    if broker_id == 0:
        return "master"
    if not has_master and info.get("brokerActive") == "true":
        return "acting master"
    return "slave" if "error" not in info else "?"


# -- message ----------------------------------------------------------------------------------

@click.group()
def message() -> None:
    """Find messages by key or id."""


@message.command("query")
@click.argument("topic_name", required=False)
@click.option("--topic", "topic_option", metavar="TOPIC", help="The topic (the same as the TOPIC argument).")
@click.option("--key", help="A message key (KEYS) or unique id; needs the topic.")
@click.option("--id", "msg_id", help="A message id: the msgId `rocketq send` prints (the client's unique id) or "
                                     "its offset_msg_id (the broker's). A client id is looked up in TOPIC, or "
                                     "without it in every user topic.")
@click.option("--max", "max_num", type=click.IntRange(1, 1024), default=64, show_default=True)
@json_option
@client_options
def message_query(topic_name, access, topic_option, key, msg_id, max_num, as_json) -> None:
    """Find messages of TOPIC by --key, or one message by --id."""
    if topic_name and topic_option and topic_name != topic_option:
        raise click.UsageError(f"two topics given: {topic_name} and --topic {topic_option}")
    topic_name = topic_name or topic_option
    if bool(key) == bool(msg_id):
        raise click.UsageError("give exactly one of --key and --id")
    if key and not topic_name:
        raise click.UsageError("--key needs the TOPIC")

    async def find(admin):
        if key:
            return await admin.query_by_key(topic_name, key, max_num)
        return [await admin.view_by_id(msg_id, topic_name)]
    msgs = call(access, _with_admin(access, find))
    if not msgs:
        raise click.ClickException(f"no message of topic {topic_name} has key {key}")
    rows = [message_row(m) for m in msgs]
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    for r in rows:
        t = _table(f"{escape(r['topic'])} #{r['queue_id']} @{r['queue_offset']}", "field", "value")
        for k, v in r.items():
            t.add_row(k, escape(str(v)))
        out().print(t)
