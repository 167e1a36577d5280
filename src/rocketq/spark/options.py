"""Reading the string options Spark hands a data source, with errors that name the option."""

from __future__ import annotations

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


def namesrvs(options: Mapping[str, str]) -> list[str]:
    """``namesrv`` (or ``endpoints``): NameServer addresses, ``;``- or ``,``-separated."""
    text = options.get("namesrv") or options.get("endpoints")
    if not text or not str(text).strip():
        raise OptionError("option 'namesrv' is required: the NameServer address, e.g. 127.0.0.1:9876")
    return [a.strip() for a in str(text).replace(",", ";").split(";") if a.strip()]
