"""Atomic JSON config files under ``<store>/config`` (topics.json, consumerOffset.json, ...).

Writes go to ``name.tmp``, are fsync'ed, the old file is kept as ``name.bak`` and the temp file is
renamed over the name, then the directory is fsync'ed; a crash leaves either the old or the new
file, never half of one, and a full disk leaves the old file and no temp file behind.  Reads fall
back to ``.bak`` when the main file is missing or unreadable.

RocketMQ writes these with fastjson, which leaves integer map keys unquoted (``{0:12}``); the
reader accepts that, the writer emits standard JSON.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

from rocketq.store.mapped_file import fsync_dir

log = logging.getLogger(__name__)

_UNQUOTED_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


class ConfigFileError(RuntimeError):
    pass


def loads_lenient(text: str) -> Any:
    """json.loads that also accepts fastjson's unquoted integer keys."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return json.loads(_UNQUOTED_INT_KEY.sub(r'\1"\2"\3', text))


def read_json(path: Path) -> Any | None:
    """The file's content, or its .bak's when the file is missing/corrupt, or None if neither exists."""
    path = Path(path)
    bak = path.with_name(path.name + ".bak")
    for candidate in (path, bak):
        if not candidate.exists():
            continue
        try:
            return loads_lenient(candidate.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            log.error("%s is not valid JSON (%s); trying the backup", candidate, exc)
    if path.exists():
        raise ConfigFileError(f"{path} and its backup are both unreadable; fix or remove them")
    return None


def write_json(path: Path, data: Any) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    payload = json.dumps(data, indent=2, sort_keys=False).encode()
    try:
        with open(tmp, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:      # a full disk: the old file is untouched; leave no half-written temp file
        tmp.unlink(missing_ok=True)
        raise OSError(exc.errno, f"cannot write {path}: {exc.strerror}") from exc
    if path.exists():
        os.replace(path, path.with_name(path.name + ".bak"))
    os.replace(tmp, path)
    fsync_dir(path.parent)
