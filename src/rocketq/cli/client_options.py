"""The options every command that talks to a server shares: where (``--namesrv``), as whom
(``--access-key`` / ``--secret-key``) and how (``--tls``, ``--ca-file``, ``--cert-file`` /
``--key-file``, ``--insecure``), or all of it from a named ``--profile`` of the profile file.

:func:`client_options` adds them to a command and hands the command one resolved
:class:`~rocketq.client.access.ClientAccess` as ``access`` (flags > ROCKETQ_* environment >
profile file; see :mod:`rocketq.client.access`).  :func:`call` runs a client coroutine and turns a
server's refusal into one line that says what to set.  The secret is never echoed: the option
has no default to show, and errors and ``-v`` logs name where it came from, not what it is.

``--profile`` here is the client profile; the servers' store-size presets are ``--store-profile``.
"""

from __future__ import annotations

import functools
import logging

import click

from rocketq.client.access import PROFILE_ENV, AccessError, ClientAccess, MissingSetting, explain, resolve

log = logging.getLogger(__name__)

DEFAULT_NAMESRV = "127.0.0.1:9876"
_KEYS = ("namesrv", "profile", "access_key", "secret_key", "tls", "ca_file", "cert_file", "key_file", "insecure")


def _options(namesrv: bool) -> list:
    where = "~/.config/rocketq/client.toml ($XDG_CONFIG_HOME, or ROCKETQ_CLIENT_CONFIG)"
    opts = [
        click.option("--profile", metavar="NAME",
                     help=f"Client profile [profiles.NAME] of {where} (env {PROFILE_ENV}; default: the file's "
                          "default_profile, or a profile named default)."),
        click.option("--access-key", metavar="KEY", help="ACL access key (env ROCKETQ_ACCESS_KEY)."),
        click.option("--secret-key", metavar="SECRET",
                     help="ACL secret key (env ROCKETQ_SECRET_KEY). Prefer the variable or a profile: a flag is "
                          "visible to other users in ps and stays in your shell history."),
        click.option("--tls", is_flag=True, default=None, help="Connect with TLS (env ROCKETQ_TLS=true); implied "
                                                              "by --ca-file, --cert-file and --insecure."),
        click.option("--ca-file", metavar="PEM", help="CA certificate(s) to verify the server with (env "
                                                      "ROCKETQ_CA_FILE) [default: the system's CAs]."),
        click.option("--cert-file", metavar="PEM", help="Client certificate for mutual TLS (env ROCKETQ_CERT_FILE); "
                                                        "may hold the key too."),
        click.option("--key-file", metavar="PEM", help="Private key of --cert-file (env ROCKETQ_KEY_FILE)."),
        click.option("--insecure", is_flag=True, default=None,
                     help="TLS without verifying the server's certificate (RocketMQ's default test mode); "
                          "for tests only."),
    ]
    if namesrv:
        opts.insert(0, click.option("--namesrv", metavar="ADDRS",
                                    help=f"NameServer address(es), host:port;host:port (env ROCKETQ_NAMESRV, then "
                                         f"the profile's namesrv) [default: {DEFAULT_NAMESRV}]."))
    return opts


def client_options(fn=None, *, namesrv: bool = True, only_with: str | None = None):
    """Add the connection options to a click command; it receives ``access`` (a ClientAccess
    whose ``namesrv`` is always set when *namesrv*) instead of them - or None when the command's
    parameter *only_with* is not given (``rocketq spark stats --store`` connects to nothing)."""
    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            given = {k: kwargs.pop(k, None) for k in _KEYS if namesrv or k != "namesrv"}
            needed = only_with is None or kwargs.get(only_with)
            kwargs["access"] = resolve_access(given, namesrv=namesrv) if needed else None
            return f(*args, **kwargs)
        for option in reversed(_options(namesrv)):
            wrapper = option(wrapper)
        return wrapper
    return decorate(fn) if fn is not None else decorate


def resolve_access(given: dict, *, namesrv: bool = True) -> ClientAccess:
    """Flags (False flags count as not given) > environment > profile; errors as click errors."""
    flags = {k: (None if v is False else v) for k, v in given.items() if k != "profile"}
    try:
        access = resolve(flags, profile=given.get("profile"))
        access.ssl_context()                  # unreadable certificate files: an error before any connection
    except MissingSetting as exc:
        raise click.UsageError(str(exc)) from None
    except AccessError as exc:
        raise click.ClickException(str(exc)) from None
    if namesrv and not access.namesrv:
        access = _with_namesrv(access, DEFAULT_NAMESRV)
    log.debug("connecting to %s with %s", access.namesrv, access.describe())
    return access


def _with_namesrv(access: ClientAccess, addr: str) -> ClientAccess:
    from dataclasses import replace
    return replace(access, namesrv=addr, sources=access.sources + (("namesrv", "the default"),))


def call(access: ClientAccess, coro):
    """Run *coro* (the commands' asyncio work); a client error becomes one explained line."""
    from rocketq.cli.messaging import run
    from rocketq.client.model import MQClientError
    try:
        return run(coro)
    except MQClientError as exc:
        raise click.ClickException(explain(exc, access)) from None
