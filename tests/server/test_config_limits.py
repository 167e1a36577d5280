"""The connection limits' keys (RocketMQ's NettyServerConfig names, plus rocketq's own two) reach
every port's ConnectionLimits; bad values name the key."""

import pytest

from rocketq.remoting.limits import DEFAULT_BACKLOG, DEFAULT_IDLE_TIMEOUT_S, DEFAULT_WRITE_HIGH_WATER_BYTES
from rocketq.server import config
from rocketq.server.config import ConfigError


def test_limit_keys_from_a_broker_conf(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("serverChannelMaxIdleTimeSeconds=30\nserverSocketBacklog=2048\nserverMaxConnections=5000\n"
                    "writeBufferHighWaterMark=0\nwriteBufferLowWaterMark=0\nserverWriteStallTimeoutSeconds=7.5\n")
    limits = config.load(conf).broker.limits
    assert (limits.idle_timeout_s, limits.backlog, limits.max_connections) == (30.0, 2048, 5000)
    assert limits.write_high_water_bytes == DEFAULT_WRITE_HIGH_WATER_BYTES      # 0: RocketMQ's "the default"
    assert limits.write_stall_timeout_s == 7.5
    assert limits.connections_limit() == 5000


def test_defaults_are_rocketmqs(tmp_path):
    limits = config.load(None).broker.limits
    assert limits.idle_timeout_s == DEFAULT_IDLE_TIMEOUT_S == 120 and limits.backlog == DEFAULT_BACKLOG == 1024
    assert limits.max_connections == 0 and limits.connections_limit() >= 16          # from RLIMIT_NOFILE


@pytest.mark.parametrize("line, expected", [
    ("serverMaxConnections=-1", "serverMaxConnections"),
    ("serverSocketBacklog=0", "serverSocketBacklog"),
    ("writeBufferHighWaterMark=1000\nwriteBufferLowWaterMark=1000", "writeBufferLowWaterMark"),
    ("serverChannelMaxIdleTimeSeconds=soon", "serverChannelMaxIdleTimeSeconds"),
])
def test_bad_limit_values_name_the_key(tmp_path, line, expected):
    conf = tmp_path / "broker.conf"
    conf.write_text(line + "\n")
    with pytest.raises(ConfigError, match=expected):
        config.load(conf)
