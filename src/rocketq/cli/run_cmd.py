"""``rocketq run``: the main job on an embedded default, until the network broker takes over.

Opens a store of its own (``~/rocketq/demo-store`` unless ``--store-path``: never the server's
``~/rocketq/store``, which a running server holds locked), writes a demo workload in batches
of 64 over four queues, waits for the consume queues and index, reads every message back and
checks it against what was written, looks messages up by key and by id, prints a summary and
shuts the store down cleanly.  Ctrl-C (or SIGTERM) at any point stops the work at the next batch
and still shuts down cleanly; the exit code is then 130.

Each run tags its messages with a run id (``demo-<run>-<i>`` keys), so runs against the same
store add to it and each checks only its own messages.  A new store is made with the ``small``
profile unless ``--store-profile`` says otherwise (the demo writes ~25 MB; the default profile would
allocate ~2.4 GiB for it); an existing store is opened with the sizes it was made with.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from rocketq.cli.serve_cmd import store_profile_option
from rocketq.cli.ui import err, out, step_progress, stop_on_signals
from rocketq.server.profiles import store_config

DEFAULT_STORE_PATH = Path.home() / "rocketq" / "demo-store"
DEFAULT_PROFILE = "small"
DEFAULT_COUNT = 100_000
BATCH_MESSAGES = 64
READ_BATCH_MESSAGES = 32
QUEUES = 4
DISPATCH_TIMEOUT_S = 60.0
MAX_PROBLEMS_LISTED = 10
EXIT_MISMATCH = 1
EXIT_INTERRUPTED = 130


@dataclass
class DemoSummary:
    store_path: str
    recovery: str = ""
    log_end_at_start: int = 0
    written: int = 0
    written_bytes: int = 0
    write_seconds: float = 0.0
    dispatch_seconds: float = 0.0
    read: int = 0
    read_seconds: float = 0.0
    verified: bool = False
    query_key: str = ""
    query_found: int = 0
    view_by_id: bool = False
    queue_max_offsets: dict[int, int] = field(default_factory=dict)
    interrupted_by: str | None = None
    problems: list[str] = field(default_factory=list)
    closed_cleanly: bool = False


class _Demo:
    """The workload: message *i* goes to queue (i // 64) % 4 with key demo-<run>-<i>."""

    def __init__(self, store, topic: str, stop, summary: DemoSummary):
        self.store, self.topic, self.stop, self.summary = store, topic, stop, summary
        self.run_id = f"{time.time_ns() // 1_000_000:x}"
        self.base = {q: store.max_offset(topic, q) for q in range(QUEUES)}
        self.first_msg_id: str | None = None

    def key(self, i: int) -> str:
        return f"demo-{self.run_id}-{i}"

    def body(self, i: int) -> bytes:
        return f"rocketq demo run {self.run_id}, message {i}".encode().ljust(128, b".")

    def batch(self, start: int, n: int):
        from rocketq.store import Message
        queue = (start // BATCH_MESSAGES) % QUEUES
        return [Message(topic=self.topic, body=self.body(i), queue_id=queue, tags="TagA" if i % 2 else "TagB",
                        keys=[self.key(i)], properties={"demo_run": self.run_id})
                for i in range(start, start + n)]

    def write(self, count: int | None, seconds: float | None) -> None:
        s = self.summary
        deadline = time.monotonic() + seconds if seconds else None
        bar, task = step_progress(count if count else seconds, "writing")
        t0 = time.perf_counter()
        with bar:
            while not self.stop and (count is None or s.written < count) \
                    and (deadline is None or time.monotonic() < deadline):
                n = BATCH_MESSAGES if count is None else min(BATCH_MESSAGES, count - s.written)
                batch = self.batch(s.written, n)
                result = self.store.put_messages(batch)
                if not result.ok:
                    raise click.ClickException(f"put_messages failed after {s.written:,} messages: "
                                               f"{result.status} {result.error or ''}".strip())
                if self.first_msg_id is None:
                    self.first_msg_id = result[0].msg_id
                s.written += n
                s.written_bytes += sum(len(m.body) for m in batch)
                bar.update(task, completed=s.written if count else min(seconds, time.perf_counter() - t0))
        s.write_seconds = time.perf_counter() - t0
        t1 = time.perf_counter()
        if not self.store.wait_dispatched(DISPATCH_TIMEOUT_S):
            s.problems.append(f"the dispatcher did not catch up within {DISPATCH_TIMEOUT_S:.0f} s")
        s.dispatch_seconds = time.perf_counter() - t1

    def read_back(self) -> None:
        """Read every queue from where this run started; check order, keys and bodies."""
        s = self.summary
        t0 = time.perf_counter()
        for q in range(QUEUES):
            offset, last_i = self.base[q], -1
            while not self.stop:
                res = self.store.get_messages(self.topic, q, offset, READ_BATCH_MESSAGES)
                if not res.messages:
                    break
                for m in res.messages:
                    last_i = self._check(m, q, last_i)
                s.read += len(res.messages)
                offset = res.next_begin_offset
        s.read_seconds = time.perf_counter() - t0
        if s.read != s.written and not self.stop:
            s.problems.append(f"wrote {s.written:,} messages but read back {s.read:,}")
        s.verified = not s.problems and not self.stop

    def _check(self, m, queue: int, last_i: int) -> int:
        keys = m.keys
        i = int(keys[0].rsplit("-", 1)[1]) if keys and keys[0].startswith(f"demo-{self.run_id}-") else -1
        wrong = i <= last_i or m.body != self.body(i) or (i // BATCH_MESSAGES) % QUEUES != queue
        if wrong and len(self.summary.problems) < MAX_PROBLEMS_LISTED:
            self.summary.problems.append(f"queue {queue} offset {m.queue_offset}: unexpected message "
                                         f"(keys {keys}, body {m.body[:40]!r})")
        return max(i, last_i)

    def look_up(self) -> None:
        s = self.summary
        if not s.written:
            return
        s.query_key = self.key(0)
        found = self.store.query_by_key(self.topic, s.query_key)
        s.query_found = len(found)
        if len(found) != 1 or found[0].body != self.body(0):
            s.problems.append(f"query by key {s.query_key!r} found {len(found)} message(s), expected 1")
        by_id = self.store.view_by_id(self.first_msg_id) if self.first_msg_id else None
        s.view_by_id = by_id is not None and by_id.body == self.body(0)
        if not s.view_by_id:
            s.problems.append(f"view by id {self.first_msg_id} did not return message 0")


@click.command()
@click.option("--store-path", type=click.Path(path_type=Path, file_okay=False),
              default=DEFAULT_STORE_PATH, show_default=True,
              help="The demo's store directory (not the server's ~/rocketq/store).")
@store_profile_option(DEFAULT_PROFILE, "File sizes of a new store (see `rocketq serve --help`); an existing store "
                                      "keeps its own.")
@click.option("--count", type=click.IntRange(min=1), default=None,
              help=f"Messages to write [default: {DEFAULT_COUNT:,}, or no limit with --seconds].")
@click.option("--seconds", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Stop writing after this many seconds (whichever of --count and --seconds comes first).")
@click.option("--topic", default="DemoTopic", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON instead of a table.")
@click.pass_context
def run(ctx: click.Context, store_path: Path, profile: str, count: int | None, seconds: float | None, topic: str,
        as_json: bool) -> None:
    """Open the embedded store, write a demo workload, read it back, query it, shut down cleanly."""
    from rocketq.store import MessageStore
    if count is None and seconds is None:
        count = DEFAULT_COUNT
    summary = DemoSummary(str(store_path))
    with stop_on_signals() as stop:
        with err().status(f"opening {escape(str(store_path))}"):
            store = MessageStore(_config_for(store_path, profile)).start()
        try:
            summary.recovery = "after a crash" if store.recovery.abnormal else "normal"
            summary.log_end_at_start = store.recovery.end_offset
            _run_demo(_Demo(store, topic, stop, summary), count, seconds)
            summary.queue_max_offsets = {q: store.max_offset(topic, q) for q in range(QUEUES)}
        finally:
            if stop:
                err().print(f"{stop.signal_name}: stopping; shutting the store down cleanly")
            store.shutdown()
            summary.interrupted_by = stop.signal_name
    summary.closed_cleanly = True
    if as_json:
        click.echo(json.dumps(asdict(summary), indent=2))
    else:
        _print_summary(summary)
    if summary.interrupted_by:
        ctx.exit(EXIT_INTERRUPTED)
    ctx.exit(EXIT_MISMATCH if summary.problems else 0)


def _config_for(store_path: Path, profile: str):
    """The profile's configuration, or the file sizes an existing store was written with."""
    from rocketq.store.store_files import StorePaths
    paths = StorePaths(store_path)
    if paths.geometry.exists() and paths.commitlog.is_dir() and any(paths.commitlog.iterdir()):
        from rocketq.store.tools import load_geometry
        return load_geometry(paths)
    return store_config(profile, store_path=store_path)


def _run_demo(demo: _Demo, count: int | None, seconds: float | None) -> None:
    for phase in (lambda: demo.write(count, seconds), demo.read_back, demo.look_up):
        if demo.stop:
            return
        phase()


def _print_summary(s: DemoSummary) -> None:
    table = Table(title="rocketq embedded store demo", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("store", escape(s.store_path))
    table.add_row("opened", f"{s.recovery} recovery, log end {s.log_end_at_start:,}")
    mb = s.written_bytes / 1e6
    table.add_row("written", f"{s.written:,} messages ({mb:,.1f} MB of bodies) in {s.write_seconds:.2f} s, "
                             f"{s.written / max(s.write_seconds, 1e-9):,.0f} msgs/s")
    table.add_row("dispatched", f"consume queues and index caught up {s.dispatch_seconds:.3f} s after the last append")
    if s.read or not s.interrupted_by:
        table.add_row("read back", f"{s.read:,} messages in {s.read_seconds:.2f} s, "
                                   f"{s.read / max(s.read_seconds, 1e-9):,.0f} msgs/s"
                                   + (", every key and body as written" if s.verified else ""))
    if s.query_key:
        table.add_row("query by key", f"{escape(s.query_key)}: {'found' if s.query_found else 'missing'}")
        table.add_row("view by id", "found" if s.view_by_id else "missing")
    table.add_row("queue max offsets", ", ".join(f"{q}: {o:,}" for q, o in s.queue_max_offsets.items()) or "-")
    for problem in s.problems:
        table.add_row("[red]problem[/red]", escape(problem))
    if s.interrupted_by:
        table.add_row("[yellow]interrupted[/yellow]", f"by {s.interrupted_by}; later phases skipped")
    console = out()
    console.print(table)
    console.print("store closed cleanly" if s.closed_cleanly else "[red]store not closed[/red]")
