"""RocketMQ 5's gRPC protocol (``apache.rocketmq.v2.MessagingService``) served by the broker itself.

See :mod:`rocketq.grpc_endpoint.endpoint` for the entry point and ``docs/grpc.md`` for what is
served and how it differs from RocketMQ's proxy.
"""

from rocketq.grpc_endpoint.endpoint import GrpcEndpoint
from rocketq.grpc_endpoint.settings import EndpointSettings

__all__ = ["EndpointSettings", "GrpcEndpoint"]
