"""The transaction checker reads the op records (RMQ_SYS_TRANS_OP_HALF_TOPIC) from a walk offset that
moves: once more op records were written than one round reads, a half message resolved long ago is
still known resolved, and its producer is not asked again (which a COMMIT answer would turn into a
second copy of the message).  A real broker on loopback; the read window is made small."""

import asyncio

import pytest
from broker_helpers import send_v2, transaction_producer, with_broker

from rocketq.broker import transaction_check
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

HALVES = 12
COMMIT, ROLLBACK = 8, 12


def end_request(commit_log_offset: int, kind: int, *, from_check: bool) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.END_TRANSACTION, {
        "producerGroup": "PID_TX", "tranStateTableOffset": 0, "commitLogOffset": commit_log_offset,
        "commitOrRollback": kind, "fromTransactionCheck": from_check, "msgId": "x", "transactionId": "t"})


async def send_half(producer, body: bytes) -> int:
    """A half message of PID_TX for topic Pay; its commitlog offset."""
    req = send_v2("Pay", body, props="TRAN_MSG\x01true\x02PGROUP\x01PID_TX\x02")
    req.ext_fields["f"] = "4"                                       # PREPARED
    r = await producer.invoke(req, timeout_s=5)
    assert r.code == ResponseCode.SUCCESS
    return int(r.ext_fields["msgId"][-16:], 16)


def test_resolved_halves_stay_resolved_past_one_rounds_op_window(tmp_path, monkeypatch):
    monkeypatch.setattr(transaction_check, "MAX_SCAN", 2)         # a round reads 2 halves and 8 op records

    async def scenario(broker, client):
        checks = []
        producer = await transaction_producer(broker.server.port, checks.append)
        try:
            for i in range(HALVES):
                end = end_request(await send_half(producer, b"tx%d" % i), COMMIT, from_check=False)
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


@pytest.mark.parametrize("late_first", [True, False], ids=["producer-end-first", "check-answer-first"])
@pytest.mark.parametrize("answer", [COMMIT, ROLLBACK], ids=["answer-commit", "answer-rollback"])
def test_a_transaction_ended_by_its_producer_and_by_a_check_answer_ends_once(tmp_path, late_first, answer):
    """The producer's own COMMIT comes after the transaction timeout: the checker has put the half
    message back and asked about the copy.  Both ends arrive; the message is committed once (the
    first end wins), and both copies are resolved (nothing is asked again)."""
    async def scenario(broker, client):
        checks = []
        producer = await transaction_producer(broker.server.port, checks.append)
        try:
            first = await send_half(producer, b"late")
            await asyncio.to_thread(broker.store.wait_dispatched)
            assert await broker.transaction_checker.check_once() == 1
            for _ in range(500):
                if checks:
                    break
                await asyncio.sleep(0.01)
            copy = int(checks[0].ext_fields["commitLogOffset"])
            assert copy != first
            ends = [end_request(first, COMMIT, from_check=False), end_request(copy, answer, from_check=True)]
            for end in ends if late_first else ends[::-1]:
                assert (await producer.invoke(end, timeout_s=5)).code == ResponseCode.SUCCESS
            await asyncio.to_thread(broker.store.wait_dispatched)
            committed = 1 if late_first or answer == COMMIT else 0
            assert sum(broker.store.max_offset("Pay", q) for q in range(4)) == committed
            assert await broker.transaction_checker.check_once() == 0           # both copies resolved
            assert len(checks) == 1
        finally:
            await producer.close()
    asyncio.run(with_broker(tmp_path, scenario, transaction_timeout_s=0.0))
