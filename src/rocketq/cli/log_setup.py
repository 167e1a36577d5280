"""Where log records go: stderr, optionally a size-rotated file, as text or as JSON lines.

Every command logs to stderr: through rich on a terminal (so a record printed while a progress
bar is live appears above it), as plain lines otherwise (a pipe, a service manager's journal).  The server commands (``serve``, ``broker``, ``namesrv``) log at INFO by
default - what an operator needs: the effective settings at start, the listeners, topics and
groups created or deleted, clients connecting and leaving, slow flushes and a full disk, role
changes - and take the options of :func:`log_options`.  Nothing is logged per message.  The
other commands log warnings only, since their output is the result itself; ``-v`` means DEBUG
for every command.

``--log-file PATH`` adds a file that is rotated when it reaches ``--log-file-max-mb`` (stdlib
``RotatingFileHandler``: PATH, PATH.1 ... PATH.5, ``LOG_FILE_BACKUPS`` kept).
``--log-format json`` writes one JSON object per record, to stderr and to the file, with the
fields ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``, ``message``, ``thread``,
any ``extra={...}`` fields of the call, and ``exception`` when there is one.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import logging
import logging.handlers
import sys
from pathlib import Path

import click

LOG_FILE_MAX_MB = 100
LOG_FILE_BACKUPS = 5
TEXT_FILE_FORMAT = "%(asctime)s %(levelname)-7s %(name)s [%(threadName)s] %(message)s"
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_OURS = "_rocketq_handler"                 # marks the handlers configure() added (tests call it repeatedly)
_STANDARD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the record (test runners swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:
        pass


class JsonFormatter(logging.Formatter):
    """One JSON object per record; values that are not JSON types are written as their str()."""

    def format(self, record: logging.LogRecord) -> str:
        data = {"time": dt.datetime.fromtimestamp(record.created, dt.timezone.utc).isoformat(timespec="milliseconds"),
                "level": record.levelname, "logger": record.name, "message": record.getMessage(),
                "thread": record.threadName}
        data.update((k, v) for k, v in record.__dict__.items() if k not in _STANDARD_ATTRS and not k.startswith("_"))
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def configure(level: str | int, *, log_file: Path | None = None, log_format: str = "text",
              max_bytes: int = LOG_FILE_MAX_MB << 20, backups: int = LOG_FILE_BACKUPS,
              show_paths: bool = False) -> None:
    """Replace the handlers an earlier call added with stderr (and *log_file*) at *level*."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(old)
        old.close()
    handlers = [_console_handler(log_format, show_paths)]
    if log_file is not None:
        log_file = Path(log_file).expanduser()
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(log_file, maxBytes=max_bytes, backupCount=backups,
                                                       encoding="utf-8")
        handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FILE_FORMAT))
        handlers.append(handler)
    for handler in handlers:
        setattr(handler, _OURS, True)
        root.addHandler(handler)
    root.setLevel(level)


def _console_handler(log_format: str, show_paths: bool) -> logging.Handler:
    from rocketq.cli.ui import err
    if log_format == "json" or not err().is_terminal:
        handler = _StderrHandler()
        handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FILE_FORMAT))
        return handler
    from rich.logging import RichHandler
    return RichHandler(console=err(), show_path=show_paths, rich_tracebacks=show_paths, markup=False)


def log_options(fn):
    """``--log-level``, ``--log-file``, ``--log-file-max-mb`` and ``--log-format`` for a server command;
    the command receives them as one ``logging_options`` dict to pass to :func:`apply`."""
    options = [
        click.option("--log-level", type=click.Choice(LEVELS, case_sensitive=False), default="INFO",
                     show_default=True, help="Least severe records logged (-v means DEBUG)."),
        click.option("--log-file", type=click.Path(dir_okay=False, path_type=Path),
                     help="Also log to this file, rotated by size."),
        click.option("--log-file-max-mb", type=click.IntRange(min=1), default=LOG_FILE_MAX_MB, show_default=True,
                     help=f"Rotate the log file at this size; {LOG_FILE_BACKUPS} old files are kept."),
        click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
                     help="json: one JSON object per record, on stderr and in the file."),
    ]

    @functools.wraps(fn)                   # carries the options already on fn (click keeps them in __dict__)
    def collect(**kwargs):
        logging_options = {k: kwargs.pop(k) for k in ("log_level", "log_file", "log_file_max_mb", "log_format")}
        return fn(logging_options=logging_options, **kwargs)

    for option in reversed(options):
        collect = option(collect)
    return collect


def apply(logging_options: dict) -> None:
    """Configure logging from :func:`log_options`' values (and the group's ``-v``)."""
    ctx = click.get_current_context(silent=True)
    verbose = bool(ctx and ctx.find_root().obj and ctx.find_root().obj.get("verbose"))
    configure("DEBUG" if verbose else logging_options["log_level"].upper(), log_file=logging_options["log_file"],
              log_format=logging_options["log_format"], max_bytes=logging_options["log_file_max_mb"] << 20,
              show_paths=verbose)
