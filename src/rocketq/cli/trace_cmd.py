"""``rocketq message trace MSGID``: a message's path from the trace topic's records.

Clients with message trace on send a record for each send, delivery and consume to
``RMQ_SYS_TRACE_TOPIC`` (:mod:`rocketq.common.trace` has the format); this command finds the
records that name MSGID (the client's message id, as ``rocketq send`` prints it) through the index
and prints them in time order: sent by which producer group, stored on which broker, delivered to
and consumed by which group, when, how long it took and whether it succeeded.  A message nobody
traced is one line on stderr and exit code 1.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import asdict

import click
from rich.markup import escape
from rich.table import Table

from rocketq.cli.admin_cmds import _with_admin
from rocketq.cli.client_options import call, client_options
from rocketq.cli.ui import out
from rocketq.common.trace import TRACE_TOPIC


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000).isoformat(" ", "milliseconds") if ms > 0 else "-"


@click.command("trace")
@click.argument("msg_id")
@click.option("--trace-topic", default=TRACE_TOPIC, show_default=True, help="The topic traced clients write to.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@client_options
def trace(msg_id, access, trace_topic, as_json) -> None:
    """Show the path of message MSG_ID (sent, delivered, consumed) from its trace records."""
    steps = call(access, _with_admin(access, lambda admin: admin.trace(msg_id.strip(), trace_topic)))
    if not steps:
        raise click.ClickException(f"no trace record names message {msg_id} in {trace_topic} (was trace on in "
                                   "the producer and consumers?)")
    if as_json:
        click.echo(json.dumps([asdict(s) for s in steps], indent=1))
        return
    t = Table(title=f"trace of {escape(msg_id)}")
    for col in ("step", "time", "group", "where", "cost ms", "status", "detail"):
        t.add_column(col)
    for s in steps:
        t.add_row(s.kind, _when(s.timestamp_ms), escape(s.group), escape(s.where), str(s.cost_ms), escape(s.status),
                  escape(s.detail))
    out().print(t)
