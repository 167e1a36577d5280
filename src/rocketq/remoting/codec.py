"""Sans-IO codec of the remoting protocol: commands to frames and back, no sockets.

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

The work is native (``native/src/frame.rs``): :class:`FrameDecoder` hands its buffer to
:func:`rocketq._native.decode_frames`, which splits every whole frame and decodes its header in one
call, and :func:`encode_header` is one call too.  The pure-Python codec this replaced is the
reference the native one is tested against (``tests/native/reference_codec.py``).

What we accept, leniently (:func:`decode_header`): ``language`` as a name or a number (unknown ->
OTHER), missing ``version``/``opaque``/``flag``/``remark``/``extFields``, integers sent as strings,
extFields values of any JSON type (scalars become Java-style strings, nulls are dropped).  What
we reject with :class:`RemoteProtocolError`: bad UTF-8 or JSON, a header that is not an object, a
missing or non-integer ``code``, integers outside int32, a truncated binary header.
"""

from __future__ import annotations

from collections import deque

from rocketq import _native
from rocketq.remoting.codes import LanguageCode, SerializeType
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.errors import LocalProtocolError, RemoteProtocolError

DEFAULT_MAX_FRAME_BYTES = 16 * 1024 * 1024
MAX_HEADER_BYTES = 0xFFFFFF
MIN_FRAME_LENGTH = 4                     # the length field's value: just the header-length field
COMPACT_AFTER_BYTES = 64 * 1024          # consumed bytes kept in the buffer before it is compacted

_LANGUAGES = tuple(LanguageCode)
_SERIALIZE = tuple(SerializeType)


# -- encoding ---------------------------------------------------------------------------------

def encode(cmd: RemotingCommand) -> bytes:
    """The whole frame of *cmd*."""
    head = encode_header(cmd)
    return head + bytes(cmd.body) if cmd.body else head


def encode_header(cmd: RemotingCommand) -> bytes:
    """Length prefix, header-length field and header of *cmd*'s frame: everything but the body,
    so a transport can write a large body without copying it into one buffer."""
    try:
        return _native.encode_frame_header(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark,
                                           cmd.ext_fields, cmd.serialize_type, len(cmd.body))
    except ValueError as exc:
        raise LocalProtocolError(str(exc)) from None


# -- decoding ---------------------------------------------------------------------------------

def _command(t: tuple) -> RemotingCommand:
    code, language, version, opaque, flag, remark, ext, serialize_type, body = t
    return RemotingCommand(code, _LANGUAGES[language], version, opaque, flag, remark, ext, body,
                           _SERIALIZE[serialize_type])


def closed_mid_frame(partial: int, at: int) -> RemoteProtocolError:
    """The error of a connection that ended *partial* bytes into the frame at stream offset *at*."""
    return RemoteProtocolError(f"connection closed in the middle of a frame ({partial} bytes buffered)",
                               f"frame at stream offset {at}")


class FrameDecoder:
    """Bytes in (:meth:`receive_data`), commands out (:meth:`next_command`); never does I/O.

    ``next_command`` returns ``None`` when it needs more bytes.  ``receive_data(b"")`` says the
    peer closed; a partial frame left after that is an error.  Errors are sticky: once a frame is
    malformed the stream cannot be resynchronised, so every later call raises the same error (the
    frames before it are returned first).
    """

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes < 4 + MIN_FRAME_LENGTH:
            raise ValueError(f"max_frame_bytes {max_frame_bytes} cannot hold the smallest frame")
        self.max_frame_bytes = max_frame_bytes
        self._buf = bytearray()
        self._pos = 0              # start of the next frame in _buf
        self._base = 0             # stream offset of _buf[0]
        self._eof = False
        self._ready: deque[tuple] = deque()
        self._scanned = False      # no bytes came since the buffer was last split into frames
        self._bad: RemoteProtocolError | None = None    # found after the frames in _ready
        self._error: RemoteProtocolError | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as a command (whole frames decoded ahead included)."""
        return len(self._buf) - self._pos + sum(len(t[8]) for t in self._ready)

    def receive_data(self, data: bytes) -> None:
        if not data:
            self._eof = True
            return
        if self._eof:
            raise RuntimeError("received data after end of stream")
        self._scanned = False
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
        if not self._ready and self._bad is None and not self._scanned:
            self._decode()              # once per arrival: what is left after it is a partial frame
        if self._ready:
            return _command(self._ready.popleft())
        if self._bad is not None:
            self._error = self._bad
            raise self._error
        available = len(self._buf) - self._pos
        if self._eof and available:
            self._error = closed_mid_frame(available, self._base + self._pos)
            raise self._error
        return None

    def _decode(self) -> None:
        """Every whole frame in the buffer, in one native call."""
        frames, pos, error = _native.decode_frames(self._buf, self._pos, self._base + self._pos, self.max_frame_bytes)
        self._ready.extend(frames)
        self._pos = pos
        self._scanned = True
        if error is not None:
            offset, reason, part = error
            self._bad = RemoteProtocolError(reason, f"frame at stream offset {offset}" + (f", {part}" if part else ""))


def decode_header(header: bytes, serialize_type: SerializeType, *, where: str = "header") -> RemotingCommand:
    """A command (empty body) from the header bytes of a frame."""
    frame = (4 + len(header)).to_bytes(4, "big") + ((int(serialize_type) << 24) | len(header)).to_bytes(4, "big")
    frames, _pos, error = _native.decode_frames(frame + header, 0, 0, len(frame) + len(header))
    if error is not None:
        _offset, reason, part = error
        raise RemoteProtocolError(reason, f"{where}, {part}" if part else where)
    return _command(frames[0])
