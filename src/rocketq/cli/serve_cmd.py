"""``rocketq serve`` (NameServer + broker + gRPC endpoint in one process) and ``rocketq broker``
(a broker alone, registering with ``--namesrv``), both configured the RocketMQ way.

Configuration: ``--store-profile`` (store file sizes, :mod:`rocketq.server.profiles`; ``--profile``
before, still accepted), ``-c broker.conf``
(or ``rocketq.toml``), ``ROCKETQ_<key>`` variables, the flags below and ``--set key=value`` for any
other key (see :mod:`rocketq.server.config`), later ones winning.  Logging: INFO by default, a
rotated ``--log-file``, ``--log-format json`` (:mod:`rocketq.cli.log_setup`).  Both run until
Ctrl-C / SIGTERM and then shut down cleanly (the store is flushed and its abort marker removed).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
from pathlib import Path

import click

from rocketq.acl.setup import acl2_enabled
from rocketq.cli.log_setup import apply as apply_logging, log_options
from rocketq.server import config as server_config
from rocketq.server.exposure import exposure
from rocketq.server.profiles import DEFAULT_PROFILE, PROFILES, describe_allocation, profile_entries

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
        click.option("--host", help="Address every port listens on (bindAddress) [default: 127.0.0.1, this "
                                    "machine only; 0.0.0.0 for every interface]. brokerIP1 only sets the "
                                    "address announced to clients."),
        click.option("--port", type=click.IntRange(0, 65535), help="Broker port (listenPort) [default: 10911]."),
        click.option("--flush-disk-type", type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]),
                     help="flushDiskType [default: ASYNC_FLUSH]."),
        click.option("--acl", "acl_file", type=click.Path(dir_okay=False, path_type=Path),
                     help="Enable ACL with this plain_acl.yml (aclEnable=true, aclFile=FILE)."),
        click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Any other setting; repeatable."),
    ]
    fn = store_profile_option(DEFAULT_PROFILE, "Store file sizes: default = RocketMQ's (1 GiB CommitLog segments, "
                              "two allocated at once, and a 401 MiB index: ~2.4 GiB of disk); small = 64 MiB "
                              "segments and an 8 MiB index (~140 MiB), for laptops and CI. Settings of a file, "
                              "the environment or flags win over the profile's.")(fn)
    for option in reversed(options):
        fn = option(fn)
    return fn


def store_profile_option(default: str, help_text: str):
    """``--store-profile`` (passed on as ``profile``), and ``--profile``, its name before the client
    commands took ``--profile`` for client profiles: still accepted here, hidden, with a notice."""
    choice = click.Choice(sorted(PROFILES))

    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, store_profile=None, legacy_profile=None, **kwargs):
            if store_profile and legacy_profile and store_profile != legacy_profile:
                raise click.UsageError(f"--store-profile {store_profile} and --profile {legacy_profile} disagree")
            if legacy_profile:
                click.echo(f"rocketq: note: --profile {legacy_profile} is now --store-profile {legacy_profile} "
                           "(--profile names a client profile in the client commands)", err=True)
            kwargs["profile"] = store_profile or legacy_profile or default
            return f(*args, **kwargs)
        wrapper = click.option("--profile", "legacy_profile", type=choice, hidden=True)(wrapper)
        return click.option("--store-profile", type=choice, help=f"{help_text}  [default: {default}]")(wrapper)
    return decorate


def _observe_options(fn):
    """The console's and the metrics' flags (rocketq.console, rocketq.broker.metrics_http)."""
    for option in reversed([
        click.option("--console-port", type=click.IntRange(0, 65535),
                     help="Web console port (consolePort) [default: 8080, on --host]."),
        click.option("--no-console", is_flag=True, help="Do not serve the web console."),
        click.option("--no-metrics", is_flag=True, help="Do not serve /metrics (metricsExporterType=DISABLE; "
                                                        "the port is metricsPromExporterPort, default 5557)."),
    ]):
        fn = option(fn)
    return fn


def _observe_settings(console_port, no_console, no_metrics) -> dict:
    return {"consolePort": -1 if no_console else console_port, "metricsExporterType": "DISABLE" if no_metrics else None}


def load_config(config_file, store_path, host, port, flush_disk_type, acl_file, sets, *, profile=DEFAULT_PROFILE,
                client_env=True, more_defaults=None, **extra):
    """Defaults < profile < file < saved (``broker config set``) < environment < flags; *client_env*:
    ROCKETQ_NAMESRV is namesrvAddr."""
    overrides = {"storePathRootDir": str(store_path) if store_path else None, "bindAddress": host,
                 "listenPort": port, "flushDiskType": flush_disk_type, **extra, **_parse_sets(sets)}
    if acl_file:
        overrides.update(aclEnable="true", aclFile=str(acl_file))
    # the servers export metrics unless told not to (a library Broker follows RocketMQ: off)
    defaults = {"storePathRootDir": str(Path.home() / "rocketq" / "store"), "bindAddress": "127.0.0.1",
                "metricsExporterType": "PROM", **(more_defaults or {})}
    try:
        base = profile_entries(profile) + (server_config.read_file(config_file) if config_file else [])
        later = (server_config.read_env(os.environ, client_keys=client_env)
                 + [(k, v, f"option {k}") for k, v in overrides.items() if v is not None])
        given = base + server_config.saved_entries(base + later, defaults["storePathRootDir"]) + later
        cfg = server_config.build([(k, v, "default") for k, v in defaults.items()] + given)
    except server_config.ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    for warning in cfg.warnings:
        log.warning("%s", warning)
    _log_settings(cfg, given)
    return cfg


def _acl_on(settings) -> bool:
    """ACL 1.0 (aclEnable) or ACL 2.0 (authenticationEnabled / authorizationEnabled) checks requests."""
    return settings.acl_enable or acl2_enabled(settings)


def _log_settings(cfg, given: list[tuple[str, object, str]]) -> None:
    """The effective settings an operator checks first, and every setting that did not come from a default."""
    b, st = cfg.broker, cfg.store
    log.info("effective configuration: cluster %s, broker %s (id %d, %s), NameServers %s, store %s (%s), "
             "ACL %s, TLS %s", b.cluster_name, b.broker_name, b.broker_id, b.broker_role, b.namesrv_addr or "-",
             st.store_path, st.flush_disk_type, "2.0 on" if acl2_enabled(b) else "on" if b.acl_enable else "off",
             b.tls.mode.value)
    log.info("disk: the store allocates %s", describe_allocation(st))
    if given:
        log.info("settings given: %s", ", ".join(f"{k}={v} ({where})" for k, v, where in given))
    log.debug("every setting: %s; %s", b, st)


@click.command()
@_common_options
@click.option("--namesrv-port", type=click.IntRange(0, 65535), help="NameServer port [default: 9876].")
@click.option("--grpc-port", type=click.IntRange(0, 65535), help="gRPC endpoint port (grpcServerPort) [default: 8081].")
@click.option("--no-grpc", is_flag=True, help="Do not serve the RocketMQ 5 gRPC protocol.")
@_observe_options
@log_options
def serve(config_file, store_path, host, port, flush_disk_type, acl_file, sets, profile, namesrv_port, grpc_port,
          no_grpc, console_port, no_console, no_metrics, logging_options) -> None:
    """Run a NameServer, a broker and the gRPC endpoint in one process (the standalone mode).

    ROCKETQ_NAMESRV, which the client commands read, is ignored here: this process runs its own
    NameServer (an extra one to register with is namesrvAddr, e.g. ROCKETQ_NAMESRVADDR)."""
    from rocketq.server.standalone import Standalone
    apply_logging(logging_options)
    cfg = load_config(config_file, store_path, host, port, flush_disk_type, acl_file, sets, profile=profile,
                      client_env=False, namesrvListenPort=namesrv_port, grpcServerPort=-1 if no_grpc else grpc_port,
                      **_observe_settings(console_port, no_console, no_metrics))
    server = Standalone(cfg)

    async def start() -> None:
        await server.start()
        addrs = server.addresses()
        click.echo(f"rocketq serving: NameServer {addrs['namesrv']}, broker {cfg.broker.broker_name} "
                   f"({cfg.broker.cluster_name}) {addrs['broker']}"
                   + (f", gRPC {addrs['grpc']}" if "grpc" in addrs else "")
                   + (f", console {addrs['console']}" if "console" in addrs else "")
                   + (f", metrics {addrs['metrics']}" if "metrics" in addrs else "")
                   + f", store {cfg.store.store_path} ({cfg.store.flush_disk_type}); "
                   + exposure(server.listeners(), acl=_acl_on(cfg.broker), tls=cfg.broker.tls.mode), nl=True)

    async def stop() -> None:
        await server.close()
        click.echo("rocketq stopped cleanly")

    run_until_signalled(start, stop)


@click.group(invoke_without_command=True)
@_common_options
@click.option("--namesrv", "namesrv_addr", help="NameServer addresses, host:port;host:port (namesrvAddr).")
@click.option("--broker-name", help="brokerName [default: broker-a].")
@click.option("--cluster", "cluster_name", help="brokerClusterName [default: DefaultCluster].")
@click.option("--grpc-port", type=click.IntRange(0, 65535),
              help="Also serve RocketMQ 5 gRPC clients on this port (grpcServerPort; 0 picks a free one) "
                   "[default: off, as RocketMQ's broker without its proxy].")
@_observe_options
@log_options
@click.pass_context
def broker(ctx, config_file, store_path, host, port, flush_disk_type, acl_file, sets, profile, namesrv_addr,
           broker_name, cluster_name, grpc_port, console_port, no_console, no_metrics, logging_options) -> None:
    """Run a broker alone; it registers with the NameServers of --namesrv (or namesrvAddr, or
    ROCKETQ_NAMESRV: the variable the client commands read, as RocketMQ's broker reads NAMESRV_ADDR).
    With --grpc-port (grpcServerPort) it serves gRPC too, and the routes it gives list every broker
    group's gRPC endpoint.  `rocketq broker config get|set` reads and changes the settings of running brokers."""
    if ctx.invoked_subcommand is not None:
        return                                   # `broker config ...`: no broker to run here
    from rocketq.broker.broker import Broker
    apply_logging(logging_options)
    cfg = load_config(config_file, store_path, host, port, flush_disk_type, acl_file, sets, profile=profile,
                      namesrvAddr=namesrv_addr, brokerName=broker_name, brokerClusterName=cluster_name,
                      grpcServerPort=grpc_port, more_defaults={"grpcServerPort": -1},
                      **_observe_settings(console_port, no_console, no_metrics))
    b = Broker(cfg.broker, cfg.store)
    console, grpc = [], []

    async def start() -> None:
        from rocketq.console.server import start_for
        from rocketq.server.standalone import grpc_endpoint_class
        await b.start()
        try:
            endpoint = grpc_endpoint_class() if cfg.grpc_port >= 0 else None
            if endpoint is not None:
                grpc.append(await endpoint(b, host=cfg.broker.host, port=cfg.grpc_port).start())
            console.extend(c for c in [await start_for(b, cfg.broker.namesrv_addr, cfg.console_port)] if c)
        except BaseException:
            for g in grpc:
                await g.close()
            await b.close()
            raise
        # "listening on <host:port>" first: scripts and tests read the broker's bound address there
        listeners = (b.listeners() + [("gRPC", g.host, g.port) for g in grpc]
                     + [("console", c.host, c.port) for c in console])
        click.echo(f"broker {cfg.broker.broker_name} ({cfg.broker.cluster_name}) "
                   + exposure(listeners, acl=_acl_on(cfg.broker), tls=cfg.broker.tls.mode)
                   + f"; announced as {b.address}, store {cfg.store.store_path}", nl=True)

    async def stop() -> None:
        for c in console:
            await c.close()
        for g in grpc:
            await g.close()
        await b.close()
        click.echo("broker stopped cleanly")

    run_until_signalled(start, stop)
