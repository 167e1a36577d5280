"""Reading the string options Spark hands a data source, with errors that name the option."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


class OptionError(ValueError):
    """A data source option is missing or has a value that cannot be used."""


def required(options: Mapping[str, str], name: str, what: str) -> str:
    value = options.get(name)
    if value is None or not str(value).strip():
        raise OptionError(f"option {name!r} is required: {what}")
    return str(value).strip()


def boolean(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    if value is None:
        return default
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name!r} must be true or false, not {value!r}")


def integer(options: Mapping[str, str], name: str, default: int | None, *, minimum: int | None = None) -> int | None:
    value = options.get(name)
    if value is None or str(value).strip() == "":
        return default
    try:
        number = int(str(value).strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, not {value!r}") from None
    if minimum is not None and number < minimum:
        raise OptionError(f"option {name!r} must be at least {minimum}, not {number}")
    return number


def listing(options: Mapping[str, str], name: str) -> list[str]:
    """A comma-separated option as a list of its non-empty, stripped items."""
    value = options.get(name) or ""
    return [item.strip() for item in str(value).split(",") if item.strip()]


def namesrvs(options: Mapping[str, str], access=None) -> list[str]:
    """``namesrv`` (or ``endpoints``), else ROCKETQ_NAMESRV or the profile's (*access*, resolved):
    NameServer addresses, ``;``- or ``,``-separated."""
    text = options.get("namesrv") or options.get("endpoints") or (access.namesrv if access is not None else None)
    if not text or not str(text).strip():
        raise OptionError("option 'namesrv' is required: the NameServer address, e.g. 127.0.0.1:9876 (or "
                          "ROCKETQ_NAMESRV, or namesrv in the profile)")
    return [a.strip() for a in str(text).replace(",", ";").split(";") if a.strip()]


# -- credentials and TLS ---------------------------------------------------------------------
#
# Options accessKey, secretKey, tls, tlsCaFile, tlsCertFile, tlsKeyFile, tlsInsecure and profile
# are resolved like the command line's flags (rocketq.client.access): options > ROCKETQ_*
# environment > the profile file - in each process that connects (the driver plans, executors
# pull and send), so a secret kept in the environment or the profile file is read where it is
# used and never travels with the plan.  A secret given as an option travels inside the pickled
# reader or writer, wrapped in Secret so that no repr shows it; Spark itself shows no Python data
# source's options in plans, the UI or progress reports (tests/spark/test_security.py checks).

SPARK_NAMES = {"namesrv": "namesrv", "access_key": "accessKey", "secret_key": "secretKey", "tls": "tls",
               "ca_file": "tlsCaFile", "cert_file": "tlsCertFile", "key_file": "tlsKeyFile",
               "insecure": "tlsInsecure", "profile": "profile"}


class Secret:
    """A string that never shows itself in a repr, str or log line."""

    __slots__ = ("_value",)

    def __init__(self, value: str):
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret(***)"

    __str__ = __repr__

    def __eq__(self, other) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __getstate__(self):
        return self._value

    def __setstate__(self, state) -> None:
        self._value = state


@dataclass(frozen=True)
class AccessSpec:
    """The access options as given (plain data, pickled to executors); :meth:`resolve` adds what the
    environment and the profile file of the process it runs in say."""
    namesrv: str | None = None
    access_key: str | None = None
    secret_key: Secret | None = None
    tls: bool | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    insecure: bool | None = None
    profile: str | None = None

    def resolve(self):
        from rocketq.client.access import AccessError, resolve
        given = {k: getattr(self, k) for k in ("namesrv", "access_key", "tls", "ca_file", "cert_file", "key_file",
                                               "insecure")}
        given["secret_key"] = self.secret_key.reveal() if self.secret_key is not None else None
        try:
            return resolve(given, profile=self.profile, names=SPARK_NAMES)
        except AccessError as exc:
            raise OptionError(str(exc)) from None


def access_spec(options: Mapping[str, str]) -> AccessSpec:
    def text(name: str) -> str | None:
        value = options.get(name)
        return str(value).strip() if value is not None and str(value).strip() else None

    secret = options.get("secretKey")
    flags = {key: boolean(options, name, False) if options.get(name) is not None else None
             for key, name in (("tls", "tls"), ("insecure", "tlsInsecure"))}
    return AccessSpec(namesrv=text("namesrv") or text("endpoints"), access_key=text("accessKey"),
                      secret_key=Secret(str(secret)) if secret else None, tls=flags["tls"],
                      ca_file=text("tlsCaFile"), cert_file=text("tlsCertFile"), key_file=text("tlsKeyFile"),
                      insecure=flags["insecure"], profile=text("profile"))


def access_options(access) -> dict[str, str]:
    """A resolved :class:`~rocketq.client.access.ClientAccess` as options of format("rocketq") (what
    the ``rocketq spark`` commands pass on); None gives none."""
    if access is None:
        return {}
    out = {"accessKey": access.access_key, "secretKey": access.secret_key, "tlsCaFile": access.ca_file,
           "tlsCertFile": access.cert_file, "tlsKeyFile": access.key_file}
    out = {k: v for k, v in out.items() if v}
    if access.tls:
        out["tls"] = "true"
    if access.insecure:
        out["tlsInsecure"] = "true"
    return out
