"""``rocketq controller``: run one controller process of the etcd-backed controller
(:mod:`rocketq.controller.server`).  Start several (on different hosts) against the same etcd cluster:
one is active, the others take over when its lease expires.  Brokers list all of them in
``controllerAddr`` (``host:port;host:port``).

Prints ``The Controller boot success. listening on HOST:PORT`` once serving, as the NameServer and
broker commands print their boot line (tests and scripts wait for it).  ``--acl plain_acl.yml`` makes
every request need an admin account's signature (or a white-listed address); the boot line says
whether ACL is on.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import click

from rocketq.cli.log_setup import apply as apply_logging
from rocketq.cli.log_setup import log_options
from rocketq.controller.leadership import DEFAULT_LEASE_TTL_S
from rocketq.controller.server import DEFAULT_PORT, DEFAULT_PREFIX, ControllerServer
from rocketq.namesrv.controller import DEFAULT_MASTER_TIMEOUT_MS


async def serve(endpoints: list[str], host: str, port: int, **kw) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = await ControllerServer(endpoints, host, port, **kw).start()
    acl = "ACL on: admin accounts only" if server.acl is not None else "ACL off: any peer is served"
    click.echo(f"The Controller boot success. listening on {server.address} ({acl})", nl=True)
    try:
        await stop.wait()
        click.echo("rocketq controller: shutting down")
    finally:
        await server.close()


@click.command("controller")
@click.option("--etcd", "etcd_endpoints", required=True, metavar="URL[,URL...]",
              help="The etcd cluster's client URLs (every member), e.g. http://127.0.0.1:2379,http://10.0.0.2:2379.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on (0.0.0.0 for every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="Port to listen on (0 picks a free one).")
@click.option("--advertise", metavar="HOST:PORT",
              help="The address other processes reach this controller at [default: HOST:PORT].")
@click.option("--prefix", default=DEFAULT_PREFIX, show_default=True,
              help="etcd key prefix of this controller group's state (one etcd can hold several groups).")
@click.option("--master-timeout-ms", type=click.IntRange(100), default=DEFAULT_MASTER_TIMEOUT_MS, show_default=True,
              help="A master silent for this long is replaced by its most up-to-date in-sync slave.")
@click.option("--lease-ttl-s", type=click.IntRange(1, 60), default=DEFAULT_LEASE_TTL_S, show_default=True,
              help="The active controller's etcd lease: a standby takes over this long after it dies.")
@click.option("--elect-unclean", is_flag=True,
              help="Also elect a slave out of the SyncStateSet or behind another (may lose acknowledged messages).")
@click.option("--acl", "acl_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Enable ACL with this plain_acl.yml: every request must be signed by an admin account "
                   "(brokers: innerClientAuthenticationCredentials or their own ACL file's admin; mqadmin: "
                   "its ak/sk) or come from a white-listed address.")
@log_options
def controller(etcd_endpoints: str, host: str, port: int, advertise: str | None, prefix: str,
               master_timeout_ms: int, lease_ttl_s: int, elect_unclean: bool, acl_file: Path | None,
               logging_options: dict) -> None:
    """Run a controller of brokers in controller mode, its state kept in etcd."""
    from rocketq.namesrv.cli import run_loop
    apply_logging(logging_options)
    acl = None
    if acl_file is not None:
        from rocketq.acl import AclConfigError, AclValidator
        try:
            acl = AclValidator(acl_file)
        except AclConfigError as exc:
            raise click.ClickException(str(exc)) from None
    if not prefix.endswith("/"):
        prefix += "/"
    endpoints = [e.strip() for e in etcd_endpoints.split(",") if e.strip()]
    run_loop(serve(endpoints, host, port, prefix=prefix, master_timeout_ms=master_timeout_ms,
                   lease_ttl_s=lease_ttl_s, elect_unclean=elect_unclean, advertise=advertise, acl=acl))
