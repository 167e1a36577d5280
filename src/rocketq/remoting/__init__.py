"""The RocketMQ remoting protocol: codes, commands, a sans-IO frame codec and an asyncio transport.

* :mod:`~rocketq.remoting.codes` — request/response codes, languages, serialize types, flag bits.
* :mod:`~rocketq.remoting.command` — :class:`RemotingCommand` with lenient typed header accessors.
* :mod:`~rocketq.remoting.codec` — ``encode`` and :class:`FrameDecoder` (no I/O; fuzzed).
* :mod:`~rocketq.remoting.connection` — one connection, either side: request/response matching by
  opaque, in-flight limits, back-pressure.
* :mod:`~rocketq.remoting.transport` — :class:`RemotingServer` and :class:`RemotingClient`.
* :mod:`~rocketq.remoting.limits` — what one client can make a server hold: connections, idle
  time, the listen backlog, queued answers (back-pressure), descriptors.
"""

from rocketq.remoting.codec import DEFAULT_MAX_FRAME_BYTES, FrameDecoder, decode_header, encode, encode_header
from rocketq.remoting.codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    CommandFlag,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from rocketq.remoting.command import (
    RemotingCommand,
    busy_response,
    error_response,
    normalize_ext_fields,
    not_supported_response,
    to_ext_str,
)
from rocketq.remoting.connection import OpaqueCounter, RemotingConnection
from rocketq.remoting.errors import (
    LocalProtocolError,
    RemoteProtocolError,
    RemotingCommandError,
    RemotingConnectError,
    RemotingConnectionClosedError,
    RemotingError,
    RemotingProtocolError,
    RemotingTimeoutError,
    RemotingTooManyRequestsError,
)
from rocketq.remoting.transport import RemotingClient, RemotingServer

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES", "FLAG_ONEWAY", "FLAG_RESPONSE", "CommandFlag", "FrameDecoder", "LanguageCode",
    "LocalProtocolError", "OpaqueCounter", "RemoteProtocolError", "RemotingClient", "RemotingCommand",
    "RemotingCommandError", "RemotingConnectError", "RemotingConnection", "RemotingConnectionClosedError",
    "RemotingError", "RemotingProtocolError", "RemotingServer", "RemotingTimeoutError",
    "RemotingTooManyRequestsError", "RequestCode", "ResponseCode", "SerializeType", "busy_response",
    "decode_header", "encode", "encode_header", "error_response", "normalize_ext_fields",
    "not_supported_response", "to_ext_str",
]
