"""``rocketq namesrv``: run a NameServer until Ctrl-C or SIGTERM.

Runs under uvloop when it is installed, asyncio otherwise.  Prints one line when it listens
("The Name Server boot success. ..." like ``mqnamesrv``, with the real port, which matters with
``--port 0``, and what is exposed: :func:`rocketq.server.exposure.exposure`), and exits 0 after a
clean shutdown on SIGINT/SIGTERM.  It listens on 127.0.0.1 unless ``--host`` (or ``bindAddress``
in ``-c``) says otherwise; ``--acl`` (or ``aclEnable`` in ``-c``) puts its writes behind an admin
account, ``tlsMode`` in ``-c`` turns on TLS.  ``--enable-controller`` also
runs the controller of :mod:`rocketq.namesrv.controller` on the same port.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click

from rocketq.cli.log_setup import apply as apply_logging, log_options
from rocketq.namesrv.controller import DEFAULT_MASTER_TIMEOUT_MS
from rocketq.namesrv.server import DEFAULT_PORT, NameServer
from rocketq.remoting.limits import raise_open_files_limit

log = logging.getLogger(__name__)

DEFAULT_KV_PATH = Path.home() / "namesrv" / "kvConfig.json"     # RocketMQ's NamesrvConfig.kvConfigPath


async def serve(host: str, port: int, kv_path: Path | None, *, tls=None, acl_path: Path | None = None,
                **controller) -> None:
    from rocketq.remoting.tls import ServerTls, TlsMode
    from rocketq.server.exposure import exposure
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    acl = None
    if acl_path is not None:
        from rocketq.acl import AclConfigError, AclValidator
        try:
            acl = AclValidator(acl_path)
        except AclConfigError as exc:
            raise click.ClickException(str(exc)) from None
    server_tls = ServerTls(tls) if tls is not None and tls.mode != TlsMode.DISABLED else None
    server = await NameServer(host, port, kv_path=kv_path, tls=server_tls, acl=acl, **controller).start()
    line = exposure([("NameServer", host, server.port)], acl=acl is not None,
                    tls=tls.mode if tls is not None else TlsMode.DISABLED)
    click.echo(f"The Name Server boot success. {line}", nl=True)
    try:
        await stop.wait()
        click.echo("rocketq namesrv: shutting down")
    finally:
        await server.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _from_config(config_file: Path | None, host: str | None, port: int | None, acl_file: Path | None):
    """(host, port, TlsServerConfig, plain_acl.yml or None): flags over ``-c`` (the keys of a
    broker.conf: bindAddress, namesrvListenPort, aclEnable / aclFile, tlsMode and tls.server.*) over
    the defaults (127.0.0.1:9876, no ACL, no TLS)."""
    from rocketq.broker.credentials import acl_file_of
    from rocketq.server import config as server_config
    try:
        cfg = server_config.build(server_config.read_file(config_file) if config_file else [])
    except server_config.ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if acl_file is None and cfg.broker.acl_enable:
        acl_file = acl_file_of(cfg.broker.acl_file, cfg.store.store_path)
    return host or cfg.broker.host, port if port is not None else cfg.namesrv_port, cfg.broker.tls, acl_file


def run_loop(coro) -> None:
    raise_open_files_limit()                   # a server process: the connection limit is sized from it
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


@click.command("namesrv")
@click.option("--host", help="Address to listen on (bindAddress) [default: 127.0.0.1, this machine only; "
                             "0.0.0.0 for every interface].")
@click.option("--port", type=click.IntRange(0, 65535),
              help=f"Port to listen on (namesrvListenPort; 0 picks a free one) [default: {DEFAULT_PORT}].")
@click.option("-c", "--config", "config_file", type=click.Path(dir_okay=False, path_type=Path),
              help="broker.conf / .toml: bindAddress, namesrvListenPort, aclEnable, aclFile, tlsMode, tls.server.*.")
@click.option("--acl", "acl_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Enable ACL with this plain_acl.yml: writes (broker registration, KV config, topic "
                   "deletion ...) then need an admin account; route reads stay open.")
@click.option("--kv-config", "kv_path", type=click.Path(dir_okay=False, path_type=Path),
              default=DEFAULT_KV_PATH, show_default=True, help="Where the KV config is kept.")
@click.option("--enable-controller", is_flag=True,
              help="Also run the controller of brokers with enableControllerMode=true (RocketMQ 5's "
                   "enableControllerInNamesrv); its state is kept in controller.json next to the KV config.")
@click.option("--controller-master-timeout-ms", type=click.IntRange(100), default=DEFAULT_MASTER_TIMEOUT_MS,
              show_default=True, help="A master silent for this long is replaced by its most up-to-date slave.")
@click.option("--controller-elect-unclean", is_flag=True,
              help="Also elect a slave known to be behind another one (may lose acknowledged messages).")
@log_options
def namesrv(host: str | None, port: int | None, config_file: Path | None, acl_file: Path | None, kv_path: Path,
            enable_controller: bool, controller_master_timeout_ms: int, controller_elect_unclean: bool,
            logging_options: dict) -> None:
    """Run a NameServer: the route registry brokers register with and clients ask."""
    apply_logging(logging_options)
    host, port, tls, acl_path = _from_config(config_file, host, port, acl_file)
    run_loop(serve(host, port, kv_path, tls=tls, acl_path=acl_path, controller=enable_controller,
                   controller_master_timeout_ms=controller_master_timeout_ms,
                   controller_elect_unclean=controller_elect_unclean))
