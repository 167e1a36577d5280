"""Transaction check-back for gRPC producers: the broker's checker asks, a Telemetry stream carries it.

A gRPC producer of topic T belongs to producer group ``GRPC_TX_<T>`` (RocketMQ's proxy uses the
topic as the group).  The broker's client manager knows each such group by one stand-in
connection, :class:`GroupCheckBack`, whose ``send_oneway`` turns the transaction checker's
CHECK_TRANSACTION_STATE into a Telemetry ``recover_orphaned_transaction_command`` and hands it to
a producer of the group that has a stream open now (taking turns).  So a check is not lost on the
first member the checker happens to pick when that one has no stream - e.g. a client that lost
its stream in a broker restart and has not opened a new one yet.  With no open stream in the
group the send fails and the checker asks again at its next round, as for a remoting producer
that is not connected.

The transaction id handed out is the offset message id of the half message, so EndTransaction
finds it in the commit log.
"""

from __future__ import annotations

import itertools

from rocketq.common.msgid import offset_msg_id
from rocketq.common.sysflag import PROPERTY_REAL_TOPIC
from rocketq.grpc_endpoint.convert import stored_to_v2
from rocketq.grpc_endpoint.protocol import spb
from rocketq.store.record import StoredMessage

TX_GROUP_PREFIX = "GRPC_TX_"
ENDPOINT_CLIENT_ID = "rocketq-grpc-endpoint"      # the stand-in member of every GRPC_TX_ group


def tx_group(topic: str) -> str:
    return TX_GROUP_PREFIX + topic


class GroupCheckBack:
    """What the transaction checker takes for a producer connection of *group*."""

    def __init__(self, sessions, group: str):
        self._sessions, self.group = sessions, group
        self._turn = itertools.count()

    async def send_oneway(self, cmd) -> None:
        half = StoredMessage(cmd.body)
        phy = int(cmd.get_int("commitLogOffset"))
        topic = half.properties.get(PROPERTY_REAL_TOPIC, half.topic)
        command = spb.TelemetryCommand(recover_orphaned_transaction_command=spb.RecoverOrphanedTransactionCommand(
            message=stored_to_v2(half, topic=topic),
            transaction_id=offset_msg_id(self._sessions.broker.store.store_host, phy)))
        members = self._sessions.streaming_members(self.group)
        if members:
            start = next(self._turn)
            for i in range(len(members)):
                if self._sessions.push(members[(start + i) % len(members)], command):
                    return
        raise ConnectionError(f"no producer of group {self.group} has a Telemetry stream open")
