import gc
import importlib.util
import os

import pytest

# Servers the tests start as processes (`rocketq serve`, `rocketq broker`) read ROCKETQ_<key>
# settings: small segments and index files, so a test run does not fallocate gigabytes (a default
# store preallocates a 1 GiB CommitLog segment, the next one, and a 420 MB index file).
# The console and /metrics on ports the system picks: several serve processes run at once in some
# modules (the reference-client suites keep three), and 8080 / 5557 would be taken by the first.
for _key, _value in (("MAPEDFILESIZECOMMITLOG", str(8 << 20)), ("MAXHASHSLOTNUM", "100003"),
                     ("MAXINDEXNUM", "400000"), ("CONSOLEPORT", "0"), ("METRICSPROMEXPORTERPORT", "0")):
    os.environ.setdefault(f"ROCKETQ_{_key}", _value)


@pytest.fixture(autouse=True)
def _collect_garbage():
    """Mappings of closed stores go away promptly, so temp dirs can be removed between tests."""
    yield
    gc.collect()


# `make test` runs the suite on two workers (pytest-xdist).  Work is handed out a test file at a time
# (module fixtures start once), except that the tests under each prefix below go to one worker together:
# the compat and Spark folders share session fixtures that are costly to start (the reference clients'
# `rocketq serve` and their Java, Go and Node builds; one SparkSession; one etcd), and the peers' tests start
# system-wide daemons (RabbitMQ's epmd on its one port).  xdist's own `loadgroup` marks cannot do this
# under pytest 9.2 (xdist 3.8 renames items through an attribute pytest no longer reads), its
# scheduler hook can.
_ONE_WORKER = {"tests/compat/": "compat", "tests/spark/": "spark", "tests/controller/": "controller", "tests/bench/": "peers",
               "tests/cli/test_bench_compare.py": "peers"}

if importlib.util.find_spec("xdist") is not None:
    def pytest_xdist_make_scheduler(config, log):
        from xdist.scheduler import LoadScopeScheduling

        class GroupOrFileScheduling(LoadScopeScheduling):
            def _split_scope(self, nodeid: str) -> str:
                for prefix, group in _ONE_WORKER.items():
                    if nodeid.startswith(prefix):
                        return group
                return nodeid.split("::", 1)[0]

        return GroupOrFileScheduling(config, log)
