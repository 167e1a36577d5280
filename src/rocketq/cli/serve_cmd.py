"""``rocketq serve`` (NameServer + broker + gRPC endpoint in one process) and ``rocketq broker``
(a broker alone, registering with ``--namesrv``), both configured the RocketMQ way.

Configuration: ``-c broker.conf`` (or ``rocketq.toml``), ``ROCKETQ_<key>`` variables, the flags
below and ``--set key=value`` for any other key (see :mod:`rocketq.server.config`).  Both run until
Ctrl-C / SIGTERM and then shut down cleanly (the store is flushed and its abort marker removed).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from pathlib import Path

import click

from rocketq.server import config as server_config

log = logging.getLogger(__name__)


def run_until_signalled(start, stop) -> None:
    """Run ``await start()``, then wait for SIGINT/SIGTERM, then ``await stop()`` (on uvloop when installed).
    The soft open-files limit is raised to the hard one first, as a server process does."""
    from rocketq.remoting.limits import raise_open_files_limit
    raise_open_files_limit()

    async def main() -> None:
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):       # before start() announces itself
            loop.add_signal_handler(sig, done.set)
        await start()
        try:
            await done.wait()
        finally:
            await stop()

    try:
        import uvloop
    except ImportError:
        asyncio.run(main())
    else:
        uvloop.run(main())


def _parse_sets(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not key=value", param_hint="--set")
        out[key.strip()] = value.strip()
    return out


def _common_options(fn):
    options = [
        click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
                     help="broker.conf (Java properties) or .toml file with RocketMQ key names."),
        click.option("--store-path", type=click.Path(path_type=Path),
                     help="Store root (storePathRootDir) [default: ~/rocketq/store]."),
        click.option("--host", help="Address to listen on (bindAddress) [default: 0.0.0.0]."),
        click.option("--port", type=click.IntRange(0, 65535), help="Broker port (listenPort) [default: 10911]."),
        click.option("--flush-disk-type", type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]),
                     help="flushDiskType [default: ASYNC_FLUSH]."),
        click.option("--acl", "acl_file", type=click.Path(dir_okay=False, path_type=Path),
                     help="Enable ACL with this plain_acl.yml (aclEnable=true, aclFile=FILE)."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Any other setting; repeatable."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def load_config(config_file, store_path, host, port, flush_disk_type, acl_file, sets, **extra):
    overrides = {"storePathRootDir": str(store_path) if store_path else None, "bindAddress": host,
                 "listenPort": port, "flushDiskType": flush_disk_type, **extra, **_parse_sets(sets)}
    if acl_file:
        overrides.update(aclEnable="true", aclFile=str(acl_file))
    defaults = {"storePathRootDir": str(Path.home() / "rocketq" / "store"), "bindAddress": "0.0.0.0"}
    try:
        cfg = server_config.build([(k, v, "default") for k, v in defaults.items()]
                                  + (server_config.read_file(config_file) if config_file else [])
                                  + server_config.read_env(os.environ)
                                  + [(k, v, f"option {k}") for k, v in overrides.items() if v is not None])
    except server_config.ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    for warning in cfg.warnings:
        log.warning("%s", warning)
    return cfg


@click.command()
@_common_options
@click.option("--namesrv-port", type=click.IntRange(0, 65535), help="NameServer port [default: 9876].")
@click.option("--grpc-port", type=click.IntRange(0, 65535), help="gRPC endpoint port (grpcServerPort) [default: 8081].")
@click.option("--no-grpc", is_flag=True, help="Do not serve the RocketMQ 5 gRPC protocol.")
def serve(config_file, store_path, host, port, flush_disk_type, acl_file, sets, namesrv_port, grpc_port,
          no_grpc) -> None:
    """Run a NameServer, a broker and the gRPC endpoint in one process (the standalone mode)."""
    from rocketq.server.standalone import Standalone
    cfg = load_config(config_file, store_path, host, port, flush_disk_type, acl_file, sets,
                      namesrvListenPort=namesrv_port, grpcServerPort=-1 if no_grpc else grpc_port)
    server = Standalone(cfg)

    async def start() -> None:
        await server.start()
        addrs = server.addresses()
        click.echo(f"rocketq serving: NameServer {addrs['namesrv']}, broker {cfg.broker.broker_name} "
                   f"({cfg.broker.cluster_name}) {addrs['broker']}"
                   + (f", gRPC {addrs['grpc']}" if "grpc" in addrs else "")
                   + f", store {cfg.store.store_path} ({cfg.store.flush_disk_type})", nl=True)

    async def stop() -> None:
        await server.close()
        click.echo("rocketq stopped cleanly")

    run_until_signalled(start, stop)


@click.command()
@_common_options
@click.option("--namesrv", "namesrv_addr", help="NameServer addresses, host:port;host:port (namesrvAddr).")
@click.option("--broker-name", help="brokerName [default: broker-a].")
@click.option("--cluster", "cluster_name", help="brokerClusterName [default: DefaultCluster].")
def broker(config_file, store_path, host, port, flush_disk_type, acl_file, sets, namesrv_addr, broker_name,
           cluster_name) -> None:
    """Run a broker alone; it registers with the NameServers of --namesrv."""
    from rocketq.broker.broker import Broker
    cfg = load_config(config_file, store_path, host, port, flush_disk_type, acl_file, sets, namesrvAddr=namesrv_addr,
                      brokerName=broker_name, brokerClusterName=cluster_name)
    b = Broker(cfg.broker, cfg.store)

    async def start() -> None:
        await b.start()
        click.echo(f"broker {cfg.broker.broker_name} ({cfg.broker.cluster_name}) listening on {b.address}, "
                   f"store {cfg.store.store_path}", nl=True)

    async def stop() -> None:
        await b.close()
        click.echo("broker stopped cleanly")

    run_until_signalled(start, stop)
