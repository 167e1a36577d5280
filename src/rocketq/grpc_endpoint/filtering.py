"""A v2 ``FilterExpression`` (TAG or SQL) as a :class:`rocketq.filter.Subscription`.

Shared by ReceiveMessage, PullMessage and the Telemetry settings of a consumer (where RocketMQ's
proxy checks a subscription's expression too, ``ClientActivity#buildSubscriptionData``): a bad
SQL92 selector is ILLEGAL_FILTER_EXPRESSION naming its position; SQL92 on a broker without
``enablePropertyFilter`` is NOT_IMPLEMENTED with RocketMQ's remark.
"""

from __future__ import annotations

from rocketq.broker.pull import property_filter_refusal
from rocketq.filter import SQL92, TAG, FilterError, Subscription, subscription
from rocketq.grpc_endpoint.protocol import Code, V2Error, pb


def grpc_filter(broker, expression) -> Subscription | None:
    """A v2 FilterExpression (TAG or SQL) as a subscription; see :meth:`ConsumerService.filter_of`."""
    if expression.type == pb.FilterType.SQL:
        if not broker.settings.enable_property_filter:
            raise V2Error(Code.NOT_IMPLEMENTED, property_filter_refusal(SQL92))
        try:
            return subscription(expression.expression, SQL92)
        except FilterError as exc:
            raise V2Error(Code.ILLEGAL_FILTER_EXPRESSION, str(exc)) from None
    sub = subscription(expression.expression, TAG)
    return None if sub.is_all else sub
