"""Every request code the broker serves x every kind of account, through the wire: allowed or
NO_PERMISSION as the table in rocketq.acl.requests says - not just "is the signature right"."""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "broker"))
sys.path.insert(0, str(Path(__file__).parent))
from acl_fixtures import write_acl_file  # noqa: E402
from broker_helpers import store_config  # noqa: E402
from request_templates import TEMPLATES, build  # noqa: E402

from rocketq.acl import sign  # noqa: E402
from rocketq.broker.broker import Broker, BrokerSettings  # noqa: E402
from rocketq.common.msgid import decode_offset_msg_id  # noqa: E402
from rocketq.common.sysflag import TRANSACTION_PREPARED_TYPE  # noqa: E402
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode  # noqa: E402

R = RequestCode
MATRIX_ACL = """
accounts:
  - {accessKey: admin, secretKey: a-secret, admin: true}
  - {accessKey: pub, secretKey: p-secret, defaultTopicPerm: PUB, defaultGroupPerm: PUB}
  - {accessKey: sub, secretKey: s-secret, defaultTopicPerm: SUB, defaultGroupPerm: SUB}
  - {accessKey: deny, secretKey: d-secret, defaultTopicPerm: DENY, defaultGroupPerm: DENY}
  - {accessKey: reader, secretKey: r-secret, defaultTopicPerm: DENY, defaultGroupPerm: DENY,
     topicPerms: [Orders=SUB], groupPerms: [GID_A=SUB]}
"""
IDENTITIES = {"admin": ("admin", "a-secret"), "pub": ("pub", "p-secret"), "sub": ("sub", "s-secret"),
              "deny": ("deny", "d-secret"), "bad-signature": ("admin", "not-the-secret")}
UNSERVED = 9999
A, P, S = "admin", "pub", "sub"
# who may: every other identity (deny, bad-signature) is refused everywhere
ALLOWED = {
    R.SEND_MESSAGE: {A, P}, R.SEND_MESSAGE_V2: {A, P}, R.SEND_BATCH_MESSAGE: {A, P},
    R.PULL_MESSAGE: {A, S}, R.LITE_PULL_MESSAGE: {A, S}, R.QUERY_MESSAGE: {A, S},
    R.QUERY_CONSUMER_OFFSET: {A, S}, R.UPDATE_CONSUMER_OFFSET: {A, S},
    R.SEARCH_OFFSET_BY_TIMESTAMP: {A, P, S}, R.GET_MAX_OFFSET: {A, P, S}, R.GET_MIN_OFFSET: {A, P, S},
    R.GET_EARLIEST_MSG_STORETIME: {A, P, S}, R.GET_TOPIC_STATS_INFO: {A, P, S},
    R.VIEW_MESSAGE_BY_ID: {A, S}, R.CONSUMER_SEND_MSG_BACK: {A, S}, R.END_TRANSACTION: {A, P},
    R.HEART_BEAT: {A, S}, R.UNREGISTER_CLIENT: {A, S}, R.GET_CONSUMER_LIST_BY_GROUP: {A, S},
    R.GET_CONSUMER_CONNECTION_LIST: {A, S}, R.GET_CONSUME_STATS: {A, S},
    R.LOCK_BATCH_MQ: {A, S}, R.UNLOCK_BATCH_MQ: {A, S},
    R.UPDATE_AND_CREATE_TOPIC: {A}, R.DELETE_TOPIC_IN_BROKER: {A}, R.GET_ALL_TOPIC_CONFIG: {A},
    R.GET_BROKER_RUNTIME_INFO: {A}, R.GET_ALL_CONSUMER_OFFSET: {A}, R.GET_ALL_DELAY_OFFSET: {A},
    R.GET_TIMER_CHECK_POINT: {A},
    R.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: {A}, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: {A},
    R.DELETE_SUBSCRIPTIONGROUP: {A},
    # issue 19's codes
    R.CHECK_CLIENT_CONFIG: {A, S}, R.GET_TOPIC_CONFIG: {A, P, S},
    R.POP_MESSAGE: {A, S}, R.ACK_MESSAGE: {A, S}, R.CHANGE_MESSAGE_INVISIBLETIME: {A, S}, R.BATCH_ACK_MESSAGE: {A, S},
    R.QUERY_ASSIGNMENT: {A, S}, R.RECALL_MESSAGE: {A, P}, R.SEND_REPLY_MESSAGE: {A, P}, R.SEND_REPLY_MESSAGE_V2: {A, P},
    R.INVOKE_BROKER_TO_RESET_OFFSET: {A}, R.GET_BROKER_CONFIG: {A}, R.UPDATE_BROKER_CONFIG: {A},
    R.QUERY_TOPIC_CONSUME_BY_WHO: {A, P, S}, R.GET_PRODUCER_CONNECTION_LIST: {A},
    R.GET_BROKER_EPOCH_CACHE: {A},            # issue 20 (mqadmin getBrokerEpoch)
    UNSERVED: {A},
    # ACL 2.0's users and ACLs (answered "ACL 2.0 is off" under ACL 1.0, and only to an admin)
    **{code: {A} for code in range(R.AUTH_CREATE_USER, R.AUTH_LIST_ACL + 1)},
}
# names that keep one request from spoiling the next (the admin's delete must not take Orders away)
NAMES = {R.DELETE_TOPIC_IN_BROKER: {"topic": "Doomed"}, R.UPDATE_AND_CREATE_TOPIC: {"topic": "Created"},
         R.DELETE_SUBSCRIPTIONGROUP: {"group": "GID_GONE"}}


def _signed(cmd: RemotingCommand, identity: str) -> RemotingCommand:
    return sign(cmd, *IDENTITIES[identity])


async def _offset_of(client, cmd) -> int:
    r = await client.invoke(_signed(cmd, "admin"), timeout_s=10)
    assert r.code == ResponseCode.SUCCESS, r.remark
    return decode_offset_msg_id(r.ext_fields["msgId"])[1]


async def _served_codes(client) -> set[int]:
    """The codes an admin's request is not answered REQUEST_CODE_NOT_SUPPORTED for, found on the wire."""
    served = set()
    for code in sorted(set(range(0, 1100)) | set(range(3000, 3020)) | {int(c) for c in RequestCode}):
        r = await client.invoke(_signed(RemotingCommand.create_request(code, {}), "admin"), timeout_s=10)
        if r.code != ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
            served.add(code)
    return served


def _request(code: int, offsets: dict[int, int]) -> RemotingCommand:
    if code == UNSERVED or R.AUTH_CREATE_USER <= code <= R.AUTH_LIST_ACL:
        return RemotingCommand.create_request(code, {})
    return build(code, offsets.get(code, offsets["plain"]), **NAMES.get(code, {}))


def test_every_served_code_against_every_kind_of_account(tmp_path):
    write_acl_file(tmp_path, MATRIX_ACL)

    async def scenario():
        broker = await Broker(BrokerSettings(port=0, acl_enable=True), store_config(tmp_path)).start()
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            assert await _served_codes(client) == set(ALLOWED) - {UNSERVED}, "a served code is missing here"
            plain = await _offset_of(client, build(R.SEND_MESSAGE_V2))
            half = build(R.SEND_MESSAGE_V2)
            half.ext_fields.update(f=TRANSACTION_PREPARED_TYPE, i="TRAN_MSG\x01true\x02")
            offsets = {"plain": plain, R.END_TRANSACTION: await _offset_of(client, half)}
            await client.invoke(_signed(build(R.UPDATE_AND_CREATE_TOPIC, topic="Doomed"), "admin"), timeout_s=10)
            await asyncio.to_thread(broker.store.wait_dispatched)
            wrong = []
            for code, allowed in ALLOWED.items():
                for identity in IDENTITIES:
                    r = await client.invoke(_signed(_request(code, offsets), identity), timeout_s=10)
                    refused = r.code == ResponseCode.NO_PERMISSION
                    if refused == (identity in allowed):
                        wrong.append(f"code {int(code)} as {identity}: {r.code} {r.remark}")
            assert not wrong, "\n".join(wrong)
        finally:
            await client.close()
            await broker.close()
    asyncio.run(scenario())


def test_a_reader_sees_only_its_topics_messages_and_no_admin_tables(tmp_path):
    """The issue's holes: VIEW_MESSAGE_BY_ID returned a message of a topic the account may not
    read; GET_ALL_TOPIC_CONFIG and GET_ALL_CONSUMER_OFFSET were served to any signed account."""
    write_acl_file(tmp_path, MATRIX_ACL)

    async def scenario():
        broker = await Broker(BrokerSettings(port=0, acl_enable=True), store_config(tmp_path)).start()
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            secret = await _offset_of(client, build(R.SEND_MESSAGE_V2, topic="Secret"))
            mine = await _offset_of(client, build(R.SEND_MESSAGE_V2, topic="Orders"))
            view = await client.invoke(sign(build(R.VIEW_MESSAGE_BY_ID, secret), "reader", "r-secret"), timeout_s=10)
            assert view.code == ResponseCode.NO_PERMISSION and "'Secret'" in view.remark and not view.body
            view = await client.invoke(sign(build(R.VIEW_MESSAGE_BY_ID, mine), "reader", "r-secret"), timeout_s=10)
            assert view.code == ResponseCode.SUCCESS and view.body
            back = await client.invoke(sign(build(R.CONSUMER_SEND_MSG_BACK, secret), "reader", "r-secret"), 10)
            assert back.code == ResponseCode.NO_PERMISSION and broker.topics.get("%RETRY%GID_A") is None
            for code in (R.GET_ALL_TOPIC_CONFIG, R.GET_ALL_CONSUMER_OFFSET, R.GET_ALL_SUBSCRIPTIONGROUP_CONFIG):
                r = await client.invoke(sign(build(code), "reader", "r-secret"), timeout_s=10)
                assert r.code == ResponseCode.NO_PERMISSION and "admin" in r.remark and not r.body
        finally:
            await client.close()
            await broker.close()
    asyncio.run(scenario())
