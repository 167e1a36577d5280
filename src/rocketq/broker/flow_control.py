"""Fast failure for sends (RocketMQ ``BrokerFastFailure``): answer SYSTEM_BUSY at once instead
of letting producers queue behind a broker that cannot keep up.

A send is refused, with RocketMQ's remark prefixes, when

* ``[TIMEOUT_CLEAN_QUEUE]`` - it waited more than ``waitTimeMillsInSendQueue`` (200 ms) between
  arriving on the socket and reaching its handler: the event loop is that far behind;
* ``[TOO_MANY_REQUESTS]`` - ``sendThreadPoolQueueCapacity`` (10,000) sends are already in
  flight (appended and waiting for their flush, or for the store);
* ``[PC_SYNCHRONIZED]`` - the dispatcher is so far behind the CommitLog that the next append
  would have to wait for it (more than ``dispatchBusyRatio`` of its bounded hand-off is used).

The client library retries SYSTEM_BUSY on another broker, as Java's producer does.
"""

from __future__ import annotations

import time

from rocketq.remoting import RemotingCommand, ResponseCode


class FlowControl:
    def __init__(self, store, *, enabled: bool = True, max_wait_in_queue_ms: int = 200,
                 max_inflight_sends: int = 10_000, dispatch_busy_ratio: float = 0.9, clock=time.monotonic):
        self._store = store
        self.enabled = enabled
        self.max_wait_in_queue_ms = max_wait_in_queue_ms
        self.max_inflight_sends = max_inflight_sends
        self.dispatch_busy_ratio = dispatch_busy_ratio
        self._clock = clock
        self.inflight_sends = 0
        self.refused = 0
        self._sending = _Sending(self)

    def check(self, cmd: RemotingCommand) -> RemotingCommand | None:
        """None when the send may go ahead, else the SYSTEM_BUSY answer."""
        if not self.enabled:
            return None
        waited_ms = (self._clock() - cmd.received_at) * 1000 if cmd.received_at else 0.0
        if waited_ms > self.max_wait_in_queue_ms:
            return self._busy(cmd, f"[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, "
                                   f"period in queue: {waited_ms:.0f}ms, size of queue: {self.inflight_sends}")
        if self.inflight_sends >= self.max_inflight_sends:
            return self._busy(cmd, f"[TOO_MANY_REQUESTS]broker busy, start flow control for a while, "
                                   f"{self.inflight_sends} sends in flight")
        lag, limit = self._store.dispatch_backlog()
        if lag > limit * self.dispatch_busy_ratio:
            return self._busy(cmd, f"[PC_SYNCHRONIZED]broker busy, start flow control for a while, "
                                   f"dispatch is {lag} messages behind")
        return None

    def sending(self) -> "_Sending":
        """``with flow_control.sending(): ...`` counts a send in flight (one object, reused,
        where ``contextlib.contextmanager`` made a generator and a wrapper per send)."""
        return self._sending

    def _busy(self, cmd: RemotingCommand, remark: str) -> RemotingCommand:
        self.refused += 1
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_BUSY, remark)


class _Sending:
    """The context manager :meth:`FlowControl.sending` returns."""

    __slots__ = ("_flow",)

    def __init__(self, flow: FlowControl):
        self._flow = flow

    def __enter__(self) -> None:
        self._flow.inflight_sends += 1

    def __exit__(self, *exc) -> None:
        self._flow.inflight_sends -= 1
