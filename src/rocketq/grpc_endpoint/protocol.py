"""The v2 protocol types (``apache.rocketmq.v2``) and small helpers shared by the handlers.

The generated protobuf and gRPC modules come from the official Python client
(``rocketmq-python-client``, package ``rocketmq.grpc_protocol``), so the server and the clients
it is tested with read the very same descriptors.  Application errors travel inside the
response's ``Status`` (the gRPC transport status stays OK), as RocketMQ's proxy answers;
:class:`V2Error` carries one from deep inside a handler to the place that builds the response.
"""

from __future__ import annotations

from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as spb
from rocketmq.grpc_protocol import service_pb2_grpc as spb_grpc

Code = pb.Code
SERVICE_NAME = "apache.rocketmq.v2.MessagingService"

__all__ = ["Code", "Duration", "Timestamp", "V2Error", "duration_ms", "ms_duration", "ms_timestamp", "pb", "spb",
           "spb_grpc", "status", "timestamp_ms"]


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
