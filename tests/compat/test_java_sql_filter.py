"""The Java push consumer with an SQL92 subscription (``MessageSelector.bySql``) against rocketq with
``enablePropertyFilter`` turned on at run time (UPDATE_BROKER_CONFIG), as an operator would do it.

The consumer starts (CHECK_CLIENT_CONFIG accepts the expression), its pulls carry the expression and
the broker filters on the message properties and TAGS: exactly the matching messages arrive, each
once (Java sends an SQL92 pull only to a broker whose responses carry version >= V4_1_0_SNAPSHOT,
which rocketq did not until this test).  Messages are sent by rocketq's own client with user properties; half of them lack the
property the expression tests, so NULL semantics are part of what is checked.  The filter is turned
off again afterwards (the session's other modules expect RocketMQ's default).
"""

from __future__ import annotations

import pytest

import reader
from checks import body
from rocketq.client import Message
from rocketq.client.sync import Admin, Producer

pytestmark = pytest.mark.timeout(900)

MESSAGES = 60
EXPRESSION = "(a BETWEEN 10 AND 39 AND TAGS = 'TagA') OR b IS NOT NULL"


def _matches(i: int) -> bool:
    """EXPRESSION for message *i*: property a = i on even messages only, b on every tenth, TagA on i % 3 == 0."""
    a = i if i % 2 == 0 else None
    tag = "TagA" if i % 3 == 0 else "TagB"
    return (a is not None and 10 <= a <= 39 and tag == "TagA") or i % 10 == 0


def _message(topic: str, i: int) -> Message:
    props = {"seq": str(i)}
    if i % 2 == 0:
        props["a"] = str(i)
    if i % 10 == 0:
        props["b"] = "x"
    return Message(topic, f"sql-{i}".encode(), tags="TagA" if i % 3 == 0 else "TagB", keys=[f"k{i}"],
                   properties=props)


def _set_property_filter(compat_server, on: bool) -> None:
    """UPDATE_BROKER_CONFIG (rocketq's admin client: mqadmin's JVM start under a loaded machine is what
    the other modules test, here it would only add time)."""
    with Admin(compat_server.namesrv) as admin:
        admin.update_broker_config({"enablePropertyFilter": "true" if on else "false"},
                                   broker_addr=compat_server.broker)


def test_java_push_consumer_with_an_sql92_selector(remoting, compat_server):
    runner, line = remoting
    ns, topic = compat_server.namesrv, f"{line}_Sql"
    reader.create_topic(compat_server.broker, topic, 4)
    _set_property_filter(compat_server, True)
    try:
        with Producer(namesrv=ns, group=f"{line}_sql_pg") as producer:
            for i in range(MESSAGES):
                producer.send(_message(topic, i))
        want = sorted(f"sql-{i}" for i in range(MESSAGES) if _matches(i))
        got = runner.run("push_concurrently", namesrv=ns, topic=topic, group=f"{line}_sql_cg", sql=EXPRESSION,
                         expect=len(want), timeoutMs=30_000, settleMs=1_000)["received"]
        bodies = sorted(body(m).decode() for m in got)
        assert bodies == want, f"received {bodies}, expected {want}"
    finally:
        _set_property_filter(compat_server, False)
