"""``rocketq run``: the main job on an embedded default (a demo workload on the embedded store)."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

BATCH = 64


@click.command()
@click.option("--store-path", type=click.Path(path_type=Path), default=Path.home() / "rocketq" / "store",
              show_default=True)
@click.option("--count", default=200_000, show_default=True, help="Messages to write.")
@click.option("--topic", default="DemoTopic", show_default=True)
def run(store_path: Path, count: int, topic: str) -> None:
    """Open the embedded store, write and read back a workload, query it, shut down cleanly."""
    from rocketq.store import Message, MessageStore, StoreConfig
    console = Console()
    store = MessageStore(StoreConfig(store_path=store_path)).start()
    console.print(f"store {store_path} open ({'crash' if store.recovery.abnormal else 'normal'} recovery, "
                  f"log end {store.recovery.end_offset})")
    try:
        base = store.max_offset(topic, 0)
        t0 = time.perf_counter()
        with Progress(console=console, transient=True) as bar:
            task = bar.add_task("writing", total=count)
            for start in range(0, count, BATCH):
                n = min(BATCH, count - start)
                rs = store.put_messages([Message(topic=topic, body=f"message {start + i}".encode(), tags="demo",
                                                 keys=[f"demo-{base + start + i}"]) for i in range(n)])
                if not rs.ok:
                    raise click.ClickException(f"put failed: {rs.status} {rs.error}")
                bar.advance(task, n)
        store.wait_dispatched()
        t1 = time.perf_counter()
        read, offset = 0, base
        while True:
            res = store.get_messages(topic, 0, offset, 32)
            if not res.messages:
                break
            read += len(res.messages)
            offset = res.next_begin_offset
        t2 = time.perf_counter()
        found = store.query_by_key(topic, f"demo-{base}")
        table = Table(title="rocketq embedded store demo")
        for col in ("written", "write msgs/s", "read", "read msgs/s", "query demo key", "queue max offset"):
            table.add_column(col, justify="right")
        table.add_row(str(count), f"{count / max(t1 - t0, 1e-9):,.0f}", str(read), f"{read / max(t2 - t1, 1e-9):,.0f}",
                      "found" if found else "missing", str(store.max_offset(topic, 0)))
        console.print(table)
    except KeyboardInterrupt:
        console.print("interrupted; shutting down cleanly")
    finally:
        store.shutdown()
        console.print("store closed cleanly")
