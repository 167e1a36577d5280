"""Optional parts of rocketq: which commands need which pip extra, and the error that says so.

``pip install rocketq`` leaves out what only some commands use (Spark's JVM bridge, the
benchmark peers' clients).  A command that needs an extra checks for it before anything else
and, when a module is missing, names the extra and how to install it instead of failing later
with ``No module named 'pyarrow'``.
"""

from __future__ import annotations

import importlib

import click

# extra -> modules a command of it cannot run without (optional peers of `bench compare` - redis,
# nats, rstream - are not here: a missing one skips that peer with the reason)
EXTRA_MODULES = {
    "spark": ("pyspark", "pyarrow"),
    "bench": ("psutil", "matplotlib"),
}


def require_extra(extra: str, what: str) -> None:
    """Raise a one-line error naming *extra* when one of its modules does not import."""
    missing = []
    for module in EXTRA_MODULES[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise click.ClickException(
            f"{what} needs the '{extra}' extra ({', '.join(missing)} not installed): "
            f"pip install -e '.[{extra}]' in a rocketq checkout (or pip install 'rocketq[{extra}]')")
