"""CHECK_CLIENT_CONFIG (46): may this consumer's subscription be served here?

A Java consumer whose subscription is not a tag expression asks every broker of its topic at
start (``MQClientInstance.checkClientInBroker``) and refuses to start on any answer but SUCCESS,
so this is what lets a ``MessageSelector.bySql(...)`` consumer start.  Body
(``CheckClientRequestBody``): ``{"clientId", "group", "subscriptionData": {"topic", "subString",
"expressionType", ...}}``.  Answers, as RocketMQ's ``ClientManageProcessor.checkClientConfig``:

* a tag subscription (or none): SUCCESS;
* SQL92 on a broker with ``enablePropertyFilter=false``: SYSTEM_ERROR "The broker does not
  support consumer to filter message by SQL92";
* an expression that does not parse: SUBSCRIPTION_PARSE_FAILED with the reason and position.
"""

from __future__ import annotations

from rocketq.broker.admin import ok
from rocketq.broker.pull import property_filter_refusal
from rocketq.common import fastjson
from rocketq.filter import FilterError, is_tag_type, subscription
from rocketq.remoting import RemotingCommand, ResponseCode


async def check_client_config(broker, conn, cmd: RemotingCommand) -> RemotingCommand:
    try:
        body = fastjson.loads(cmd.body or b"{}")
    except (ValueError, UnicodeDecodeError) as exc:
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, f"CheckClientRequestBody is not JSON: "
                                                                              f"{exc}")
    data = body.get("subscriptionData") if isinstance(body, dict) else None
    if not isinstance(data, dict):
        return ok(cmd)
    expression_type = data.get("expressionType")
    if is_tag_type(expression_type):
        return ok(cmd)
    if not broker.settings.enable_property_filter:
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, property_filter_refusal(
            str(expression_type)))
    try:
        subscription(str(data.get("subString") or ""), str(expression_type))
    except FilterError as exc:
        return RemotingCommand.create_response(cmd, ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
    return ok(cmd)
