"""Send-latency fault tolerance: the producer keeps away from a broker that failed or answers slowly.

Theory of operation
-------------------
RocketMQ's producer with ``sendLatencyFaultEnable`` (``MQFaultStrategy`` + ``LatencyFaultToleranceImpl``)
records, per broker name, the latency of each send; a slow answer makes the broker "not available"
for a while, a failure (connection refused, timeout, no master in the route) for longer.  Queue
selection then prefers the queues of available brokers and falls back to plain round robin when
every broker is marked, so a cluster whose groups are all down is still tried.

The steps are RocketMQ 5's (``MQFaultStrategy``): latency at least 50, 100, 550, 1800, 3000, 5000,
15000 ms makes the broker unavailable for 0, 0, 2, 5, 6, 10, 30 s; a failure counts as
``ISOLATION_LATENCY_MS`` (10 s of avoidance).  RocketMQ 5 also probes isolated brokers in the
background to bring them back early; rocketq does not probe: an isolated broker is tried again when
its time is up (or when no other broker is left), which bounds the extra wait to the 10 s step.

One :class:`LatencyFaults` per producer, used from its event loop only; the table holds one entry
per broker name the producer ever sent to.
"""

from __future__ import annotations

import time

LATENCY_STEPS_MS = (50, 100, 550, 1800, 3000, 5000, 15000)
UNAVAILABLE_FOR_MS = (0, 0, 2000, 5000, 6000, 10000, 30000)
ISOLATION_LATENCY_MS = 10_000          # what a failed send counts as (RocketMQ 5: isolation -> 10 s)


def unavailable_for_ms(latency_ms: float) -> int:
    for step, pause in zip(reversed(LATENCY_STEPS_MS), reversed(UNAVAILABLE_FOR_MS)):
        if latency_ms >= step:
            return pause
    return 0


class LatencyFaults:
    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._until: dict[str, float] = {}          # broker name -> monotonic time it is available again

    def update(self, broker: str, latency_ms: float, *, failed: bool = False) -> None:
        pause_ms = unavailable_for_ms(ISOLATION_LATENCY_MS if failed else latency_ms)
        if pause_ms:
            self._until[broker] = self._clock() + pause_ms / 1000
        else:
            self._until.pop(broker, None)

    def available(self, broker: str) -> bool:
        until = self._until.get(broker)
        if until is None:
            return True
        if self._clock() >= until:
            del self._until[broker]
            return True
        return False

    def unavailable(self) -> dict[str, float]:
        """Broker name -> seconds left, for logs and tests."""
        now = self._clock()
        return {b: round(t - now, 3) for b, t in self._until.items() if t > now}
