"""The pure-Python remoting codec rocketq used before the native one: the reference it is tested
against (tests/native/test_codec.py).  Not imported by the product.

Sans-IO codec of the remoting protocol: commands to frames and back, no sockets.

Frame (all integers big-endian)::

    0         4                 8                       8+H                     4+L
    +---------+-----------------+-----------------------+-----------------------+
    | int32 L | T (8) | H (24)  | header (H bytes)      | body (L - 4 - H bytes)|
    +---------+-----------------+-----------------------+-----------------------+
    L = 4 + H + bodyLength (does not count itself); T = serialize type (0 JSON, 1 ROCKETMQ)

JSON header (``T = 0``), keys in the order we emit them; readers ignore unknown keys::

    {"code":105,"language":"PYTHON","version":0,"opaque":1,"flag":0,"remark":"...",
     "extFields":{"topic":"TopicTest"},"serializeTypeCurrentRPC":"JSON"}

    ``remark`` is left out when None.  extFields values are always strings when we send them.

ROCKETMQ binary header (``T = 1``, RocketMQSerializable)::

    int16 code | uint8 language | int16 version | int32 opaque | int32 flag |
    int32 remarkLen | remark (UTF-8; length 0 = null) |
    int32 extLen | extLen bytes of { uint16 keyLen | key (UTF-8) | int32 valLen | value (UTF-8) }*

Limits: a whole frame (length prefix included, as Netty's ``LengthFieldBasedFrameDecoder``
counts it) is at most ``max_frame_bytes`` (16 MiB by default); the header at most 2**24 - 1
bytes.  :class:`FrameDecoder` checks the length prefix as soon as 4 bytes are in and the
header-length field as soon as 8 are, so a peer cannot make it buffer a bogus 2 GiB frame.

What we accept, leniently (:func:`decode_header`): ``language`` as a name or a number (unknown ->
OTHER), missing ``version``/``opaque``/``flag``/``remark``/``extFields``, integers sent as strings,
extFields values of any JSON type (scalars become Java-style strings, nulls are dropped).  What
we reject with :class:`RemoteProtocolError`: bad UTF-8 or JSON, a header that is not an object, a
missing or non-integer ``code``, integers outside int32, a truncated binary header.
"""

from __future__ import annotations

import json
import struct

import orjson
from typing import Any

from rocketq.remoting.codes import LanguageCode, SerializeType
from rocketq.remoting.command import RemotingCommand, parse_int_value, to_ext_str
from rocketq.remoting.errors import LocalProtocolError, RemoteProtocolError

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
MAX_HEADER_BYTES = 0xFFFFFF
MIN_FRAME_LENGTH = 4                     # the length field's value: just the header-length field
BINARY_FIXED_HEADER_BYTES = 21           # code..flag (13) + remarkLen (4) + extLen (4)
COMPACT_AFTER_BYTES = 64 * 1024          # consumed bytes kept in the buffer before it is compacted

_INT16 = (-(1 << 15), (1 << 15) - 1)
_INT32 = (-(1 << 31), (1 << 31) - 1)
_PREFIX = struct.Struct(">iI")
_LENGTH = struct.Struct(">i")
_BIN_FIXED = struct.Struct(">hBhiii")    # code, language, version, opaque, flag, remarkLen
_KEY_LEN = struct.Struct(">H")
_VAL_LEN = struct.Struct(">i")
_JSON_SEPARATORS = (",", ":")
_LANGUAGES_BY_NAME = {m.name: m for m in LanguageCode}
_LANGUAGES_BY_CODE = {m.value: m for m in LanguageCode}


# -- encoding ---------------------------------------------------------------------------------

def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame of *cmd*."""
    head = encode_header(cmd)
    return head + bytes(cmd.body) if cmd.body else head


def encode_header(cmd: RemotingCommand) -> bytes:
    """Length prefix, header-length field and header of *cmd*'s frame: everything but the body,
    so a transport can write a large body without copying it into one buffer."""
    header = _encode_json_header(cmd) if cmd.serialize_type == SerializeType.JSON else _encode_binary_header(cmd)
    if len(header) > MAX_HEADER_BYTES:
        raise LocalProtocolError(f"header of {len(header)} bytes does not fit the 24-bit length field")
    length = 4 + len(header) + len(cmd.body)
    if length > _INT32[1]:
        raise LocalProtocolError(f"frame of {length} bytes does not fit the int32 length field")
    return _PREFIX.pack(length, (int(cmd.serialize_type) << 24) | len(header)) + header


def _encode_json_header(cmd: RemotingCommand) -> bytes:
    for name in ("code", "version", "opaque", "flag"):
        _check_range(name, getattr(cmd, name), _INT32)
    obj: dict[str, Any] = {"code": int(cmd.code), "language": cmd.language.name, "version": int(cmd.version),
                           "opaque": int(cmd.opaque), "flag": int(cmd.flag)}
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    ext = cmd.ext_fields                           # str -> str already when made by create_request/response
    if not all(map(str.__instancecheck__, ext.values())):
        ext = {k: to_ext_str(v) for k, v in ext.items() if v is not None}
    obj["extFields"] = ext
    obj["serializeTypeCurrentRPC"] = "JSON"
    try:
        return orjson.dumps(obj)
    except orjson.JSONEncodeError as exc:          # e.g. a lone surrogate in a string
        raise LocalProtocolError(f"JSON header cannot be encoded: {exc}") from None


def _encode_binary_header(cmd: RemotingCommand) -> bytes:
    _check_range("code", cmd.code, _INT16)
    _check_range("version", cmd.version, _INT16)
    _check_range("opaque", cmd.opaque, _INT32)
    _check_range("flag", cmd.flag, _INT32)
    remark = _utf8_encode(cmd.remark, "remark") if cmd.remark else b""
    ext = _encode_ext_map(cmd.ext_fields)
    return b"".join((_BIN_FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, len(remark)),
                     remark, _LENGTH.pack(len(ext)), ext))


def _encode_ext_map(fields: dict[str, Any]) -> bytes:
    parts = []
    for key, value in fields.items():
        if value is None:
            continue
        k = _utf8_encode(key, "extFields key")
        v = _utf8_encode(to_ext_str(value), f"extFields[{key!r}]")
        if len(k) > _INT16[1]:
            raise LocalProtocolError(f"extFields key of {len(k)} bytes does not fit the int16 length field")
        parts += (_KEY_LEN.pack(len(k)), k, _VAL_LEN.pack(len(v)), v)
    return b"".join(parts)


def _check_range(name: str, value: int, bounds: tuple[int, int]) -> None:
    if not bounds[0] <= value <= bounds[1]:
        raise LocalProtocolError(f"{name} {value} is outside [{bounds[0]}, {bounds[1]}] of the header form")


def _utf8_encode(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LocalProtocolError(f"{what} is not encodable as UTF-8: {exc}") from None


# -- decoding ---------------------------------------------------------------------------------

class FrameDecoder:
    """Bytes in (:meth:`receive_data`), commands out (:meth:`next_command`); never does I/O.

    ``next_command`` returns ``None`` when it needs more bytes.  ``receive_data(b"")`` says the
    peer closed; a partial frame left after that is an error.  Errors are sticky: once a frame is
    malformed the stream cannot be resynchronised, so every later call raises the same error.
    """

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 4 + MIN_FRAME_LENGTH:
            raise ValueError(f"max_frame_bytes {max_frame_bytes} cannot hold the smallest frame")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0              # start of the next frame in _buf
        self._base = 0             # stream offset of _buf[0]
        self._eof = False
        self._error: RemoteProtocolError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as a command."""
        return len(self._buf) - self._pos

    def receive_data(self, data: bytes) -> None:
        if not data:
            self._eof = True
            return
        if self._eof:
            raise RuntimeError("received data after end of stream")
        if self._pos == len(self._buf):
            self._base += self._pos
            self._pos = 0
            self._buf.clear()
        elif self._pos > COMPACT_AFTER_BYTES:
            del self._buf[:self._pos]
            self._base += self._pos
            self._pos = 0
        self._buf += data

    def next_command(self) -> RemotingCommand | None:
        if self._error is not None:
            raise self._error
        try:
            return self._next_command()
        except RemoteProtocolError as exc:
            self._error = exc
            raise

    def _next_command(self) -> RemotingCommand | None:
        buf, pos = self._buf, self._pos
        available = len(buf) - pos
        if available < 4:
            return self._need_more(available)
        (length,) = _LENGTH.unpack_from(buf, pos)
        where = f"frame at stream offset {self._base + pos}"
        self._check_length(length, where)
        if available < 8:
            return self._need_more(available)
        _, field = _PREFIX.unpack_from(buf, pos)
        serialize_type, header_len = field >> 24, field & MAX_HEADER_BYTES
        _check_header_field(serialize_type, header_len, length, where)
        if available < 4 + length:
            return self._need_more(available)
        header_end = pos + 8 + header_len
        header = bytes(buf[pos + 8:header_end])
        body = bytes(buf[header_end:pos + 4 + length])
        self._pos = pos + 4 + length
        cmd = decode_header(header, SerializeType(serialize_type), where=where)
        cmd.body = body
        return cmd

    def _check_length(self, length: int, where: str) -> None:
        if length < MIN_FRAME_LENGTH:
            raise RemoteProtocolError(f"frame length {length} is below the minimum of {MIN_FRAME_LENGTH}", where)
        if length + 4 > self.max_frame_bytes:
            raise RemoteProtocolError(
                f"frame of {length + 4} bytes exceeds the limit of {self.max_frame_bytes} bytes", where)

    def _need_more(self, available: int) -> None:
        if self._eof and available:
            raise RemoteProtocolError(f"connection closed in the middle of a frame ({available} bytes buffered)",
                                      f"frame at stream offset {self._base + self._pos}")
        return None


def _check_header_field(serialize_type: int, header_len: int, length: int, where: str) -> None:
    if serialize_type not in (SerializeType.JSON, SerializeType.ROCKETMQ):
        raise RemoteProtocolError(f"unknown serialize type {serialize_type}", where)
    if header_len > length - 4:
        raise RemoteProtocolError(f"header length {header_len} is larger than the frame's {length - 4} bytes "
                                  "after the header-length field", where)


def decode_header(header: bytes, serialize_type: SerializeType, *, where: str = "header") -> RemotingCommand:
    """A command (empty body) from the header bytes of a frame."""
    if serialize_type == SerializeType.JSON:
        return _decode_json_header(header, f"{where}, JSON header")
    return _decode_binary_header(header, f"{where}, ROCKETMQ header")


def _decode_json_header(header: bytes, where: str) -> RemotingCommand:
    try:
        obj = orjson.loads(header)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RemoteProtocolError(f"header is not valid UTF-8 JSON: {str(exc)[:200]}", where) from None
    if not isinstance(obj, dict):
        raise RemoteProtocolError(f"header is a JSON {type(obj).__name__}, not an object", where)
    if obj.get("code") is None:
        raise RemoteProtocolError("header has no code", where)
    try:
        return _command_from_json(obj, where)
    except RecursionError:
        raise RemoteProtocolError("header nests too deeply", where) from None


def _command_from_json(obj: dict, where: str) -> RemotingCommand:
    return RemotingCommand(
        code=_json_int(obj, "code", where), language=_json_language(obj.get("language")),
        version=_json_int(obj, "version", where), opaque=_json_int(obj, "opaque", where),
        flag=_json_int(obj, "flag", where), remark=_json_remark(obj.get("remark")),
        ext_fields=_json_ext_fields(obj.get("extFields"), where), serialize_type=SerializeType.JSON)


def _json_int(obj: dict, key: str, where: str) -> int:
    raw = obj.get(key)
    if raw.__class__ is int and _INT32[0] <= raw <= _INT32[1]:      # what every client sends
        return raw
    if raw is None:
        return 0
    value = None if isinstance(raw, (bool, dict, list)) else parse_int_value(raw)
    if value is None:
        raise RemoteProtocolError(f"{key} is not an integer: {str(raw)[:40]!r}", where)
    if not _INT32[0] <= value <= _INT32[1]:
        raise RemoteProtocolError(f"{key} {value} is outside int32", where)
    return value


def _json_language(raw: Any) -> LanguageCode:
    if raw is None:
        return LanguageCode.JAVA             # Java's default when the field is absent
    if isinstance(raw, str):
        return _LANGUAGES_BY_NAME.get(raw, LanguageCode.OTHER)
    if isinstance(raw, int) and not isinstance(raw, bool):
        return _LANGUAGES_BY_CODE.get(raw, LanguageCode.OTHER)
    return LanguageCode.OTHER


def _json_text(value: Any) -> str:
    """A JSON value as the string Java would hold: strings as-is, anything else as its JSON text."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=_JSON_SEPARATORS)


def _json_remark(raw: Any) -> str | None:
    return None if raw is None else _json_text(raw)


def _json_ext_fields(raw: Any, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise RemoteProtocolError(f"extFields is a JSON {type(raw).__name__}, not an object", where)
    return {key: value if value.__class__ is str else _json_text(value) for key, value in raw.items()
            if value is not None}


def _decode_binary_header(header: bytes, where: str) -> RemotingCommand:
    size = len(header)
    if size < BINARY_FIXED_HEADER_BYTES:
        raise RemoteProtocolError(f"binary header of {size} bytes is shorter than its fixed "
                                  f"{BINARY_FIXED_HEADER_BYTES}", where)
    code, language, version, opaque, flag, remark_len = _BIN_FIXED.unpack_from(header, 0)
    pos = _BIN_FIXED.size
    remark = None
    if remark_len > 0:                   # Java reads a length <= 0 as "no remark"
        _need(pos + remark_len + 4, size, "remark", where)
        remark = _utf8_decode(header[pos:pos + remark_len], "remark", where)
        pos += remark_len
    (ext_len,) = _LENGTH.unpack_from(header, pos)
    pos += 4
    ext: dict[str, str] = {}
    if ext_len > 0:
        _need(pos + ext_len, size, "extFields", where)
        ext = _decode_ext_map(header[pos:pos + ext_len], where)
    return RemotingCommand(code=code, language=_LANGUAGES_BY_CODE.get(language, LanguageCode.OTHER),
                           version=version, opaque=opaque, flag=flag, remark=remark, ext_fields=ext,
                           serialize_type=SerializeType.ROCKETMQ)


def _decode_ext_map(data: bytes, where: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    pos, size = 0, len(data)
    while pos < size:
        _need(pos + 2, size, "extFields key length", where)
        (key_len,) = _KEY_LEN.unpack_from(data, pos)
        _need(pos + 2 + key_len + 4, size, "extFields key", where)
        key = _utf8_decode(data[pos + 2:pos + 2 + key_len], "extFields key", where)
        pos += 2 + key_len
        (val_len,) = _VAL_LEN.unpack_from(data, pos)
        if val_len < 0:
            raise RemoteProtocolError(f"extFields[{key!r}] has negative length {val_len}", where)
        _need(pos + 4 + val_len, size, f"extFields[{key!r}]", where)
        fields[key] = _utf8_decode(data[pos + 4:pos + 4 + val_len], f"extFields[{key!r}]", where)
        pos += 4 + val_len
    return fields


def _need(end: int, size: int, what: str, where: str) -> None:
    if end > size:
        raise RemoteProtocolError(f"binary header truncated in {what}: needs {end} bytes, has {size}", where)


def _utf8_decode(data: bytes, what: str, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RemoteProtocolError(f"{what} is not valid UTF-8: {exc}", where) from None
