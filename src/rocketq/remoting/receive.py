"""Receiving frames without copying their bodies: the socket reads into the buffers the frames end in.

:class:`~rocketq.remoting.connection.RemotingConnection` takes each read as a new ``bytes``, appends
it to its decoder's buffer and slices every body out of that: a body is copied twice after the
kernel's copy.  For a reader of large answers (the Spark topic source pulls up to ~1 MB a time) those
copies were a third of its receive path.  :class:`BufferedRemotingConnection` is the same connection
as an :class:`asyncio.BufferedProtocol`: the transport reads into the buffer :class:`FrameReceiver`
offers, and a frame whose body is ``BIG_BODY_BYTES`` or more gets a ``bytearray`` of its own for the
body as soon as its header is in, which the socket then fills.  Such a body reaches the command as
that ``bytearray`` (a bytes-like object: ``len``, slicing, ``bytes()``, the buffer protocol, ``==``);
smaller frames are decoded from the staging buffer as :class:`~rocketq.remoting.codec.FrameDecoder`
decodes them, bodies as ``bytes``.

The framing checks, the errors and their stickiness are :class:`FrameDecoder`'s: whole frames are
split by the same native call, and a frame is diverted to its own body buffer only once that call
has checked its length and header-length fields.  Use it where the answers' consumers take any
bytes-like body (:class:`BufferedRemotingClient`).
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque

from rocketq import _native
from rocketq.remoting.codec import (DEFAULT_MAX_FRAME_BYTES, MIN_FRAME_LENGTH, _command, closed_mid_frame,
                                   decode_header)
from rocketq.remoting.codes import SerializeType
from rocketq.remoting.command import RemotingCommand
from rocketq.remoting.connection import RemotingConnection
from rocketq.remoting.errors import RemoteProtocolError
from rocketq.remoting.transport import RemotingClient

BIG_BODY_BYTES = 32 * 1024          # bodies this large are read into their own buffer
SPARE_BODY_BYTES = 64 << 20         # bodies given back (BodyPool.give) kept for reuse, at most
STAGE_BYTES = 64 * 1024             # the staging buffer's size (it grows for a larger small frame)
MIN_READ_BYTES = 4096               # room offered to a read at least: below it, the stage is compacted first


class BodyPool:
    """Body buffers a consumer is done with, reused for the next large bodies (any thread).

    A body a consumer drops is freed, and the allocator hands the freed heap back to the system
    when a chunk of them goes at once; the next bodies then fault in fresh pages (~13 faults a
    1,024-message pull, more kernel time than the copies this module saves).  A consumer that
    decodes bodies and keeps nothing of them gives them back instead (:meth:`give`)."""

    def __init__(self, max_bytes: int = SPARE_BODY_BYTES) -> None:
        self._spare: deque[bytearray] = deque()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._lock = threading.Lock()

    def take(self, size: int) -> bytearray:
        """A buffer of *size* bytes (its content undefined)."""
        with self._lock:
            body = self._spare.pop() if self._spare else None
            if body is not None:
                self._bytes -= len(body)
        if body is None:
            return bytearray(size)
        if len(body) > size:
            del body[size:]                # within its allocation: no copy
        elif len(body) < size:
            body.extend(bytes(size - len(body)))
        return body

    def give(self, bodies) -> None:
        """Bodies nothing refers to any more (the caller's own references dropped after this);
        only ``bytearray`` ones are kept."""
        with self._lock:
            for body in bodies:
                if type(body) is bytearray and self._bytes + len(body) <= self._max_bytes:
                    self._spare.append(body)
                    self._bytes += len(body)


BODIES = BodyPool()


class FrameReceiver:
    """:class:`FrameDecoder`'s interface (``next_command``, ``receive_data(b"")`` at the end,
    ``buffered_bytes``) fed through a buffer: :meth:`get_buffer` is where the next bytes go,
    :meth:`buffer_updated` says how many came."""

    def __init__(self, *, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES, bodies: BodyPool = BODIES) -> None:
        if max_frame_bytes < 4 + MIN_FRAME_LENGTH:
            raise ValueError(f"max_frame_bytes {max_frame_bytes} cannot hold the smallest frame")
        self.max_frame_bytes = max_frame_bytes
        self._bodies = bodies
        self._stage = bytearray(STAGE_BYTES)
        self._start = self._end = 0       # undecoded bytes are _stage[_start:_end]
        self._base = 0                    # stream offset of _stage[0]
        self._head: RemotingCommand | None = None   # the frame whose body is being read, but for its body
        self._head_at = self._head_bytes = 0         # its stream offset, its bytes before the body
        self._body = bytearray()
        self._got = 0                     # bytes of _body read so far
        self._ready: deque[RemotingCommand] = deque()
        self._eof = False
        self._error: RemoteProtocolError | None = None   # raised after the frames before it

    @property
    def buffered_bytes(self) -> int:
        return self._end - self._start + self._got + sum(len(cmd.body) for cmd in self._ready)

    def get_buffer(self) -> memoryview:
        if self._head is not None:
            return memoryview(self._body)[self._got:]
        if len(self._stage) - self._end < MIN_READ_BYTES:
            self._make_room()
        return memoryview(self._stage)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._head is not None:
            self._got += nbytes
            if self._got == len(self._body):
                self._ready.append(self._with_body())
            return
        self._end += nbytes
        self._split()

    def receive_data(self, data: bytes) -> None:
        """Bytes a loop read itself (``b""``: the end of the stream), copied into the buffers as a read
        into them would have been.  uvloop feeds a protocol that is also an ``asyncio.Protocol`` (as
        :class:`BufferedRemotingConnection` is) this way, never through :meth:`get_buffer`."""
        if not data:
            self._eof = True
            return
        view = memoryview(data)
        while view:
            room = self.get_buffer()
            n = min(len(room), len(view))
            room[:n] = view[:n]
            view = view[n:]
            self.buffer_updated(n)

    def next_command(self) -> RemotingCommand | None:
        if self._ready:
            return self._ready.popleft()
        if self._error is not None:
            raise self._error
        if self._head is not None:
            at, partial = self._head_at, self._head_bytes + self._got
        else:
            at, partial = self._base + self._start, self._end - self._start
        if self._eof and partial:
            self._error = closed_mid_frame(partial, at)
            raise self._error
        return None

    def _split(self) -> None:
        """Decode the whole frames staged; divert a large body's frame to its own buffer."""
        if self._error is not None:
            return
        frames, pos, error = _native.decode_frames(memoryview(self._stage)[:self._end], self._start,
                                                   self._base + self._start, self.max_frame_bytes)
        self._ready.extend(_command(t) for t in frames)
        self._start = pos
        if pos == self._end:                        # nothing partial: the stage starts over
            self._base += pos
            self._start = self._end = 0
        if error is not None:
            offset, reason, part = error
            self._error = RemoteProtocolError(reason, f"frame at stream offset {offset}" + (f", {part}" if part else ""))
            return
        if self._end - self._start >= 8:            # a partial frame, its two length fields checked
            self._divert()

    def _divert(self) -> None:
        start, stage = self._start, self._stage
        length = int.from_bytes(stage[start:start + 4], "big")
        field = int.from_bytes(stage[start + 4:start + 8], "big")
        header_len = field & 0xFFFFFF
        body_len = length - 4 - header_len
        body_at = start + 8 + header_len
        if body_len < BIG_BODY_BYTES or self._end < body_at:
            return
        try:
            head = decode_header(bytes(stage[start + 8:body_at]), SerializeType(field >> 24),
                                 where=f"frame at stream offset {self._base + start}")
        except RemoteProtocolError as exc:
            self._error = exc
            return
        self._head, self._body = head, self._bodies.take(body_len)
        self._head_at, self._head_bytes = self._base + start, 8 + header_len
        self._got = self._end - body_at
        self._body[:self._got] = memoryview(stage)[body_at:self._end]
        self._base += body_at + body_len           # the stage goes on after this frame
        self._start = self._end = 0

    def _with_body(self) -> RemotingCommand:
        cmd, self._head = self._head, None
        cmd.body, self._body, self._got = self._body, bytearray(), 0
        return cmd

    def _make_room(self) -> None:
        """Little room is left: move the partial frame to the stage's start, or, when it starts
        there already, double the stage (a frame larger than it: a long header, a body just below
        ``BIG_BODY_BYTES``)."""
        start, end = self._start, self._end
        if start:
            self._stage[:end - start] = memoryview(self._stage)[start:end]
            self._base += start
            self._start, self._end = 0, end - start
        else:
            self._stage.extend(bytes(len(self._stage)))


class BufferedRemotingConnection(RemotingConnection, asyncio.BufferedProtocol):
    """:class:`RemotingConnection` reading through a :class:`FrameReceiver` (see the module notes).
    asyncio's loop reads into :meth:`get_buffer`; uvloop takes any ``asyncio.Protocol`` for a plain
    one and calls ``data_received``, which the receiver copies in (the same frames, one copy more)."""

    def __init__(self, handler, **kwargs) -> None:
        super().__init__(handler, **kwargs)
        self._decoder = FrameReceiver(max_frame_bytes=self._max_frame_bytes)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._decoder.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._decoder.buffer_updated(nbytes)
        self._frames_arrived()


class BufferedRemotingClient(RemotingClient):
    """:class:`RemotingClient` whose connections are :class:`BufferedRemotingConnection`: large
    answer bodies arrive as ``bytearray`` objects read straight from the socket."""

    def _new_connection(self) -> RemotingConnection:
        return BufferedRemotingConnection(self._handler, max_frame_bytes=self._max_frame_bytes,
                                          max_inflight=self._max_inflight, max_pending=self._max_pending,
                                          next_opaque=self._opaques)
