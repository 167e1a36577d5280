"""Configuration from broker.conf / TOML / environment / flags, with bad keys and values named."""

import pytest

from rocketq.server import config
from rocketq.server.config import ConfigError


def test_a_rocketmq_broker_conf_carries_over(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("# RocketMQ's sample\nbrokerClusterName = ProdCluster\nbrokerName=broker-b\nbrokerId=0\n"
                    "deleteWhen=04\nfileReservedTime=48\nbrokerRole=ASYNC_MASTER\nflushDiskType=SYNC_FLUSH\n"
                    f"storePathRootDir={tmp_path}/store\nlistenPort: 10921\nnamesrvAddr=10.0.0.1:9876;10.0.0.2:9876\n"
                    "mapedFileSizeCommitLog=\\\n  1073741824\nsendMessageThreadPoolNums=4\n"
                    "transactionCheckInterval=30000\n")
    cfg = config.load(conf)
    b, s = cfg.broker, cfg.store
    assert (b.cluster_name, b.broker_name, b.port, b.namesrv_addr) == ("ProdCluster", "broker-b", 10921,
                                                                         "10.0.0.1:9876;10.0.0.2:9876")
    assert b.transaction_check_interval_s == 30.0
    assert s.flush_disk_type == "SYNC_FLUSH" and s.file_reserved_time_hours == 48 and s.commitlog_file_size == 1 << 30
    assert s.store_path == tmp_path / "store"
    assert any("sendMessageThreadPoolNums" in w and "ignored" in w for w in cfg.warnings)


def test_toml_tables_group_keys_and_later_sources_win(tmp_path):
    conf = tmp_path / "rocketq.toml"
    conf.write_text('[broker]\nbrokerName = "broker-t"\nlistenPort = 10931\n[store]\nflushDiskType = "ASYNC_FLUSH"\n'
                    'maxMessageSize = 1048576\n')
    cfg = config.load(conf, environ={"ROCKETQ_LISTENPORT": "10941", "HOME": "/x"},
                      overrides={"brokerName": "from-flag", "flushDiskType": None})
    assert cfg.broker.port == 10941 and cfg.broker.broker_name == "from-flag"
    assert cfg.store.max_message_size == 1 << 20 and cfg.store.flush_disk_type == "ASYNC_FLUSH"


def test_unknown_keys_are_errors_that_say_where_and_suggest(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=a\nlistenPrt=10911\n")
    with pytest.raises(ConfigError) as e:
        config.load(conf, environ={"ROCKETQ_FLUSHDISKTYP": "SYNC_FLUSH"})
    text = str(e.value)
    assert f"{conf}:2: unknown key 'listenPrt' (did you mean 'listenPort'?)" in text
    assert "environment ROCKETQ_FLUSHDISKTYP" in text


@pytest.mark.parametrize("line, expected", [
    ("listenPort=abc", "listenPort"), ("listenPort=70000", "70000"), ("flushDiskType=SOMETIMES", "flushDiskType"),
    ("brokerRole=SLAVE", "brokerId 0: a master has brokerId 0"), ("brokerRole=LEADER", "brokerRole LEADER"), ("autoCreateTopicEnable=yes", "true or false"),
    ("brokerName=bad name", "brokerName"), ("just some words", "expected key=value"),
])
def test_bad_values_name_the_key(tmp_path, line, expected):
    conf = tmp_path / "broker.conf"
    conf.write_text(line + "\n")
    with pytest.raises(ConfigError, match=expected):
        config.load(conf)


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        config.load(tmp_path / "nope.conf")
    bad = tmp_path / "x.toml"
    bad.write_text("listenPort = = 3\n")
    with pytest.raises(ConfigError, match="x.toml"):
        config.load(bad)
