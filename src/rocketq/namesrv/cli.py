"""``rocketq namesrv``: run a NameServer until Ctrl-C or SIGTERM.

Runs under uvloop when it is installed, asyncio otherwise.  Prints one line when it listens
("The Name Server boot success. ..." like ``mqnamesrv``, with the real port, which matters with
``--port 0``), and exits 0 after a clean shutdown on SIGINT/SIGTERM.  ``--enable-controller`` also
runs the controller of :mod:`rocketq.namesrv.controller` on the same port.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click

from rocketq.namesrv.controller import DEFAULT_MASTER_TIMEOUT_MS
from rocketq.namesrv.server import DEFAULT_PORT, NameServer
from rocketq.remoting.limits import raise_open_files_limit

log = logging.getLogger(__name__)

DEFAULT_KV_PATH = Path.home() / "namesrv" / "kvConfig.json"     # RocketMQ's NamesrvConfig.kvConfigPath


async def serve(host: str, port: int, kv_path: Path | None, **controller) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = await NameServer(host, port, kv_path=kv_path, **controller).start()
    click.echo(f"The Name Server boot success. listening on {host}:{server.port}", nl=True)
    try:
        await stop.wait()
        click.echo("rocketq namesrv: shutting down")
    finally:
        await server.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def run_loop(coro) -> None:
    raise_open_files_limit()                   # a server process: the connection limit is sized from it
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)


@click.command("namesrv")
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to listen on.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535),
              help="Port to listen on (0 picks a free one).")
@click.option("--kv-config", "kv_path", type=click.Path(dir_okay=False, path_type=Path),
              default=DEFAULT_KV_PATH, show_default=True, help="Where the KV config is kept.")
@click.option("--enable-controller", is_flag=True,
              help="Also run the controller of brokers with enableControllerMode=true (RocketMQ 5's "
                   "enableControllerInNamesrv); its state is kept in controller.json next to the KV config.")
@click.option("--controller-master-timeout-ms", type=click.IntRange(100), default=DEFAULT_MASTER_TIMEOUT_MS,
              show_default=True, help="A master silent for this long is replaced by its most up-to-date slave.")
@click.option("--controller-elect-unclean", is_flag=True,
              help="Also elect a slave known to be behind another one (may lose acknowledged messages).")
def namesrv(host: str, port: int, kv_path: Path, enable_controller: bool, controller_master_timeout_ms: int,
            controller_elect_unclean: bool) -> None:
    """Run a NameServer: the route registry brokers register with and clients ask."""
    run_loop(serve(host, port, kv_path, controller=enable_controller,
                   controller_master_timeout_ms=controller_master_timeout_ms,
                   controller_elect_unclean=controller_elect_unclean))
