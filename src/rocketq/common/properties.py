"""The message properties string: ``name \\x01 value \\x02`` repeated, with a trailing ``\\x02``.

This is RocketMQ's ``MessageDecoder.messageProperties2String`` format; both Java and third-party
clients emit the trailing separator, and the decoder accepts a string with or without it.
Names and values must not contain the two separator characters.
"""

from __future__ import annotations

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


class IllegalPropertyError(ValueError):
    """A property name or value contains a separator character."""


def encode_properties(props: dict[str, str]) -> str:
    """Encode *props*; raises :class:`IllegalPropertyError` for a separator inside a name or value."""
    if not props:
        return ""
    text = "".join(f"{k}\x01{v}\x02" for k, v in props.items())
    check_separators(text, len(props))
    return text


def check_separators(text: str, pairs: int) -> None:
    """Cheap whole-string check that *text* holds exactly *pairs* well-formed name/value pairs."""
    if text.count(NAME_VALUE_SEPARATOR) != pairs or text.count(PROPERTY_SEPARATOR) != pairs:
        raise IllegalPropertyError("property names and values must not contain \\x01 or \\x02")


def decode_properties(text: str) -> dict[str, str]:
    """Parse a properties string; items without a name/value separator are ignored, as in Java."""
    props: dict[str, str] = {}
    if not text:
        return props
    for item in text.split(PROPERTY_SEPARATOR):
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if sep and name:
            props[name] = value
    return props
