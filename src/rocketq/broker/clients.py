"""Producer and consumer groups the broker knows from heartbeats (RocketMQ ``ConsumerManager``).

A HEART_BEAT body (``HeartbeatData`` JSON) names the client, its producer groups and its consumer
groups with their subscriptions.  The broker keeps, per consumer group, the clients and their
connections; when the set changes it tells the group's other clients with a oneway
NOTIFY_CONSUMER_IDS_CHANGED so they rebalance at once.  A client whose connection closes, or that
has not heartbeated for ``CHANNEL_EXPIRED_S``, is dropped.  A client's first heartbeat and its
leaving (connection closed, or expired) are logged at INFO - once per client, not per heartbeat.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from rocketq.filter import sub_version

log = logging.getLogger(__name__)

CHANNEL_EXPIRED_S = 120.0


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscriptions: dict[str, dict] = field(default_factory=dict)      # topic -> SubscriptionData JSON
    clients: dict[str, tuple[object, float]] = field(default_factory=dict)   # client id -> (conn, last seen)


def _update_subscriptions(table: dict[str, dict], subs) -> None:
    """RocketMQ's ``ConsumerGroupInfo.updateSubscription``: a topic's subscription is replaced only by a
    newer one (a higher ``subVersion``), so of a group's members the one that re-subscribed last
    counts, whichever heartbeat arrives last - a member's pull names its ``subVersion``, and one
    older than the pull's is SUBSCRIPTION_NOT_LATEST (two broadcasting consumers of a group
    rebalancing at once had their pulls refused until the next heartbeat, 30 s later).  A topic the
    heartbeat no longer names is dropped."""
    named = set()
    for sub in subs:
        topic = str(sub.get("topic"))
        named.add(topic)
        old = table.get(topic)
        if old is None or sub_version(sub) > sub_version(old):
            table[topic] = sub
    for topic in [t for t in table if t not in named]:
        del table[topic]


class ClientManager:
    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self.consumers: dict[str, ConsumerGroupInfo] = {}
        self.producers: dict[str, dict[str, object]] = {}
        self._known: dict[str, object] = {}          # client id -> its connection (for the log lines only)

    def heartbeat(self, conn, data: dict) -> list[str]:
        """Record a HeartbeatData; returns consumer groups whose membership changed."""
        client_id = str(data.get("clientID", ""))
        now = self._clock()
        if self._known.get(client_id) is not conn:
            self._log_arrival(client_id, conn, data)
        for p in data.get("producerDataSet") or ():
            self.producers.setdefault(str(p.get("groupName")), {})[client_id] = conn
        changed = []
        for c in data.get("consumerDataSet") or ():
            name = str(c.get("groupName"))
            info = self.consumers.setdefault(name, ConsumerGroupInfo(name))
            info.consume_type = c.get("consumeType", info.consume_type)
            info.message_model = c.get("messageModel", info.message_model)
            info.consume_from_where = c.get("consumeFromWhere", info.consume_from_where)
            _update_subscriptions(info.subscriptions, c.get("subscriptionDataSet") or ())
            if client_id not in info.clients:
                changed.append(name)
            info.clients[client_id] = (conn, now)
        return changed

    def _log_arrival(self, client_id: str, conn, data: dict) -> None:
        verb = "connected" if client_id not in self._known else "reconnected"
        self._known[client_id] = conn
        producers = [str(p.get("groupName")) for p in data.get("producerDataSet") or ()]
        consumers = [str(c.get("groupName")) for c in data.get("consumerDataSet") or ()]
        log.info("client %s %s from %s (producer groups: %s; consumer groups: %s)", client_id, verb,
                 getattr(conn, "peer", "?"), ", ".join(producers) or "-", ", ".join(consumers) or "-")

    def unregister(self, client_id: str, *, producer_group: str | None,
                   consumer_group: str | None) -> list[tuple[str, str]]:
        """Forget *client_id* in the groups named; returns the (consumer group, client id) that left."""
        if producer_group:
            self.producers.get(producer_group, {}).pop(client_id, None)
        info = self.consumers.get(consumer_group) if consumer_group else None
        if info is not None and info.clients.pop(client_id, None) is not None:
            return [(consumer_group, client_id)]
        return []

    def connection_closed(self, conn) -> tuple[list[str], list[tuple[str, str]]]:
        """Forget what *conn* carried; returns the client ids that heartbeated on it and the
        (consumer group, client id) that left their groups."""
        ids = [cid for cid, c in self._known.items() if c is conn]
        for cid in ids:
            del self._known[cid]
            log.info("client %s disconnected (%s)", cid, getattr(conn, "peer", "?"))
        left = []
        for name, info in self.consumers.items():
            for cid in [cid for cid, (c, _) in info.clients.items() if c is conn]:
                del info.clients[cid]
                left.append((name, cid))
        for members in self.producers.values():
            for cid in [cid for cid, c in members.items() if c is conn]:
                del members[cid]
        return ids, left

    def expire(self) -> list[tuple[str, str]]:
        """Forget consumers without a heartbeat for ``CHANNEL_EXPIRED_S``; returns the (group, client id) that left."""
        limit = self._clock() - CHANNEL_EXPIRED_S
        left = []
        for name, info in self.consumers.items():
            for cid in [cid for cid, (_, seen) in info.clients.items() if seen < limit]:
                del info.clients[cid]
                left.append((name, cid))
                if self._known.pop(cid, None) is not None:
                    log.info("client %s expired: no heartbeat for %.0f s", cid, CHANNEL_EXPIRED_S)
        return left

    def subscription_data(self, group: str, topic: str) -> dict | None:
        """The SubscriptionData JSON *group*'s heartbeats registered for *topic*, or None."""
        info = self.consumers.get(group)
        return info.subscriptions.get(topic) if info is not None else None

    def connection_of(self, client_id: str):
        """The connection of the client with *client_id* (any that heartbeated here), or None."""
        conn = self._known.get(client_id)
        return None if conn is None or getattr(conn, "is_closed", False) is True else conn

    def consumer_ids(self, group: str) -> list[str]:
        info = self.consumers.get(group)
        return sorted(info.clients) if info else []

    def connections(self, group: str) -> list:
        info = self.consumers.get(group)
        return [c for c, _ in info.clients.values()] if info else []

    def any_producer(self, group: str):
        members = self.producers.get(group) or {}
        return next(iter(members.values()), None)
