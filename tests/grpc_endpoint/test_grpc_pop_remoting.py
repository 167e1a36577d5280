"""Remoting POP_MESSAGE and gRPC receives share one pop state (issue 19 item 4): what a remoting pop
consumer holds in flight a gRPC consumer of the group does not get, and the reverse."""

from grpc_helpers import client_config, message, receive_all, remoting_call

from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode
from rocketq.store.scan import split_records


def _pop(server, n):
    r = remoting_call(server, lambda: RemotingCommand.create_request(RequestCode.POP_MESSAGE, {
        "consumerGroup": "GShared", "topic": "Shared", "queueId": -1, "maxMsgNums": n, "invisibleTime": 60_000,
        "pollTime": 0, "bornTime": 0, "initMode": 0}))
    assert r.code == ResponseCode.SUCCESS, r.remark
    positions, _sizes, _end = split_records(r.body)
    return r, len(positions)


def test_remoting_and_grpc_pop_consumers_of_a_group_share_its_messages(server):
    from rocketmq import FilterExpression, Producer, SimpleConsumer
    server.create_topic("Shared", queues=2)
    p = Producer(client_config(server), ("Shared",))
    p.startup()
    try:
        ids = {p.send(message("Shared", f"s{i}".encode())).message_id for i in range(10)}
    finally:
        p.shutdown()
    _, popped = _pop(server, 4)
    assert popped == 4
    c = SimpleConsumer(client_config(server), "GShared", {"Shared": FilterExpression("*")}, await_duration=1)
    c.startup()
    try:
        got = receive_all(c, 6, invisible_s=60)
        assert len(got) == 6 and {m.message_id for m in got} < ids
        assert c.receive(32, 60) == []                # the 4 the remoting consumer holds are not handed out
        for m in got:
            c.ack(m)
    finally:
        c.shutdown()
    r = remoting_call(server, lambda: RemotingCommand.create_request(RequestCode.POP_MESSAGE, {
        "consumerGroup": "GShared", "topic": "Shared", "queueId": -1, "maxMsgNums": 32, "invisibleTime": 60_000,
        "pollTime": 0, "bornTime": 0, "initMode": 0}))
    assert r.code == ResponseCode.POLLING_TIMEOUT                # nothing left for anyone
