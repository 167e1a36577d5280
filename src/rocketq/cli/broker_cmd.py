"""``rocketq broker``: run a broker over the remoting protocol until Ctrl-C / SIGTERM."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import click


def run_until_signalled(start, stop) -> None:
    """Run ``await start()``, then wait for SIGINT/SIGTERM, then ``await stop()`` (on uvloop when installed)."""
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
        uvloop.run(main())
    except ImportError:
        asyncio.run(main())


@click.command()
@click.option("--store-path", type=click.Path(path_type=Path), default=Path.home() / "rocketq" / "store",
              show_default=True)
@click.option("--host", default="0.0.0.0", show_default=True)
@click.option("--port", default=10911, show_default=True)
@click.option("--broker-name", default="broker-a", show_default=True)
@click.option("--cluster", "cluster_name", default="DefaultCluster", show_default=True)
@click.option("--flush-disk-type", type=click.Choice(["ASYNC_FLUSH", "SYNC_FLUSH"]), default="ASYNC_FLUSH",
              show_default=True)
def broker(store_path: Path, host: str, port: int, broker_name: str, cluster_name: str, flush_disk_type: str) -> None:
    """Serve producers and consumers on PORT from the store at STORE_PATH."""
    from rocketq.broker.broker import Broker, BrokerSettings
    from rocketq.store import StoreConfig
    b = Broker(BrokerSettings(cluster_name=cluster_name, broker_name=broker_name, host=host, port=port),
               StoreConfig(store_path=store_path, flush_disk_type=flush_disk_type))

    async def start() -> None:
        await b.start()
        click.echo(f"broker {broker_name} ({cluster_name}) listening on {host}:{b.server.port}, "
                   f"store {store_path}")

    async def stop() -> None:
        await b.close()
        click.echo("broker stopped cleanly")

    run_until_signalled(start, stop)
