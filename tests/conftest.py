import gc
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
