"""``RemotingCommand``: one request or response of the remoting protocol, apart from its bytes.

A command is a header (code, language, version, opaque, flag, remark, extFields) plus an opaque
body; :mod:`rocketq.remoting.codec` turns it into a frame and back.  ``opaque`` ties a response to
its request on one connection; ``flag`` bit 0 marks a response, bit 1 a oneway request (no answer).

**Liberal in what we accept.**  Java keeps extFields as ``HashMap<String, String>``, but JSON-only
clients send raw JSON scalars (``"queueId":0``, ``"k":false``) and leave out nulls.  The decoder
turns every scalar into its Java-style string (``0`` -> ``"0"``, ``false`` -> ``"false"``) and drops
nulls, and the typed accessors parse leniently: ``get_int`` takes ``"7"``, ``7``, ``"+7"``, ``"7.0"``;
``get_bool`` takes ``true``/``"TRUE"``/``1``/``"1"`` and their opposites; an empty string counts as
absent for ints and bools.  A required field that is absent, or present but unparseable, raises
:class:`RemotingCommandError` naming the field.

**Exact in what we send.**  Everything put into ``ext_fields`` through the constructors below is
stringified the way Java's ``Object.toString`` would, so a frame we emit always carries strings.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from rocketq.remoting.codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, ResponseCode, SerializeType
from rocketq.remoting.errors import RemotingCommandError

_REQUIRED: Any = object()
_INT_RE = re.compile(r"[+-]?[0-9]+\Z")
_TRUE_WORDS = frozenset({"true", "1"})
_FALSE_WORDS = frozenset({"false", "0"})


def to_ext_str(value: Any) -> str:
    """The string Java's ``toString`` gives for a header value (booleans in lower case)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def normalize_ext_fields(fields: Mapping[str, Any] | None) -> dict[str, str]:
    """A fresh ``str -> str`` dict; ``None`` values are dropped like Java drops null fields."""
    if not fields:
        return {}
    return {k if k.__class__ is str else str(k): v if v.__class__ is str else to_ext_str(v)
            for k, v in fields.items() if v is not None}


def coerce_language(value: LanguageCode | str | int) -> LanguageCode:
    """A language from its enum, name or byte value; raises ``ValueError`` for unknown ones."""
    if isinstance(value, LanguageCode):
        return value
    if isinstance(value, str):
        try:
            return LanguageCode[value]
        except KeyError:
            raise ValueError(f"unknown language {value!r}") from None
    return LanguageCode(value)


# The version a RocketMQ 5.3.3 server stamps on every response (MQVersion.Version.V5_3_3.ordinal(); its
# BrokerStartup sets rocketmq.remoting.version to it).  Java clients remember it per broker from the
# heartbeat's response and gate features on it: a pull with an SQL92 subscription is never sent to a
# broker below V4_1_0_SNAPSHOT (232), so a response version of 0 silently starved such consumers.
SERVER_VERSION = 479


@dataclass(slots=True, repr=False)
class RemotingCommand:
    code: int
    language: LanguageCode = LanguageCode.PYTHON
    version: int = 0
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON
    # not on the wire: when the frame was decoded (loop clock), for the broker's queue-wait limit
    received_at: float = field(default=0.0, compare=False)

    def __post_init__(self) -> None:
        if type(self.language) is not LanguageCode:
            self.language = coerce_language(self.language)
        if type(self.serialize_type) is not SerializeType:
            self.serialize_type = SerializeType(self.serialize_type)

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def create_request(cls, code: int, ext_fields: Mapping[str, Any] | None = None, body: bytes = b"", *,
                       oneway: bool = False, remark: str | None = None, version: int = 0,
                       serialize_type: SerializeType = SerializeType.JSON) -> "RemotingCommand":
        """A request; the opaque is assigned by whoever sends it (client or connection)."""
        return cls(code=int(code), version=version, flag=FLAG_ONEWAY if oneway else 0, remark=remark,
                   ext_fields=normalize_ext_fields(ext_fields), body=body, serialize_type=serialize_type)

    @classmethod
    def create_response(cls, request: "RemotingCommand", code: int, remark: str | None = None,
                        ext_fields: Mapping[str, Any] | None = None, body: bytes = b"") -> "RemotingCommand":
        """The answer to *request*: same opaque, RESPONSE flag, same serialize type as the request
        (JSON-only clients cannot read a binary header)."""
        return cls(code=int(code), version=SERVER_VERSION, opaque=request.opaque, flag=FLAG_RESPONSE, remark=remark,
                   ext_fields=normalize_ext_fields(ext_fields), body=body,
                   serialize_type=request.serialize_type)

    @classmethod
    def answer(cls, request: "RemotingCommand", code: int, remark: str | None,
               ext_fields: dict[str, str]) -> "RemotingCommand":
        """:meth:`create_response` for a hot handler that builds *ext_fields* as ``str -> str`` itself
        (the send answers): the dict is taken as it is, not copied and normalised (that was a tenth of
        a single send's in-process cost)."""
        return cls(int(code), LanguageCode.PYTHON, SERVER_VERSION, request.opaque, FLAG_RESPONSE, remark, ext_fields,
                   b"", request.serialize_type)

    # -- flags --------------------------------------------------------------------------------

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    # -- typed header accessors ---------------------------------------------------------------

    def get_str(self, name: str, default: Any = _REQUIRED) -> str:
        value = self.ext_fields.get(name)
        if value is None:
            return self._missing(name, default)
        return to_ext_str(value)

    def get_int(self, name: str, default: Any = _REQUIRED) -> int:
        value = self.ext_fields.get(name)
        if value is None or value == "":
            return self._missing(name, default)
        if value.__class__ is str and len(value) < 20 and value.isascii() and \
                (value.isdigit() or value[0] == "-" and value[1:].isdigit()):
            return int(value)          # what every client sends; the general parse below for the rest
        parsed = parse_int_value(value)
        if parsed is None:
            raise RemotingCommandError(name, f"is not an integer: {_short(value)}")
        return parsed

    def get_bool(self, name: str, default: Any = _REQUIRED) -> bool:
        value = self.ext_fields.get(name)
        if value is None or value == "":
            return self._missing(name, default)
        parsed = parse_bool_value(value)
        if parsed is None:
            raise RemotingCommandError(name, f"is not a boolean: {_short(value)}")
        return parsed

    @staticmethod
    def _missing(name: str, default: Any) -> Any:
        if default is _REQUIRED:
            raise RemotingCommandError(name, "is null")
        return default

    def __repr__(self) -> str:
        kind = "response" if self.is_response else ("oneway" if self.is_oneway else "request")
        return (f"RemotingCommand({kind} code={self.code} opaque={self.opaque} flag={self.flag} "
                f"lang={self.language.name} version={self.version} remark={self.remark!r} "
                f"ext_fields={self.ext_fields!r} body={len(self.body)} bytes "
                f"serialize={self.serialize_type.name})")


def parse_int_value(value: Any) -> int | None:
    """An int from an int, an integral float, or a decimal string (``"+7"``, ``" 7 "``, ``"7.0"``); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    text = str(value).strip()
    if _INT_RE.match(text):
        try:
            return int(text)
        except ValueError:           # more digits than int() will convert
            return None
    try:
        number = float(text)
    except ValueError:
        return None
    return int(number) if math.isfinite(number) and number.is_integer() else None


def parse_bool_value(value: Any) -> bool | None:
    """A bool from a bool, 1/0, or ``"true"``/``"false"``/``"1"``/``"0"`` in any case; else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return {1: True, 0: False}.get(value)
    text = str(value).strip().lower()
    if text in _TRUE_WORDS:
        return True
    if text in _FALSE_WORDS:
        return False
    return None


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def not_supported_response(request: RemotingCommand) -> RemotingCommand:
    """What Java answers for a request code no processor handles (REQUEST_CODE_NOT_SUPPORTED)."""
    return RemotingCommand.create_response(request, ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                           f"request type {request.code} not supported")


def busy_response(request: RemotingCommand, remark: str) -> RemotingCommand:
    return RemotingCommand.create_response(request, ResponseCode.SYSTEM_BUSY, remark)


def error_response(request: RemotingCommand, remark: str) -> RemotingCommand:
    return RemotingCommand.create_response(request, ResponseCode.SYSTEM_ERROR, remark)
