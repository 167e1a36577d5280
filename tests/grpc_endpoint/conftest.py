import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))     # broker_helpers

from grpc_helpers import DEFAULT_TRANSPORT, ServerThread, make_telemetry_streams_on_the_client_loop

# modules whose `server` tests run on both transports (the rest on DEFAULT_TRANSPORT): the calls of every
# kind (unary, server stream, Telemetry), the official client end to end, bad input, ACL
BOTH_TRANSPORTS = {"test_grpc_smoke", "test_grpc_produce", "test_grpc_consume", "test_grpc_bad_input",
                   "test_grpc_acl", "test_grpc_push"}


def pytest_generate_tests(metafunc):
    if "grpc_transport" in metafunc.fixturenames and metafunc.module.__name__ in BOTH_TRANSPORTS:
        metafunc.parametrize("grpc_transport", ["grpcio", "native"])


@pytest.fixture
def grpc_transport():
    return DEFAULT_TRANSPORT


@pytest.fixture
def server(tmp_path, grpc_transport):
    s = ServerThread(tmp_path, grpc_transport=grpc_transport).start()
    try:
        yield s
    finally:
        s.shutdown()


def pytest_configure(config):
    make_telemetry_streams_on_the_client_loop()
    # rocketmq-python-client 5.1.2 logs a cancelled Telemetry stream with the deprecated logger.warn
    config.addinivalue_line("filterwarnings", "ignore:The 'warn' method is deprecated:DeprecationWarning")
