"""A real broker on a loopback port, driven over the remoting protocol."""

import asyncio

from broker_helpers import (pull, send_v2, split_records, store_config,  # noqa: F401 (shared)
                            transaction_producer, with_broker)

from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.broker.send import encode_batch
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode


def test_send_then_pull_round_trip(tmp_path):
    async def scenario(broker, client):
        r = await client.invoke(send_v2("Orders", b"hello", queue_id=1), timeout_s=5)
        assert r.code == ResponseCode.SUCCESS, r.remark
        assert r.ext_fields["queueId"] == "1" and r.ext_fields["queueOffset"] == "0"
        assert len(r.ext_fields["msgId"]) == 32
        await asyncio.to_thread(broker.store.wait_dispatched)       # consume queues are built asynchronously
        resp = await client.invoke(pull("Orders", 1, 0), timeout_s=5)
        assert resp.code == ResponseCode.SUCCESS
        msgs = split_records(resp.body)
        assert [m.body for m in msgs] == [b"hello"] and msgs[0].tags == "TagA" and msgs[0].keys == ["order-1"]
        assert resp.ext_fields["nextBeginOffset"] == "1" and resp.ext_fields["maxOffset"] == "1"
        empty = await client.invoke(pull("Orders", 1, 1), timeout_s=5)
        assert empty.code == ResponseCode.PULL_NOT_FOUND and empty.remark == "OFFSET_OVERFLOW_ONE"
        moved = await client.invoke(pull("Orders", 1, 50), timeout_s=5)
        assert moved.code == ResponseCode.PULL_OFFSET_MOVED and moved.ext_fields["nextBeginOffset"] == "1"  # the max (RocketMQ 5)
        filtered = await client.invoke(pull("Orders", 1, 0, subscription="TagB"), timeout_s=5)
        assert filtered.code == ResponseCode.PULL_RETRY_IMMEDIATELY
    asyncio.run(with_broker(tmp_path, scenario))


def test_long_polling_answers_when_a_message_arrives(tmp_path):
    async def scenario(broker, client):
        await client.invoke(send_v2("LP", b"first"), timeout_s=5)
        await asyncio.to_thread(broker.store.wait_dispatched)
        consumer = RemotingClient("127.0.0.1", broker.server.port)
        try:
            waiting = asyncio.ensure_future(consumer.invoke(pull("LP", 0, 1, suspend_ms=20_000), timeout_s=25))
            await asyncio.sleep(0)                     # let the pull reach the broker and be held
            for _ in range(200):
                if broker.long_polling.held:
                    break
                await asyncio.sleep(0.005)
            assert broker.long_polling.held == 1 and not waiting.done()
            await client.invoke(send_v2("LP", b"second"), timeout_s=5)
            resp = await asyncio.wait_for(waiting, 5)
            assert resp.code == ResponseCode.SUCCESS and [m.body for m in split_records(resp.body)] == [b"second"]
        finally:
            await consumer.close()
    asyncio.run(with_broker(tmp_path, scenario))


def test_a_batch_answers_its_queue_and_first_queue_offset(tmp_path):
    """The answer names the queue the batch went to and its first message's offset there, whether the
    batch was staged from the wire (plain messages) or went through Message objects (a delay level)."""
    from rocketq.common.msgid import decode_offset_msg_id

    def batch_request(n, queue_id, props="KEYS\x01k\x02"):
        req = send_v2("Answers", encode_batch([(0, b"a%d" % i, props) for i in range(n)]), queue_id=queue_id)
        req.code = RequestCode.SEND_BATCH_MESSAGE
        return req

    async def max_offset(client, queue_id):
        r = await client.invoke(RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET,
                                                               {"topic": "Answers", "queueId": queue_id}), timeout_s=5)
        return int(r.ext_fields["offset"])

    async def scenario(broker, client):
        answers = []
        for n, qid, props in ((5, 2, "KEYS\x01k\x02"), (3, 2, ""), (4, -1, "KEYS\x01k\x02"),
                              (2, 3, "DELAY\x012\x02")):       # the last: the general path (Message objects)
            r = await client.invoke(batch_request(n, qid, props), timeout_s=5)
            assert r.code == ResponseCode.SUCCESS, r.remark
            answers.append((r.ext_fields["queueId"], r.ext_fields["queueOffset"]))
            first_id = r.ext_fields["msgId"].split(",")[0]
            stored = broker.store.read_message(decode_offset_msg_id(first_id)[1])
            assert (str(stored.queue_id), str(stored.queue_offset)) == answers[-1] and stored.body == b"a0"
        assert answers[:2] == [("2", "0"), ("2", "5")]
        await asyncio.to_thread(broker.store.wait_dispatched)
        chosen = int(answers[2][0])
        assert await max_offset(client, chosen) == int(answers[2][1]) + 4
    asyncio.run(with_broker(tmp_path, scenario))


def test_batch_offsets_and_admin(tmp_path):
    async def scenario(broker, client):
        batch = encode_batch([(0, b"b%d" % i, "KEYS\x01bk%d\x02" % i) for i in range(5)])
        req = send_v2("Batch", batch, queue_id=2)
        req.code = RequestCode.SEND_BATCH_MESSAGE
        r = await client.invoke(req, timeout_s=5)
        assert r.code == ResponseCode.SUCCESS and len(r.ext_fields["msgId"].split(",")) == 5
        await asyncio.to_thread(broker.store.wait_dispatched)
        maxo = await client.invoke(RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET,
                                                                  {"topic": "Batch", "queueId": 2}), timeout_s=5)
        assert maxo.ext_fields["offset"] == "5"
        q = {"consumerGroup": "G", "topic": "Batch", "queueId": 2}
        first = await client.invoke(RemotingCommand.create_request(RequestCode.QUERY_CONSUMER_OFFSET, q), timeout_s=5)
        assert first.code == ResponseCode.SUCCESS and first.ext_fields["offset"] == "0"      # young queue
        await client.invoke(RemotingCommand.create_request(RequestCode.UPDATE_CONSUMER_OFFSET,
                                                           dict(q, commitOffset=3)), timeout_s=5)
        again = await client.invoke(RemotingCommand.create_request(RequestCode.QUERY_CONSUMER_OFFSET, q), timeout_s=5)
        assert again.ext_fields["offset"] == "3"
        unknown = await client.invoke(RemotingCommand.create_request(9999, {}), timeout_s=5)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
        bad = await client.invoke(RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                                                 {"topic": "bad topic"}), timeout_s=5)
        assert bad.code == ResponseCode.INVALID_PARAMETER and "characters" in bad.remark
    asyncio.run(with_broker(tmp_path, scenario))
    offsets = (tmp_path / "config" / "consumerOffset.json").read_text()
    assert '"Batch@G"' in offsets


def test_unknown_topic_without_auto_create(tmp_path):
    async def scenario(broker, client):
        r = await client.invoke(send_v2("Nope", b"x"), timeout_s=5)
        assert r.code == ResponseCode.TOPIC_NOT_EXIST and "Nope" in r.remark
        created = await client.invoke(RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "Nope", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}), timeout_s=5)
        assert created.code == ResponseCode.SUCCESS
        # a queue the topic does not have: Java's SYSTEM_ERROR (its producer then picks another queue), not stored
        r = await client.invoke(send_v2("Nope", b"x", queue_id=7), timeout_s=5)
        assert r.code == ResponseCode.SYSTEM_ERROR and "request queueId[7] is illegal" in r.remark
        assert broker.store.max_offset("Nope", 1) == 0
        r = await client.invoke(send_v2("Nope", b"x", queue_id=1), timeout_s=5)
        assert r.code == ResponseCode.SUCCESS and r.ext_fields["queueId"] == "1"
    asyncio.run(with_broker(tmp_path, scenario, auto_create_topic=False))


def test_heartbeat_groups_and_notifications(tmp_path):
    import json

    def heartbeat(client_id):
        return RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, json.dumps({
            "clientID": client_id, "producerDataSet": [],
            "consumerDataSet": [{"groupName": "GID_A", "consumeType": "CONSUME_PASSIVELY",
                                 "messageModel": "CLUSTERING", "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                                 "subscriptionDataSet": [{"topic": "T", "subString": "*", "tagsSet": [],
                                                          "codeSet": [], "subVersion": 1}],
                                 "unitMode": False}]}).encode())

    async def scenario(broker, client):
        notified = asyncio.Event()

        async def on_request(conn, cmd):
            if cmd.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
                notified.set()
            return None

        other = RemotingClient("127.0.0.1", broker.server.port, handler=on_request)
        try:
            await other.invoke(heartbeat("c2"), timeout_s=5)
            r = await client.invoke(heartbeat("c1"), timeout_s=5)
            assert r.code == ResponseCode.SUCCESS
            assert broker.topics.get("%RETRY%GID_A").perm == 6 and broker.groups.get("GID_A") is not None
            await asyncio.wait_for(notified.wait(), 5)       # c2 hears that c1 joined
            lst = await client.invoke(RemotingCommand.create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                                     {"consumerGroup": "GID_A"}), timeout_s=5)
            assert json.loads(lst.body) == {"consumerIdList": ["c1", "c2"]}
        finally:
            await other.close()
        for _ in range(200):                     # the closed connection leaves the group
            if broker.clients.consumer_ids("GID_A") == ["c1"]:
                break
            await asyncio.sleep(0.005)
        assert broker.clients.consumer_ids("GID_A") == ["c1"]
        none = await client.invoke(RemotingCommand.create_request(RequestCode.GET_CONSUMER_LIST_BY_GROUP,
                                                                  {"consumerGroup": "nobody"}), timeout_s=5)
        assert none.code == ResponseCode.SYSTEM_ERROR and none.remark == "no consumer for this group"
    asyncio.run(with_broker(tmp_path, scenario))


def test_registers_with_every_nameserver_and_again_when_topics_change(tmp_path):
    import json
    import zlib

    from rocketq.remoting import RemotingServer

    async def scenario():
        seen = {0: [], 1: []}
        changed = asyncio.Event()

        def recorder(i):
            async def handler(conn, cmd):
                if cmd.code in (RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER):
                    seen[i].append(cmd)
                    if cmd.code == RequestCode.REGISTER_BROKER and "Fresh" in json.loads(cmd.body)[
                            "topicConfigSerializeWrapper"]["topicConfigTable"]:
                        changed.set()
                return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS)
            return handler

        ns = [RemotingServer(recorder(i), "127.0.0.1", 0) for i in range(2)]
        for s in ns:
            await s.start()
        addr = ";".join(f"127.0.0.1:{s.port}" for s in ns)
        broker = await Broker(BrokerSettings(port=0, namesrv_addr=addr), store_config(tmp_path)).start()
        try:
            client = RemotingClient("127.0.0.1", broker.server.port)
            await client.invoke(RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
                "topic": "Fresh", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}), timeout_s=5)
            await asyncio.wait_for(changed.wait(), 5)
            await client.close()
        finally:
            await broker.close()
            for s in ns:
                await s.close()
        for i in (0, 1):
            reg = [c for c in seen[i] if c.code == RequestCode.REGISTER_BROKER]
            assert reg and reg[0].ext_fields["brokerName"] == "broker-a" and reg[0].ext_fields["brokerId"] == "0"
            assert int(reg[0].ext_fields["bodyCrc32"]) == zlib.crc32(reg[0].body) & 0x7FFFFFFF
            assert reg[0].ext_fields["brokerAddr"] == broker.address
            assert seen[i][-1].code == RequestCode.UNREGISTER_BROKER
    asyncio.run(scenario())


def test_send_back_goes_to_retry_with_growing_delay_then_to_dlq(tmp_path):
    async def scenario(broker, client):
        r = await client.invoke(send_v2("Work", b"job", queue_id=0), timeout_s=5)
        phy = int(r.ext_fields["msgId"][-16:], 16)

        async def send_back(offset, max_times=16):
            req = RemotingCommand.create_request(RequestCode.CONSUMER_SEND_MSG_BACK, {
                "offset": offset, "group": "GID_W", "delayLevel": 0, "originMsgId": r.ext_fields["msgId"],
                "originTopic": "Work", "maxReconsumeTimes": max_times}, version=121)
            return await client.invoke(req, timeout_s=5)

        back = await send_back(phy)
        assert back.code == ResponseCode.SUCCESS
        await asyncio.to_thread(broker.store.wait_dispatched)
        parked = broker.store.get_messages("SCHEDULE_TOPIC_XXXX", 2, 0, 10)     # delay level 3 -> queue 2
        assert len(parked) == 1
        m = parked[0]
        assert m.properties["REAL_TOPIC"] == "%RETRY%GID_W" and m.reconsume_times == 1
        assert m.properties["RETRY_TOPIC"] == "Work" and m.properties["ORIGIN_MESSAGE_ID"] == r.ext_fields["msgId"]
        # a message that already used its retries is dead-lettered at once
        dead = await send_back(m.physical_offset, max_times=1)
        assert dead.code == ResponseCode.SUCCESS
        await asyncio.to_thread(broker.store.wait_dispatched)
        dlq = broker.store.get_messages("%DLQ%GID_W", 0, 0, 10)
        assert [x.body for x in dlq] == [b"job"] and dlq[0].properties["DLQ_ORIGIN_TOPIC"] == "Work"
        assert broker.topics.get("%DLQ%GID_W") is not None and broker.topics.get("%RETRY%GID_W") is not None
        gone = await send_back(10 ** 9)
        assert gone.code == ResponseCode.SYSTEM_ERROR and "offset" in gone.remark
    asyncio.run(with_broker(tmp_path, scenario))


def test_query_message_by_key_and_queue_locks(tmp_path):
    import json

    async def scenario(broker, client):
        for i in range(3):
            await client.invoke(send_v2("Q", b"q%d" % i, props="KEYS\x01order-7\x02"), timeout_s=5)
        await asyncio.to_thread(broker.store.wait_dispatched)
        r = await client.invoke(RemotingCommand.create_request(RequestCode.QUERY_MESSAGE, {
            "topic": "Q", "key": "order-7", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2 ** 62}), timeout_s=5)
        assert r.code == ResponseCode.SUCCESS
        assert sorted(m.body for m in split_records(r.body)) == [b"q0", b"q1", b"q2"]
        miss = await client.invoke(RemotingCommand.create_request(RequestCode.QUERY_MESSAGE, {
            "topic": "Q", "key": "nope", "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2 ** 62}), timeout_s=5)
        assert miss.code == ResponseCode.QUERY_NOT_FOUND

        def lock(client_id, code=RequestCode.LOCK_BATCH_MQ):
            body = {"consumerGroup": "G", "clientId": client_id, "onlyThisBroker": False,
                    "mqSet": [{"topic": "Q", "brokerName": "broker-a", "queueId": q} for q in (0, 1)]}
            return RemotingCommand.create_request(code, {}, json.dumps(body).encode())

        a = await client.invoke(lock("A"), timeout_s=5)
        assert len(json.loads(a.body)["lockOKMQSet"]) == 2
        b = await client.invoke(lock("B"), timeout_s=5)
        assert json.loads(b.body)["lockOKMQSet"] == []                   # held by A
        await client.invoke(lock("A", RequestCode.UNLOCK_BATCH_MQ), timeout_s=5)
        b = await client.invoke(lock("B"), timeout_s=5)
        assert len(json.loads(b.body)["lockOKMQSet"]) == 2
    asyncio.run(with_broker(tmp_path, scenario))


def test_transactions_commit_and_rollback(tmp_path):
    async def scenario(broker, client):
        async def half(body):
            req = send_v2("Pay", body, props="TRAN_MSG\x01true\x02PGROUP\x01PID_TX\x02KEYS\x01%s\x02" % body.decode())
            req.ext_fields["f"] = "4"                                   # PREPARED
            r = await client.invoke(req, timeout_s=5)
            assert r.code == ResponseCode.SUCCESS
            return int(r.ext_fields["msgId"][-16:], 16), r

        def end(phy, kind):
            return RemotingCommand.create_request(RequestCode.END_TRANSACTION, {
                "producerGroup": "PID_TX", "tranStateTableOffset": 0, "commitLogOffset": phy,
                "commitOrRollback": kind, "fromTransactionCheck": False, "msgId": "x", "transactionId": "t"})

        ok_phy, _ = await half(b"paid")
        no_phy, _ = await half(b"cancelled")
        await asyncio.to_thread(broker.store.wait_dispatched)
        assert broker.store.max_offset("Pay", 0) == 0                       # halves are invisible
        assert broker.store.max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == 2
        assert (await client.invoke(end(ok_phy, 8), timeout_s=5)).code == ResponseCode.SUCCESS
        assert (await client.invoke(end(no_phy, 12), timeout_s=5)).code == ResponseCode.SUCCESS
        await asyncio.to_thread(broker.store.wait_dispatched)
        bodies = [m.body for q in range(4) for m in broker.store.get_messages("Pay", q, 0, 10)]
        assert bodies == [b"paid"]
        committed = next(m for q in range(4) for m in broker.store.get_messages("Pay", q, 0, 10))
        assert "TRAN_MSG" not in committed.properties and committed.sys_flag & 0xC == 0x8
        ops = broker.store.get_messages("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0, 0, 10)
        assert [m.body for m in ops] == [b"0", b"1"] and ops[0].tags == "d"
        bad = await client.invoke(end(10 ** 9, 8), timeout_s=5)
        assert bad.code == ResponseCode.SYSTEM_ERROR
    asyncio.run(with_broker(tmp_path, scenario))


def test_unresolved_half_message_is_checked_back_with_the_producer(tmp_path):
    async def scenario(broker, client):
        checks = asyncio.Queue()
        producer = await transaction_producer(broker.server.port, checks.put_nowait)
        try:
            req = send_v2("Pay", b"maybe", props="TRAN_MSG\x01true\x02PGROUP\x01PID_TX\x02")
            req.ext_fields["f"] = "4"
            assert (await producer.invoke(req, timeout_s=5)).code == ResponseCode.SUCCESS
            await asyncio.to_thread(broker.store.wait_dispatched)
            assert await broker.transaction_checker.check_once() == 1
            check = await asyncio.wait_for(checks.get(), 5)
            assert split_records(check.body)[0].body == b"maybe"
            assert split_records(check.body)[0].properties["TRANSACTION_CHECK_TIMES"] == "1"
            end = RemotingCommand.create_request(RequestCode.END_TRANSACTION, {
                "producerGroup": "PID_TX", "tranStateTableOffset": check.ext_fields["tranStateTableOffset"],
                "commitLogOffset": check.ext_fields["commitLogOffset"], "commitOrRollback": 8,
                "fromTransactionCheck": True, "msgId": check.ext_fields["msgId"]})
            assert (await producer.invoke(end, timeout_s=5)).code == ResponseCode.SUCCESS
            await asyncio.to_thread(broker.store.wait_dispatched)
            assert [m.body for q in range(4) for m in broker.store.get_messages("Pay", q, 0, 10)] == [b"maybe"]
            assert await broker.transaction_checker.check_once() == 0          # resolved: no more checks
        finally:
            await producer.close()
    asyncio.run(with_broker(tmp_path, scenario, transaction_timeout_s=0.0))


def test_malformed_batch_bodies_are_refused_naming_the_record(tmp_path):
    good = encode_batch([(0, b"ok", "KEYS\x01k\x02")])
    bad_utf8 = good + encode_batch([(0, b"x", "KEYS\x01k\x02")]).replace(b"KEYS\x01k", b"KEYS\x01\xff")
    cases = {good[:-3]: "at byte 0 has inconsistent lengths", good + b"\x00\x00": f"at byte {len(good)} is truncated",
             bad_utf8: "batch record 1: properties are not UTF-8",
             # (a last pair without its \x02 is fine: RocketMQ 4.x clients send that, tests/compat/test_compat_wire.py)
             encode_batch([(0, b"x", "KEYS\x01k\x01v")]): "message 0: properties are not"}

    async def scenario(broker, client):
        for body, why in cases.items():
            req = send_v2("BadBatch", body)
            req.code = RequestCode.SEND_BATCH_MESSAGE
            r = await client.invoke(req, timeout_s=5)
            assert r.code != ResponseCode.SUCCESS and why in (r.remark or ""), (why, r.code, r.remark)
        assert broker.store.max_offset("BadBatch", 0) == 0          # nothing of a refused batch was stored
    asyncio.run(with_broker(tmp_path, scenario))


def test_a_half_message_unresolved_after_the_last_check_goes_to_trans_check_max_time_topic(tmp_path):
    """RocketMQ moves it there (issue 19 item 7) rather than dropping it: an operator can still read it."""
    async def scenario(broker, client):
        req = send_v2("Pay", b"undecided", props="TRAN_MSG\x01true\x02PGROUP\x01PID_GONE\x02KEYS\x01order-9\x02")
        req.ext_fields["f"] = "4"
        assert (await client.invoke(req, timeout_s=5)).code == ResponseCode.SUCCESS
        for _ in range(3):                   # max_checks rounds (no producer online to answer), then one more
            await asyncio.to_thread(broker.store.wait_dispatched)
            await broker.transaction_checker.check_once()
        await asyncio.to_thread(broker.store.wait_dispatched)
        kept = broker.store.get_messages("TRANS_CHECK_MAX_TIME_TOPIC", 0, 0, 10).messages
        assert [m.body for m in kept] == [b"undecided"]
        assert kept[0].properties["REAL_TOPIC"] == "Pay" and kept[0].properties["TRANSACTION_CHECK_TIMES"] == "2"
        assert broker.topics.get("TRANS_CHECK_MAX_TIME_TOPIC").read_queue_nums == 1
        assert await broker.transaction_checker.check_once() == 0         # resolved: not checked again
        await asyncio.to_thread(broker.store.wait_dispatched)
        assert len(broker.store.get_messages("TRANS_CHECK_MAX_TIME_TOPIC", 0, 0, 10).messages) == 1
        assert [m for q in range(4) for m in broker.store.get_messages("Pay", q, 0, 10)] == []
    asyncio.run(with_broker(tmp_path, scenario, transaction_timeout_s=0.0, transaction_check_max=2))


def test_responses_carry_the_server_version(tmp_path):
    """Java clients keep the version of a broker's heartbeat response and refuse to send it an SQL92 pull
    below V4_1_0_SNAPSHOT (232): rocketq answers as RocketMQ 5.3.3 does, with V5_3_3's ordinal."""
    async def scenario(broker, client):
        heartbeat = RemotingCommand.create_request(RequestCode.HEART_BEAT, body=b'{"clientID":"v@1",'
                                                   b'"consumerDataSet":[],"producerDataSet":[]}')
        sent = await client.invoke(send_v2("Versions", b"x"), timeout_s=5)
        for r in (await client.invoke(heartbeat, timeout_s=5), sent):
            assert r.code == ResponseCode.SUCCESS, r.remark
            assert r.version == 479, f"response version {r.version}"
    asyncio.run(with_broker(tmp_path, scenario))


def test_a_pull_is_answered_with_at_most_the_message_and_byte_caps(tmp_path):
    """maxMsgNums above the broker's cap gets MAX_PULL_MESSAGES messages, and large messages stop an
    answer before MAX_PULL_BYTES (as RocketMQ's maxTransferBytesOnMessageInMemory does)."""
    from rocketq.broker.pull import MAX_PULL_MESSAGES
    from rocketq.store.reads import MAX_PULL_BYTES

    def batch(topic, bodies):
        req = send_v2(topic, encode_batch([(0, b, "") for b in bodies]), queue_id=0)
        req.code = RequestCode.SEND_BATCH_MESSAGE
        return req

    def many(topic, offset):
        req = pull(topic, 0, offset)
        req.ext_fields["maxMsgNums"] = str(MAX_PULL_MESSAGES * 2)
        return req

    async def scenario(broker, client):
        total = MAX_PULL_MESSAGES + 100
        for start in range(0, total, 500):
            r = await client.invoke(batch("Caps", [b"%d" % i for i in range(start, min(total, start + 500))]),
                                    timeout_s=10)
            assert r.code == ResponseCode.SUCCESS, r.remark
        big = 600 << 10                                       # 1 MiB segments here: one a segment
        for i in range(10):
            r = await client.invoke(send_v2("CapsBytes", bytes([i]) * big, queue_id=0), timeout_s=10)
            assert r.code == ResponseCode.SUCCESS, r.remark
        await asyncio.to_thread(broker.store.wait_dispatched)
        first = await client.invoke(many("Caps", 0), timeout_s=10)
        assert [m.body for m in split_records(first.body)] == [b"%d" % i for i in range(MAX_PULL_MESSAGES)]
        assert first.ext_fields["nextBeginOffset"] == str(MAX_PULL_MESSAGES)
        rest = await client.invoke(many("Caps", MAX_PULL_MESSAGES), timeout_s=10)
        assert len(split_records(rest.body)) == 100
        capped = await client.invoke(many("CapsBytes", 0), timeout_s=10)
        got = split_records(capped.body)
        assert len(capped.body) <= MAX_PULL_BYTES            # the segments the records are in do not matter
        assert len(got) == MAX_PULL_BYTES // (big + 200)
        assert [m.body[:1] for m in got] == [bytes([i]) for i in range(len(got))]
        assert capped.ext_fields["nextBeginOffset"] == str(len(got))
    # a pull reads one consume-queue file, as RocketMQ's does: room for the whole cap in one
    asyncio.run(with_broker(tmp_path, scenario, store={"consume_queue_entries": 3 * MAX_PULL_MESSAGES}))
