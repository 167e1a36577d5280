"""`bench compare`'s "Apache RocketMQ (gRPC)" row for real: Apache RocketMQ 5.3.3's NameServer and its proxy
in local mode (the broker in the proxy's JVM) under SYNC_FLUSH, driven by the official Python 5.x client
exactly as the rocketq (gRPC) row is: its sync calls counted per acknowledged send (strace), messages
sent one at a time, read back and acked, and timed end to end. One server start (~30 s of JVM start-up
on two busy cores); skipped, saying why, without java and mvn, Maven Central or the official client."""

import pytest

from rocketq.bench import official_client as oc
from rocketq.bench.compare import jars
from rocketq.bench.compare.apache_grpc import ApacheRocketMQGrpc
from rocketq.bench.compare.fsync_check import WARM_SENDS, count_syncs, strace_missing
from rocketq.bench.compare.runner import _run

N = 60                                  # sends per scenario: enough to tell one sync per ack from a timer's few
E2E_RATE, E2E_S = 100, 1.0

_why = jars.missing_java("rocketmq") or oc.available()


def _count_syncs(system, body: bytes):
    """The sync count, or None where strace is missing or may not attach (said in the skip list)."""
    if strace_missing():
        return None
    try:
        return count_syncs(system, n=N, body=body, run=_run)
    except RuntimeError as e:
        if "not permitted" in str(e):
            return None
        raise


@pytest.mark.skipif(_why is not None, reason=str(_why))
def test_apache_grpc_row_syncs_every_ack_under_sync_flush_and_moves_messages(tmp_path):
    why = ApacheRocketMQGrpc.available()            # builds (or finds) the Maven project: needs Maven Central once
    if why:
        pytest.skip(why)
    root = tmp_path / "apache-grpc"
    root.mkdir()
    system = ApacheRocketMQGrpc(root, sync=True)
    system.start()
    try:
        assert system.endpoint.startswith("127.0.0.1:")
        sent = 0
        count = _count_syncs(system, b"v" * 1024)
        if count is not None:
            assert count.acks == N and count.syncs_every_ack, count.to_dict()
            sent += (1 + WARM_SENDS) + (1 + N)         # each produce_one starts a producer with one warm send
        lat = _run(system.produce_one(N, b"x" * 128))
        assert len(lat) == N and all(t > 0 for t in lat)
        sent += 1 + N
        got, secs = _run(system.consume(sent))
        assert got == sent and secs > 0
        e2e = _run(system.end_to_end(E2E_RATE, E2E_S, 128))
        assert len(e2e) >= int(E2E_RATE * E2E_S) and all(t > 0 for t in e2e)
    finally:
        system.stop()
    assert system.proc.poll() is not None and system.namesrv_proc.poll() is not None
