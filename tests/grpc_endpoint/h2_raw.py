"""A bare HTTP/2 client for hostile-input tests of the native gRPC transport: it writes the frames a
test asks for (any window, any number of streams, any bytes) and answers pings when told to, which no
real client library lets a test do.  Headers are HPACK literals without Huffman coding; frames the
server sends are split, not decoded (their HPACK is not needed by the tests)."""

from __future__ import annotations

import socket
import struct
import threading

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY = 0, 1, 3, 4, 6, 7
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
SETTINGS_INITIAL_WINDOW_SIZE = 0x4


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def _literal(name: bytes, value: bytes) -> bytes:
    assert len(name) < 127 and len(value) < 127
    return b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value


def request_headers(path: str, content_type: str = "application/grpc") -> bytes:
    fields = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", path.encode()), (b":authority", b"test"),
              (b"content-type", content_type.encode()), (b"te", b"trailers"), (b"x-mq-client-id", b"raw-h2")]
    return b"".join(_literal(k, v) for k, v in fields)


def grpc_message(body: bytes, flag: int = 0) -> bytes:
    return bytes([flag]) + struct.pack(">I", len(body)) + body


class RawH2:
    """One connection; ``frames`` collects (type, flags, stream) of what the server sent."""

    def __init__(self, port: int, *, window: int | None = None, answer_pings: bool = True):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        settings = b"" if window is None else struct.pack(">HI", SETTINGS_INITIAL_WINDOW_SIZE, window)
        try:
            self.sock.sendall(PREFACE + frame(SETTINGS, 0, 0, settings))
        except OSError:
            pass                                # closed at once (a connection past the limit): the reader sees it
        self.answer_pings = answer_pings
        self.frames: list[tuple[int, int, int]] = []
        self.closed = threading.Event()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def send(self, data: bytes) -> None:
        with self._lock:
            self.sock.sendall(data)

    def call(self, stream: int, path: str, body: bytes | None, *, end: bool = True) -> None:
        """HEADERS on *stream*, then *body* as one gRPC message (when given) ending the request."""
        self.send(frame(HEADERS, END_HEADERS | (END_STREAM if body is None and end else 0), stream,
                        request_headers(path)))
        if body is not None:
            self.send(frame(DATA, END_STREAM if end else 0, stream, grpc_message(body)))

    def ended(self, stream: int) -> bool:
        """Whether the server ended *stream* (trailers with END_STREAM, or RST_STREAM)."""
        return any(s == stream and (k == RST_STREAM or (k in (HEADERS, DATA) and f & END_STREAM))
                   for k, f, s in list(self.frames))

    def _read(self) -> None:
        buf = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                buf += chunk
                while len(buf) >= 9:
                    length = int.from_bytes(buf[:3], "big")
                    if len(buf) < 9 + length:
                        break
                    kind, flags, stream = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7FFFFFFF
                    payload, buf = buf[9:9 + length], buf[9 + length:]
                    self.frames.append((kind, flags, stream))
                    if kind == PING and not flags & ACK and self.answer_pings:
                        self.send(frame(PING, ACK, 0, payload))
                    elif kind == SETTINGS and not flags & ACK:
                        self.send(frame(SETTINGS, ACK, 0))
        except OSError:
            pass
        finally:
            self.closed.set()

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
