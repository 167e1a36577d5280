"""How a client reaches a secured rocketq: ACL credentials and TLS, from options, the environment
and a profile file - one resolution for the command line, the Spark connector and the benchmarks.

The first source that gives a setting wins::

    options (command-line flags, Spark options)  >  ROCKETQ_* environment  >  profile file

The profile file is ``$XDG_CONFIG_HOME/rocketq/client.toml`` (``~/.config/rocketq/client.toml``;
``ROCKETQ_CLIENT_CONFIG`` names another file), with named profiles::

    default_profile = "prod"            # used when neither --profile nor ROCKETQ_PROFILE names one
    [profiles.prod]
    namesrv = "mq1:9876;mq2:9876"
    access_key = "app"
    secret_key = "..."
    ca_file = "ca.pem"                  # relative paths are relative to the file's directory

Without ``default_profile`` a profile named ``default``, if there is one, is the default.  The file
holds secrets, so a file that group or others may read or write (``mode & 0o077``) is refused, as
ssh refuses a private key others can read.

The secret goes nowhere but into the request signer (:mod:`rocketq.acl.signing`): it is left out
of every repr, of :meth:`ClientAccess.describe` and of every error raised here (errors say where a
value came from, never the value).

TLS follows RocketMQ's client settings (``tls.enable``, ``tls.client.trustCertPath``,
``tls.client.certPath`` / ``keyPath``) with one difference: the server's certificate is verified
by default.  ``insecure`` is what RocketMQ does by default (``tls.test.mode.enable=true``,
``tls.client.authServer=false``): encrypt, verify nothing.  Giving a CA, a client certificate or
``insecure`` turns TLS on.
"""

from __future__ import annotations

import difflib
import os
import ssl
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from rocketq.client.model import Credentials

CONFIG_ENV = "ROCKETQ_CLIENT_CONFIG"
PROFILE_ENV = "ROCKETQ_PROFILE"
CONFIG_RELATIVE = Path("rocketq") / "client.toml"
DEFAULT_PROFILE_NAME = "default"
PRIVATE_MODE_MASK = 0o077            # group and other bits: any of them set and the file is refused
TRUE_WORDS, FALSE_WORDS = ("1", "true", "yes", "on"), ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class Setting:
    key: str                  # the profile key and the ClientAccess field
    env: str | None           # its ROCKETQ_* variable (None: options and profile only)
    kind: type                # str or bool
    is_path: bool = False     # a file: relative profile values are relative to the profile file


SETTINGS = (
    Setting("namesrv", "ROCKETQ_NAMESRV", str),
    Setting("access_key", "ROCKETQ_ACCESS_KEY", str),
    Setting("secret_key", "ROCKETQ_SECRET_KEY", str),
    Setting("tls", "ROCKETQ_TLS", bool),
    Setting("ca_file", "ROCKETQ_CA_FILE", str, is_path=True),
    Setting("cert_file", "ROCKETQ_CERT_FILE", str, is_path=True),
    Setting("key_file", "ROCKETQ_KEY_FILE", str, is_path=True),
    # turning verification off stays a deliberate act: a flag or a profile, never an ambient variable
    Setting("insecure", None, bool),
)
BY_KEY = {s.key: s for s in SETTINGS}
# every variable the clients read; the servers skip these (see rocketq.server.config)
CLIENT_ENV_VARS = frozenset({s.env for s in SETTINGS if s.env} | {CONFIG_ENV, PROFILE_ENV})

# how each setting is named where it is given as an option (the command line's flags)
CLI_NAMES = {"namesrv": "--namesrv", "access_key": "--access-key", "secret_key": "--secret-key", "tls": "--tls",
             "ca_file": "--ca-file", "cert_file": "--cert-file", "key_file": "--key-file",
             "insecure": "--insecure", "profile": "--profile"}


class AccessError(ValueError):
    """A setting is missing, contradictory or unusable; the message names the setting and its
    source, never a secret."""


class MissingSetting(AccessError):
    """One half of a pair (access key / secret key, key file / certificate) is missing."""


@dataclass(frozen=True)
class ClientAccess:
    """Where to connect and how: the resolved settings, each with where it came from."""
    namesrv: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    tls: bool = False
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool = False
    profile: str | None = None
    config_path: str | None = None
    sources: tuple[tuple[str, str], ...] = ()        # (setting, where it came from)
    names: tuple[tuple[str, str], ...] = tuple(CLI_NAMES.items())

    def source(self, key: str) -> str:
        return dict(self.sources).get(key, "nowhere")

    def name(self, key: str) -> str:
        return dict(self.names).get(key, key)

    def credentials(self) -> Credentials | None:
        return Credentials(self.access_key, self.secret_key) if self.access_key else None

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client SSL context (None without TLS); an unreadable file is an AccessError naming it."""
        if not self.tls:
            return None
        from rocketq.remoting.tls import client_context
        for key in ("ca_file", "cert_file", "key_file"):
            path = getattr(self, key)
            if path and not os.path.isfile(path):
                raise AccessError(f"TLS: {key.replace('_', ' ')} {path} (from {self.source(key)}) does not exist "
                                  "or is not a file")
        try:
            return client_context(self.ca_file, verify=not self.insecure, cert_path=self.cert_file,
                                  key_path=self.key_file)
        except (OSError, ssl.SSLError, ValueError) as exc:
            files = ", ".join(f"{k.replace('_', ' ')} {getattr(self, k)} (from {self.source(k)})"
                              for k in ("ca_file", "cert_file", "key_file") if getattr(self, k))
            raise AccessError(f"TLS: cannot load {files}: {exc}") from None

    def client_kwargs(self) -> dict:
        """``credentials`` and ``ssl_context`` for Producer, consumers, Admin and MQClientAPI."""
        return {"credentials": self.credentials(), "ssl_context": self.ssl_context()}

    def describe(self) -> str:
        """One line for logs and reports: what is used and from where; never the secret."""
        acl = (f"access key {self.access_key} (from {self.source('access_key')}), secret key from "
               f"{self.source('secret_key')}") if self.access_key else "no credentials"
        if not self.tls:
            tls = "TLS off"
        elif self.insecure:
            tls = "TLS on, server certificate NOT verified"
        else:
            tls = f"TLS on, server verified against {self.ca_file or 'the system CAs'}"
            tls += f", client certificate {self.cert_file}" if self.cert_file else ""
        where = f"profile {self.profile} ({self.config_path}); " if self.profile else ""
        return f"{where}{acl}; {tls}"


def config_path(environ: Mapping[str, str] = os.environ) -> Path:
    """The profile file: ROCKETQ_CLIENT_CONFIG, else $XDG_CONFIG_HOME (if absolute) or ~/.config."""
    if environ.get(CONFIG_ENV):
        return Path(environ[CONFIG_ENV]).expanduser()
    xdg = environ.get("XDG_CONFIG_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path(environ.get("HOME") or Path.home()) / ".config"
    return base / CONFIG_RELATIVE


def resolve(given: Mapping[str, object], *, profile: str | None = None, environ: Mapping[str, str] = os.environ,
            names: Mapping[str, str] = CLI_NAMES) -> ClientAccess:
    """Settings from *given* (option values, None where not given), then *environ*, then the profile
    (*profile*, else ROCKETQ_PROFILE, else the file's default).  *names* say how the options are
    called, for messages."""
    if profile:
        asked_by = names.get("profile", "profile")
    elif environ.get(PROFILE_ENV):
        profile, asked_by = environ[PROFILE_ENV], f"environment {PROFILE_ENV}"
    else:
        asked_by = "default_profile"
    path = config_path(environ)
    chosen, from_file = load_profile(path, profile, asked_by)
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    for s in SETTINGS:
        if given.get(s.key) not in (None, ""):
            values[s.key], sources[s.key] = given[s.key], names.get(s.key, s.key)
        elif s.env and environ.get(s.env, "") != "":
            values[s.key], sources[s.key] = _from_env(s, environ[s.env]), f"environment {s.env}"
        elif s.key in from_file:
            values[s.key], sources[s.key] = from_file[s.key], f"profile {chosen} in {path}"
    implied_by = [k for k in ("ca_file", "cert_file", "key_file", "insecure") if values.get(k)]
    if implied_by and not values.get("tls"):
        values["tls"], sources["tls"] = True, sources[implied_by[0]]
    access = ClientAccess(
        namesrv=values.get("namesrv"), access_key=values.get("access_key"), secret_key=values.get("secret_key"),
        tls=bool(values.get("tls")),
        ca_file=values.get("ca_file"), cert_file=values.get("cert_file"), key_file=values.get("key_file"),
        insecure=bool(values.get("insecure")), profile=chosen, config_path=str(path) if chosen else None,
        sources=tuple(sources.items()), names=tuple(names.items()))
    _check_pairs(access, environ)
    return access


def _from_env(s: Setting, text: str) -> object:
    if s.kind is not bool:
        return text
    word = text.strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise AccessError(f"environment {s.env} must be true or false")


def _check_pairs(a: ClientAccess, environ: Mapping[str, str]) -> None:
    def ways(key: str) -> str:
        s = BY_KEY[key]
        where = f"profile {a.profile}" if a.profile else f"a profile in {config_path(environ)}"
        return f"{a.name(key)}, {s.env}, or {key} in {where}" if s.env else f"{a.name(key)} or {key} in {where}"
    if a.access_key and not a.secret_key:
        raise MissingSetting(f"an access key (from {a.source('access_key')}) but no secret key: set "
                             f"{ways('secret_key')}")
    if a.secret_key and not a.access_key:
        raise MissingSetting(f"a secret key (from {a.source('secret_key')}) but no access key: set "
                             f"{ways('access_key')}")
    if a.key_file and not a.cert_file:
        raise MissingSetting(f"a client key (from {a.source('key_file')}) but no client certificate: set "
                             f"{ways('cert_file')}")


# -- the profile file ------------------------------------------------------------------------

def check_private(path: Path) -> None:
    """Refuse a file group or others may read or write (it holds secrets)."""
    mode = path.stat().st_mode
    if mode & PRIVATE_MODE_MASK:
        raise AccessError(f"{path} is open to group or others (mode {mode & 0o777:03o}) and holds secrets, so "
                          f"it is not used; make it private with: chmod 600 {path}")


def load_profile(path: Path, name: str | None, asked_by: str) -> tuple[str | None, dict[str, object]]:
    """(profile name, its settings) from *path*; (None, {}) when no profile applies."""
    if not path.is_file():
        if name:
            raise AccessError(f"profile {name!r} (from {asked_by}) is looked up in {path}, which does not exist")
        return None, {}
    check_private(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise AccessError(f"{path}: {exc}") from None        # TOML errors name a line, never a value
    _no_unknown(path, "", data, ("default_profile", "profiles"))
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict) or not all(isinstance(p, dict) for p in profiles.values()):
        raise AccessError(f"{path}: profiles must be tables, e.g. [profiles.prod]")
    if name is None:
        name = data.get("default_profile") or (DEFAULT_PROFILE_NAME if DEFAULT_PROFILE_NAME in profiles else None)
        if name is None:
            return None, {}
    if name not in profiles:
        raise AccessError(f"{path} has no profile {name!r} (asked for by {asked_by}; it has "
                          f"{', '.join(sorted(profiles)) or 'none'})")
    raw = profiles[name]
    _no_unknown(path, f"profiles.{name}.", raw, BY_KEY)
    out: dict[str, object] = {}
    for key, value in raw.items():
        s = BY_KEY[key]
        if not isinstance(value, s.kind):
            raise AccessError(f"{path}: profiles.{name}.{key} must be "
                              f"{'true or false' if s.kind is bool else 'a string'}")
        out[key] = str(path.parent / Path(value).expanduser()) if s.is_path else value
    return name, out


def _no_unknown(path: Path, prefix: str, table: dict, known) -> None:
    for key in table:
        if key not in known:
            near = difflib.get_close_matches(key, list(known), n=1)
            raise AccessError(f"{path}: unknown key {prefix}{key}" + (f" (did you mean {near[0]}?)" if near else ""))


# -- errors from a server, explained ---------------------------------------------------------

def explain(error: BaseException | str, access: ClientAccess | None) -> str:
    """*error* as one line, with what to do about it when it is about credentials or TLS."""
    text = " ".join(str(error).split()) or type(error).__name__
    hint = _hint(text, access or ClientAccess())
    return f"{text}; {hint}" if hint else text


def _hint(text: str, a: ClientAccess) -> str | None:
    low = text.lower()
    if "carries no accesskey" in low:
        where = f"profile {a.profile}" if a.profile else f"a profile ({a.name('profile')}) in {config_path()}"
        return (f"this server wants credentials: give {a.name('access_key')} and {a.name('secret_key')}, set "
                f"ROCKETQ_ACCESS_KEY and ROCKETQ_SECRET_KEY, or put access_key and secret_key in {where}")
    if "signature of" in low and "does not match" in low:
        return f"the secret key is wrong for this access key (it came from {a.source('secret_key')})"
    if "no acl account for accesskey" in low:
        return f"the server has no such account (the access key came from {a.source('access_key')})"
    if "certificate_verify_failed" in low:
        return (f"the server's certificate is not trusted: give the CA that signed it with {a.name('ca_file')} "
                f"(or ROCKETQ_CA_FILE, or ca_file in a profile)")
    if "certificate required" in low or "certificate_required" in low or "bad certificate" in low:
        return (f"the server wants a client certificate it trusts: give {a.name('cert_file')} and "
                f"{a.name('key_file')}")
    handshake_cut = any(w in low for w in ("wrong_version_number", "eof occurred", "record layer failure",
                                            "unexpected eof", "reset by peer"))
    refused = any(w in low for w in ("refused", "unreachable", "no route", "name or service", "timed out"))
    # an established connection the server closed ("connection to H closed: ..."): with TLS on, the handshake
    # had completed, and a TLS 1.3 server refuses a client certificate only after it - the client then reads
    # the alert, or, when the server's reset arrives first, ECONNRESET
    after_handshake = "connection to" in low and " closed" in low
    if a.tls and "closed" in low and (after_handshake or not handshake_cut):
        if not a.cert_file:
            return (f"the server closed the TLS connection; if it wants a client certificate it trusts (mutual "
                    f"TLS), give {a.name('cert_file')} and {a.name('key_file')}")
        return f"the server closed the TLS connection; does it trust the client certificate {a.cert_file}?"
    if a.tls and (handshake_cut or "could not connect" in low and not refused):
        return f"the server did not complete a TLS handshake; does it speak TLS? (TLS is on from {a.source('tls')})"
    if not a.tls and ("reset by peer" in low or "connection to" in low and "closed" in low):
        return f"if the server requires TLS, add {a.name('tls')} (and {a.name('ca_file')} with its CA)"
    return None
