"""`bench compare --server-config` with RocketMQ's transient store pool on: the async server takes the
file as it is, the sync server (RocketMQ and rocketq refuse a pool with SYNC_FLUSH) starts without the
pool instead of failing the whole comparison."""

from rocketq.bench.compare.rocketq_remoting import Rocketq
from rocketq.bench.compare.runner import _run
from rocketq.bench.security import BenchSecurity

POOL_CONF = "transientStorePoolEnable=true\ntransientStorePoolSize=1\nmapedFileSizeCommitLog=8388608\n"


def test_a_pool_config_runs_both_the_async_and_the_sync_server(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(POOL_CONF)
    for sync in (False, True):
        system = Rocketq(tmp_path / f"root-{'sync' if sync else 'async'}", sync=sync,
                         security=BenchSecurity(server_config=conf))
        system.start()
        try:
            assert len(_run(system.produce_one(20, b"x" * 128))) == 20
        finally:
            system.stop()
