"""The RabbitMQ peer stops everything it started, the Erlang port mapper included."""

import subprocess

import pytest

from rocketq.bench.compare.peers import which
from rocketq.bench.compare.rabbitmq import RabbitStreams

missing = RabbitStreams.available()


@pytest.mark.skipif(missing is not None, reason=str(missing))
def test_a_stopped_node_leaves_no_epmd_behind(tmp_path):
    node = RabbitStreams(tmp_path)
    node.start()
    try:
        epmd = [which("epmd"), "-port", str(node.epmd_port), "-names"]
        assert subprocess.run(epmd, capture_output=True, timeout=10).returncode == 0, "no private epmd started"
    finally:
        node.stop()
    assert subprocess.run(epmd, capture_output=True, timeout=10).returncode != 0, "epmd still runs"
