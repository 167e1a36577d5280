import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))     # broker_helpers

from grpc_helpers import ServerThread


@pytest.fixture
def server(tmp_path):
    s = ServerThread(tmp_path).start()
    try:
        yield s
    finally:
        s.shutdown()


def pytest_configure(config):
    # rocketmq-python-client 5.1.2 logs a cancelled Telemetry stream with the deprecated logger.warn
    config.addinivalue_line("filterwarnings", "ignore:The 'warn' method is deprecated:DeprecationWarning")
