"""Checks of what the console's forms and links carry; each failure is a sentence naming the field.

Topic and group names follow :mod:`rocketq.common.validation` (RocketMQ's rules), numbers have
named ranges, message bodies and properties have RocketMQ's limits, and times are parsed from
the browser's ``datetime-local`` fields.  Nothing unchecked reaches the cluster.
"""

from __future__ import annotations

import datetime as dt

from rocketq.common.validation import GROUP_MAX_CHARS, name_refusal

MAX_QUEUES = 1024                     # queues per topic (the CLI's bound)
MAX_BODY_BYTES = 4 * 1024 * 1024      # RocketMQ's maxMessageSize default
MAX_FORM_BYTES = MAX_BODY_BYTES + 64 * 1024   # the largest request the console reads at all
MAX_TAG_CHARS = 255
MAX_KEYS_CHARS = 1024
MAX_ID_CHARS = 128
MAX_RESULTS = 256                     # messages one search shows
PROPERTY_SEPARATORS = ("\x01", "\x02")


class FormError(ValueError):
    """A bad field: the message says which and why."""


def topic(value: str | None, what: str = "topic") -> str:
    name = (value or "").strip()
    refusal = name_refusal("topic", name)
    if refusal:
        raise FormError(f"{what}: {refusal}")
    return name


def group(value: str | None) -> str:
    name = (value or "").strip()
    refusal = name_refusal("group", name)
    if refusal:
        raise FormError(f"group: {refusal}")
    return name


def integer(value: str | None, what: str, lo: int, hi: int, default: int | None = None) -> int:
    text = (value or "").strip()
    if not text and default is not None:
        return default
    try:
        n = int(text)
    except ValueError:
        raise FormError(f"{what}: {text[:20]!r} is not a whole number") from None
    if not lo <= n <= hi:
        raise FormError(f"{what}: {n} is outside {lo}..{hi}")
    return n


def text(value: str | None, what: str, max_chars: int, *, required: bool = False) -> str:
    out = (value or "").strip()
    if required and not out:
        raise FormError(f"{what} is required")
    if len(out) > max_chars:
        raise FormError(f"{what} is longer than {max_chars} characters")
    if any(sep in out for sep in PROPERTY_SEPARATORS):
        raise FormError(f"{what} contains a control character RocketMQ uses as a separator")
    return out


def body(value: str | None) -> bytes:
    data = (value or "").encode("utf-8")
    if not data:
        raise FormError("body: a message needs a body")
    if len(data) > MAX_BODY_BYTES:
        raise FormError(f"body: {len(data):,} bytes is over the {MAX_BODY_BYTES:,}-byte limit (maxMessageSize)")
    return data


def when(value: str | None, what: str) -> int:
    """Milliseconds since the epoch from a ``datetime-local`` value (local time) or digits (ms)."""
    raw = (value or "").strip()
    if raw.isdigit():
        return int(raw)
    try:
        return int(dt.datetime.fromisoformat(raw).timestamp() * 1000)
    except ValueError:
        raise FormError(f"{what}: {raw[:32]!r} is not a date and time (YYYY-MM-DDTHH:MM)") from None


def message_id(value: str | None) -> str:
    raw = (value or "").strip()
    if not raw or len(raw) > MAX_ID_CHARS or not raw.isalnum():
        raise FormError(f"message id: {raw[:40]!r} is not a message id (letters and digits, at most "
                        f"{MAX_ID_CHARS})")
    return raw


__all__ = ["FormError", "GROUP_MAX_CHARS", "MAX_FORM_BYTES", "body", "group", "integer", "message_id", "text",
           "topic", "when"]
