"""The message properties string: ``name \\x01 value \\x02`` repeated, with a trailing ``\\x02``.

This is RocketMQ's ``MessageDecoder.messageProperties2String`` format; both Java and third-party
clients emit the trailing separator, and the decoder accepts a string with or without it.
Names and values must not contain the two separator characters.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate, repeat

import numpy as np

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


_WELL_FORMED = re.compile("(?:[^\x01\x02]*\x01[^\x01\x02]*\x02)*")


class PropertyColumns:
    """Named properties of many messages' properties strings, a column per name, found on the
    strings joined (a few C-level passes for a batch instead of a dict per message).

    Raises :class:`IllegalPropertyError` naming the first message whose string is not whole
    ``name\x01value\x02`` pairs.  ``has(name)`` tells whether any message has the name;
    ``column(name)`` gives each message's value (None where absent; the last one wins).
    """

    def __init__(self, texts):
        self._texts = texts
        joined = "".join(texts)
        if not (all(map(str.endswith, texts, repeat(PROPERTY_SEPARATOR))) and _alternating(joined)):
            for i, text in enumerate(texts):       # an empty string is fine; find the one that is not
                if not _WELL_FORMED.fullmatch(text):
                    raise IllegalPropertyError(f"message {i}: properties are not k\\x01v\\x02 pairs")
        self._padded = PROPERTY_SEPARATOR + joined      # every name follows a \x02 here

    def has(self, name: str) -> bool:
        return f"\x02{name}\x01" in self._padded

    def column(self, name: str) -> list[str | None] | tuple:
        texts, n = self._texts, len(self._texts)
        if not self.has(name):
            return (None,) * n
        pattern = _value_pattern(name)
        values = pattern.findall(self._padded)
        # n proper matches and "name\x01" once in every string: exactly one per message
        if len(values) == n and list(map(str.count, texts, repeat(name + NAME_VALUE_SEPARATOR))).count(1) == n:
            return values
        column: list[str | None] = [None] * n
        ends = list(accumulate(map(len, texts)))
        for m in pattern.finditer(self._padded):     # m.start() in the padded string = the name's in the joined
            column[bisect_right(ends, m.start())] = m.group(1)
        return column


def _alternating(joined: str) -> bool:
    """The separators in *joined* go \\x01, \\x02, \\x01, \\x02, ...: whole name/value pairs, given
    that it ends with \\x02.  Large strings are checked on their UTF-8 bytes with numpy (the two
    separator bytes occur in UTF-8 only as themselves), ~8x faster than the regular expression."""
    if len(joined) < _NUMPY_MIN_CHARS:
        return _WELL_FORMED.fullmatch(joined) is not None
    u8 = np.frombuffer(joined.encode(), dtype=np.uint8)
    seps = u8[u8 - 1 <= 1]                      # 1 and 2 (0 wraps to 255)
    return len(seps) % 2 == 0 and bool((seps[0::2] == 1).all()) and bool((seps[1::2] == 2).all())


_NUMPY_MIN_CHARS = 4096


@lru_cache(maxsize=32)
def _value_pattern(name: str) -> re.Pattern:
    return re.compile(f"\x02{re.escape(name)}\x01([^\x02]*)")
