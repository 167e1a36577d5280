"""The transaction checker reads the op records (RMQ_SYS_TRANS_OP_HALF_TOPIC) from a walk offset that
moves: once more op records were written than one round reads, a half message resolved long ago is
still known resolved, and its producer is not asked again (which a COMMIT answer would turn into a
second copy of the message).  A real broker on loopback; the read window is made small."""

import asyncio

from broker_helpers import send_v2, transaction_producer, with_broker

from rocketq.broker import transaction_check
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

HALVES = 12


def test_resolved_halves_stay_resolved_past_one_rounds_op_window(tmp_path, monkeypatch):
    monkeypatch.setattr(transaction_check, "MAX_SCAN", 2)         # a round reads 2 halves and 8 op records

    async def scenario(broker, client):
        checks = []
        producer = await transaction_producer(broker.server.port, checks.append)
        try:
            for i in range(HALVES):
                req = send_v2("Pay", b"tx%d" % i, props="TRAN_MSG\x01true\x02PGROUP\x01PID_TX\x02")
                req.ext_fields["f"] = "4"                           # PREPARED
                r = await producer.invoke(req, timeout_s=5)
                assert r.code == ResponseCode.SUCCESS
                end = RemotingCommand.create_request(RequestCode.END_TRANSACTION, {
                    "producerGroup": "PID_TX", "tranStateTableOffset": 0,
                    "commitLogOffset": int(r.ext_fields["msgId"][-16:], 16), "commitOrRollback": 8,
                    "fromTransactionCheck": False, "msgId": "x", "transactionId": "t"})
                assert (await producer.invoke(end, timeout_s=5)).code == ResponseCode.SUCCESS
            await asyncio.to_thread(broker.store.wait_dispatched)
            for _ in range(HALVES):                                 # enough rounds to walk every half
                assert await broker.transaction_checker.check_once() == 0
            assert not checks, [c.ext_fields for c in checks]
            assert sum(broker.store.max_offset("Pay", q) for q in range(4)) == HALVES     # each committed once
            assert broker.store.max_offset("RMQ_SYS_TRANS_HALF_TOPIC", 0) == HALVES        # nothing re-put
        finally:
            await producer.close()
    asyncio.run(with_broker(tmp_path, scenario, transaction_timeout_s=0.0))
