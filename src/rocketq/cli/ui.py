"""What the commands share for human output: the consoles, progress bars, and Ctrl-C handling.

Results go to stdout; progress bars, log records and errors go to stderr, through one rich
console so that a log line printed while a bar is live appears above it instead of tearing it.
Bars are transient: they vanish when their work is done, and draw nothing when stderr is not a
terminal.  Results piped to a file or another program are laid out for a console
``PIPED_WIDTH_COLUMNS`` wide (rich would otherwise assume 80 columns and cut cells short with
"…"), unless ``COLUMNS`` says otherwise.
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

import os
import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

_stderr: Console | None = None
PIPED_WIDTH_COLUMNS = 1000


def out() -> Console:
    """A console on the current stdout (looked up per call, so test runners can capture it)."""
    piped = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
    return Console(highlight=False, soft_wrap=True, width=PIPED_WIDTH_COLUMNS if piped else None)


def err() -> Console:
    global _stderr
    if _stderr is None:
        _stderr = Console(stderr=True, highlight=False)
    return _stderr


def byte_progress(label: str) -> tuple[Progress, Callable[[int, int], None]]:
    """A bar for ``progress(done_bytes, total_bytes)`` callbacks, and that callback."""
    bar = Progress(TextColumn(label), BarColumn(), DownloadColumn(binary_units=True), TransferSpeedColumn(),
                   TimeRemainingColumn(), console=err(), transient=True, disable=not err().is_terminal)
    task = bar.add_task(label, total=None)
    return bar, lambda done, total: bar.update(task, completed=done, total=total)


def step_progress(total: float | None, label: str = "") -> tuple[Progress, int]:
    """A bar counting steps (messages, scenarios); returns the bar and its task id."""
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                   TimeElapsedColumn(), console=err(), transient=True, disable=not err().is_terminal)
    return bar, bar.add_task(label, total=total)


class StopRequest:
    """Set by SIGINT / SIGTERM while installed: long loops poll it and wind down cleanly.

    A signal turned into a flag, instead of a KeyboardInterrupt raised wherever the main thread
    happens to be, can never interrupt the store half-way through an append.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self.signal_name: str | None = None

    def __bool__(self) -> bool:
        return self._event.is_set()

    def _handle(self, signum, _frame) -> None:
        if self._event.is_set():
            err().print("[yellow]still shutting down cleanly; please wait[/yellow]")
            return
        self.signal_name = signal.Signals(signum).name
        self._event.set()


@contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Route SIGINT and SIGTERM to a :class:`StopRequest` for the duration of the block."""
    stop = StopRequest()
    previous = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, stop._handle)
    except ValueError:            # not the main thread: signals stay as they were
        pass
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
