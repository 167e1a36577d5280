"""The endpoint's own limits, validated once (RocketMQ ``ProxyConfig`` names in comments).

The timer's settings (``timerWheelEnable``, ``timerMaxDelaySec``, the bucket width) are the
broker's (:class:`rocketq.broker.broker.BrokerSettings`): the timer runs with the endpoint off too.
"""

from __future__ import annotations

from dataclasses import dataclass

HOUR_MS = 3_600_000
MIB = 1 << 20


@dataclass(frozen=True)
class EndpointSettings:
    min_invisible_ms: int = 10_000               # minInvisibleTimeMillsForRecv: ReceiveMessage only
    max_invisible_ms: int = 12 * HOUR_MS         # maxInvisibleTimeMills: receives and ChangeInvisibleDuration
    default_invisible_ms: int = 60_000           # defaultInvisibleTimeMills (auto-renewing push receives)
    default_long_polling_ms: int = 20_000        # grpcClientConsumerLongPollingTimeoutMillis
    max_long_polling_ms: int = 30_000
    max_receive_batch: int = 32
    receive_batch_default: int = 32              # what settings tell push consumers
    max_delay_ms: int = 40 * 24 * HOUR_MS        # maxDelayTimeMills: a DELAY message at most this far ahead
    clear_invisible_ms: int = 1_000              # invisibleTimeMillisWhenClear: a gone client's auto-renew messages
    #                                              come back this soon
    client_silent_s: float = 30.0                # a client with no Telemetry stream and no call this long is gone
    session_expire_s: float = 120.0              # ... and this long: forgotten
    outbox_capacity: int = 256                   # commands queued for one client's Telemetry stream
    max_messages_per_send: int = 64
    # grpcMaxInboundMessageSize: a request up to this size is read and answered in the protocol (an oversized
    # body with MESSAGE_BODY_TOO_LARGE); a larger one fails at the transport (RESOURCE_EXHAUSTED)
    max_inbound_message_bytes: int = 130 * MIB
    # calls grpc holds that the server has not picked up yet; grpc's own default (1,000, random early drops up to
    # 3,000) cancelled sends of a 4 x 1,000 send_async burst while the event loop was busy
    max_pending_calls: int = 50_000

    def __post_init__(self) -> None:
        if not 0 < self.min_invisible_ms <= self.max_invisible_ms:
            raise ValueError(f"invisible time bounds {self.min_invisible_ms}..{self.max_invisible_ms} ms are not "
                             "0 < min <= max")
        # like the proxy's defaultInvisibleTimeMills, the auto-renew time is not held to the receive minimum
        if not 0 < self.default_invisible_ms <= self.max_invisible_ms:
            raise ValueError(f"default invisible time {self.default_invisible_ms} ms is outside "
                             f"1..{self.max_invisible_ms}")
        if self.clear_invisible_ms < 0 or not 0 < self.client_silent_s <= self.session_expire_s:
            raise ValueError(f"clear_invisible_ms {self.clear_invisible_ms} must not be negative and client_silent_s "
                             f"{self.client_silent_s} must be in (0, session_expire_s {self.session_expire_s}]")
        if self.max_pending_calls < 1:
            raise ValueError(f"max_pending_calls {self.max_pending_calls} is not positive")
        if self.max_inbound_message_bytes < MIB:
            raise ValueError(f"max_inbound_message_bytes {self.max_inbound_message_bytes} is under 1 MiB")
        if self.max_receive_batch < 1 or self.outbox_capacity < 1 or self.max_delay_ms < 1:
            raise ValueError("max_receive_batch, outbox_capacity and max_delay_ms must be positive")
