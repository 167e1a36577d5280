"""The v2 protocol types (``apache.rocketmq.v2``) and small helpers shared by the handlers.

The generated protobuf and gRPC modules come from the official Python client
(``rocketmq-python-client``, package ``rocketmq.grpc_protocol``), so the server and the clients
it is tested with read the very same descriptors.  Application errors travel inside the
response's ``Status`` (the gRPC transport status stays OK), as RocketMQ's proxy answers;
:class:`V2Error` carries one from deep inside a handler to the place that builds the response.
"""

from __future__ import annotations

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import DecodeError
from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as spb_grpc

Code = pb.Code
SERVICE_NAME = "apache.rocketmq.v2.MessagingService"
_KINDS = {(False, False): grpc.unary_unary_rpc_method_handler, (False, True): grpc.unary_stream_rpc_method_handler,
          (True, False): grpc.stream_unary_rpc_method_handler, (True, True): grpc.stream_stream_rpc_method_handler}

__all__ = [
    "Code",
    "Duration",
    "Malformed",
    "Timestamp",
    "V2Error",
    "duration_ms",
    "method_handlers",
    "ms_duration",
    "ms_timestamp",
    "pb",
    "service_handlers",
    "spb",
    "spb_grpc",
    "status",
    "timestamp_ms",
]


class V2Error(Exception):
    """A request the endpoint refuses: a v2 status code and a one-line reason naming what and where."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def to_status(self) -> pb.Status:
        return status(self.code, self.message)


def status(code: int = Code.OK, message: str = "OK") -> pb.Status:
    return pb.Status(code=code, message=message)


def ms_timestamp(ms: int) -> Timestamp:
    return Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def timestamp_ms(ts: Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def ms_duration(ms: int) -> Duration:
    return Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def duration_ms(d: Duration) -> int:
    return d.seconds * 1000 + d.nanos // 1_000_000


class Malformed:
    """What a request that does not parse becomes, so the handler can answer BAD_REQUEST in the
    v2 way instead of grpc failing the call with UNKNOWN."""

    def __init__(self, type_name: str, error: str):
        self.type_name, self.error = type_name, error

    @staticmethod
    def check(req) -> None:
        if isinstance(req, Malformed):
            raise V2Error(Code.BAD_REQUEST, f"the request is not a valid {req.type_name}: {req.error}")


def _parser(cls):
    def parse(data: bytes):
        try:
            return cls.FromString(data)
        except DecodeError as exc:
            return Malformed(cls.__name__, str(exc))
    return parse


def method_handlers(servicer) -> dict[str, grpc.RpcMethodHandler]:
    """Full method path -> handler for the MessagingService methods of *servicer*, each request
    parsed leniently (see Malformed); both transports serve this one table."""
    handlers = {}
    for method in spb.DESCRIPTOR.services_by_name["MessagingService"].methods:
        req_cls, resp_cls = getattr(spb, method.input_type.name), getattr(spb, method.output_type.name)
        make = _KINDS[(method.client_streaming, method.server_streaming)]
        handlers[f"/{SERVICE_NAME}/{method.name}"] = make(getattr(servicer, method.name),
                                                          request_deserializer=_parser(req_cls),
                                                          response_serializer=resp_cls.SerializeToString)
    return handlers


def service_handlers(servicer) -> grpc.GenericRpcHandler:
    """:func:`method_handlers` as grpc.aio's generic handler."""
    prefix = f"/{SERVICE_NAME}/"
    return grpc.method_handlers_generic_handler(
        SERVICE_NAME, {path.removeprefix(prefix): h for path, h in method_handlers(servicer).items()})
