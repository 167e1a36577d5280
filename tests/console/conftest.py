"""Fixtures of the console tests: one ``rocketq serve`` (trace topic on) per module."""

import pytest
from console_helpers import start_serve, stop_serve


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    s = start_serve(tmp_path_factory.mktemp("console"), "--set", "traceTopicEnable=true")
    yield s
    stop_serve(s)
