"""JSON as RocketMQ's Java side writes it with fastjson, for the bodies that need it.

Two habits of fastjson are not standard JSON and real Java tools depend on them:

* maps keyed by integers are written with bare keys: ``{0:12,1:7}``;
* maps keyed by objects (``MessageQueue`` in ``TopicStatsTable`` and ``ConsumeStats``) are written
  with the object itself as the key::

      {"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"maxOffset":5,...}}}

:func:`dumps` writes a map whose keys are :class:`ObjectKey` the second way, so ``mqadmin`` and the
Java client read it; :func:`loads` reads all three forms (object keys come back as
:class:`ObjectKey`, a hashable, read-only view of the key object's fields).
"""

from __future__ import annotations

import json
from typing import Any

_WS = " \t\r\n"


class ObjectKey(tuple):
    """A JSON object used as a map key: a sorted tuple of (name, value) pairs."""

    @classmethod
    def of(cls, **fields: Any) -> "ObjectKey":
        return cls(sorted(fields.items()))

    def __getitem__(self, name):                 # key["queueId"]
        if isinstance(name, str):
            for k, v in tuple.__iter__(self):
                if k == name:
                    return v
            raise KeyError(name)
        return tuple.__getitem__(self, name)

    def as_dict(self) -> dict:
        return dict(tuple.__iter__(self))


def dumps(value: Any) -> str:
    """Compact JSON, except that ObjectKey map keys are written as objects (fastjson's form)."""
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            key = dumps(k.as_dict()) if isinstance(k, ObjectKey) else json.dumps(str(k))
            parts.append(f"{key}:{dumps(v)}")
        return "{" + ",".join(parts) + "}"
    if isinstance(value, (list, tuple)) and not isinstance(value, ObjectKey):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    return json.dumps(value, separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    """Parse standard JSON or fastjson's object-keyed / bare-integer-keyed maps."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    try:
        return json.loads(text)
    except ValueError:
        pass
    parser = _Parser(text)
    value = parser.value()
    parser.skip_ws()
    if parser.pos != len(text):
        raise ValueError(f"fastjson: unexpected data at character {parser.pos}")
    return value


class _Parser:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0
        self._decoder = json.JSONDecoder()

    def skip_ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1

    def value(self) -> Any:
        self.skip_ws()
        if self.pos >= len(self.text):
            raise ValueError("fastjson: unexpected end of input")
        ch = self.text[self.pos]
        if ch == "{":
            return self._object()
        if ch == "[":
            return self._array()
        try:
            value, end = self._decoder.raw_decode(self.text, self.pos)
        except ValueError as exc:
            raise ValueError(f"fastjson: bad value at character {self.pos}: {exc}") from None
        self.pos = end
        return value

    def _expect(self, ch: str) -> None:
        self.skip_ws()
        if self.pos >= len(self.text) or self.text[self.pos] != ch:
            raise ValueError(f"fastjson: expected {ch!r} at character {self.pos}")
        self.pos += 1

    def _peek(self) -> str:
        self.skip_ws()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def _object(self) -> dict:
        self._expect("{")
        out: dict = {}
        if self._peek() == "}":
            self.pos += 1
            return out
        while True:
            key = self.value()
            if isinstance(key, dict):
                key = ObjectKey.of(**key)
            elif isinstance(key, (int, float)):
                key = str(key)
            self._expect(":")
            out[key] = self.value()
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect("}")
            return out

    def _array(self) -> list:
        self._expect("[")
        out: list = []
        if self._peek() == "]":
            self.pos += 1
            return out
        while True:
            out.append(self.value())
            if self._peek() == ",":
                self.pos += 1
                continue
            self._expect("]")
            return out
