"""QUERY_ASSIGNMENT (400): the broker balances a group's queues (RocketMQ 5's server-side rebalance).

A Java consumer with ``setClientRebalance(false)`` asks a broker of the topic which queues are its
own instead of computing that itself.  Body (``QueryAssignmentRequestBody``): ``{"topic",
"consumerGroup", "clientId", "strategyName", "messageModel"}``; answer
(``QueryAssignmentResponseBody``): ``{"messageQueueAssignments": [{"messageQueue": {"topic",
"brokerName", "queueId"}, "mode": "PULL"|"POP", "attachments": {}}]}``.  As RocketMQ's
``QueryAssignmentProcessor``:

* the mode is ``defaultMessageRequestMode`` (PULL, as in RocketMQ; POP makes such consumers pop,
  :mod:`rocketq.broker.pop.remoting`), a ``%RETRY%`` topic is always PULL;
* the queues are the topic's readable queues on every broker (the NameServers' route; this broker's
  own when it has no NameServer), sorted by topic, broker name and queue id;
* BROADCASTING gets them all; CLUSTERING splits them over the group's clients (from heartbeats,
  sorted) with ``AVG`` or ``AVG_BY_CIRCLE`` - another strategy name, an unknown group or an unknown
  topic answers no assignment (``messageQueueAssignments`` absent: the client keeps what it has);
* in POP mode with ``defaultPopShareQueueNum`` <= 0 (the default, -1) or at least the number of
  clients minus one, every client pops every broker's queues (queue id -1, one per broker); else
  each client gets its own share and the shares of the next ``defaultPopShareQueueNum`` clients
  (more clients than queues: each one queue, round the list).
"""

from __future__ import annotations

import json

from rocketq.broker.admin import ok
from rocketq.common import fastjson
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

PULL, POP = "PULL", "POP"
STRATEGIES = ("AVG", "AVG_BY_CIRCLE")


def handlers(broker) -> dict:
    return {RequestCode.QUERY_ASSIGNMENT: lambda conn, cmd: query_assignment(broker, cmd)}


def allocate(strategy: str, queues: list, clients: list[str], client: str) -> list:
    """RocketMQ's AllocateMessageQueueAveragely / ...ByCircle (both lists sorted)."""
    if client not in clients or not queues:
        return []
    index, n = clients.index(client), len(clients)
    if strategy == "AVG_BY_CIRCLE":
        return [q for i, q in enumerate(queues) if i % n == index]
    mod = len(queues) % n
    size = 1 if len(queues) <= n else len(queues) // n + (1 if mod and index < mod else 0)
    start = index * size if mod and index < mod else index * size + mod
    return queues[start:start + max(0, min(size, len(queues) - start))]


async def _all_queues(broker, topic: str) -> list[tuple[str, str, int]] | None:
    registrar = getattr(broker, "registrar", None)
    per_broker = await registrar.readable_queues(topic) if registrar is not None else None
    if per_broker is None:                            # no NameServer (or none answered): this broker's own
        tc = broker.topics.get(topic)
        per_broker = [(broker.settings.broker_name, tc.read_queue_nums)] if tc and tc.is_readable() else []
    return sorted((topic, name, qid) for name, n in per_broker for qid in range(n)) or None


def _queues_for(broker, mode: str, strategy: str, queues: list, clients: list[str], client: str) -> list:
    if mode == POP:
        share = broker.settings.default_pop_share_queue_num
        if share <= 0 or share >= len(clients) - 1:
            return sorted({(t, b, -1) for t, b, _ in queues})
        if client not in clients:
            return []
        index = clients.index(client)
        if len(clients) > len(queues):                 # every client gets one
            return [queues[index % len(queues)]]
        out = list(allocate(strategy, queues, clients, client))
        for i in range(1, share + 1):
            out += allocate(strategy, queues, clients, clients[(index + i) % len(clients)])
        return out
    return allocate(strategy, queues, clients, client)


async def query_assignment(broker, cmd: RemotingCommand) -> RemotingCommand:
    try:
        req = fastjson.loads(cmd.body or b"{}")
        topic, group = str(req["topic"]), str(req["consumerGroup"])
        client, strategy = str(req.get("clientId") or ""), str(req.get("strategyName") or "AVG")
        model = str(req.get("messageModel") or "CLUSTERING")
    except (ValueError, KeyError, TypeError) as exc:
        return RemotingCommand.create_response(cmd, ResponseCode.INVALID_PARAMETER,
                                               f"bad QueryAssignmentRequestBody: {exc}")
    mode = PULL if topic.startswith("%RETRY%") else broker.settings.default_message_request_mode
    queues = await _all_queues(broker, topic)
    chosen = None
    if queues is not None and model == "BROADCASTING":
        chosen = queues
    elif queues is not None and strategy in STRATEGIES:
        clients = broker.clients.consumer_ids(group)
        if clients:
            chosen = _queues_for(broker, mode, strategy, queues, sorted(clients), client)
    body = {} if chosen is None else {"messageQueueAssignments": [
        {"messageQueue": {"topic": t, "brokerName": b, "queueId": q}, "mode": mode, "attachments": {}}
        for t, b, q in chosen]}
    return ok(cmd, body=json.dumps(body).encode())
