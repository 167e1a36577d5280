"""``rocketq namesrv``: run a NameServer until Ctrl-C or SIGTERM.

Runs under uvloop when it is installed, asyncio otherwise.  Prints one line when it listens
("The Name Server boot success. ..." like ``mqnamesrv``, with the real port, which matters with
``--port 0``), and exits 0 after a clean shutdown on SIGINT/SIGTERM.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from pathlib import Path

import click

from rocketq.namesrv.server import DEFAULT_PORT, NameServer

log = logging.getLogger(__name__)

DEFAULT_KV_PATH = Path.home() / "namesrv" / "kvConfig.json"     # RocketMQ's NamesrvConfig.kvConfigPath


async def serve(host: str, port: int, kv_path: Path | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    server = await NameServer(host, port, kv_path=kv_path).start()
    click.echo(f"The Name Server boot success. listening on {host}:{server.port}", nl=True)
    try:
        await stop.wait()
        click.echo("rocketq namesrv: shutting down")
    finally:
        await server.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def run_loop(coro) -> None:
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
def namesrv(host: str, port: int, kv_path: Path) -> None:
    """Run a NameServer: the route registry brokers register with and clients ask."""
    run_loop(serve(host, port, kv_path))
