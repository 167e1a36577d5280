"""RouteInfoManager with an injected clock: registration, routes, expiry, removal, admin."""

from __future__ import annotations

import json

from rocketq.namesrv import DataVersion, RouteInfoManager, TopicConfigWrapper, TopicQueueConfig

MASTER, SLAVE = "10.0.0.1:10911", "10.0.0.2:10911"
T0 = 1_700_000_000_000


def wrapper(*topics: str, counter: int = 1, perm: int = 6, queues: int = 4, state: int = 0) -> TopicConfigWrapper:
    return TopicConfigWrapper({t: TopicQueueConfig(t, queues, queues, perm) for t in topics},
                              DataVersion(state, T0, counter))


def master_and_slave() -> RouteInfoManager:
    rim = RouteInfoManager()
    rim.register_broker("DefaultCluster", MASTER, "broker-a", 0, "10.0.0.1:10912", wrapper("TopicTest"), T0, "c1")
    rim.register_broker("DefaultCluster", SLAVE, "broker-a", 1, "10.0.0.2:10912", wrapper("TopicTest"), T0, "c2")
    return rim


def test_route_shape_matches_rocketmq():
    route = master_and_slave().route("TopicTest")
    assert route == {
        "orderTopicConf": None,
        "queueDatas": [{"brokerName": "broker-a", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                        "topicSysFlag": 0}],
        "brokerDatas": [{"cluster": "DefaultCluster", "brokerName": "broker-a",
                         "brokerAddrs": {"0": MASTER, "1": SLAVE}, "enableActingMaster": False}],
        "filterServerTable": {},
    }
    assert json.loads(json.dumps(route)) == route          # standard JSON, string keys


def test_unknown_topic_has_no_route():
    assert master_and_slave().route("Nope") is None


def test_slave_learns_master_and_ha_addr():
    rim = RouteInfoManager()
    assert rim.register_broker("C", SLAVE, "b", 1, "ha-s", wrapper(), T0, "c2").master_addr is None
    master = rim.register_broker("C", MASTER, "b", 0, "ha-m", wrapper(), T0, "c1")
    assert master.master_addr is None and master.ha_server_addr is None
    slave = rim.register_broker("C", SLAVE, "b", 1, "ha-s", wrapper(), T0 + 1, "c2")
    assert (slave.ha_server_addr, slave.master_addr) == ("ha-m", MASTER)


def test_topics_only_from_master():
    rim = RouteInfoManager()
    rim.register_broker("C", SLAVE, "b", 1, "", wrapper("OnlySlave"), T0, "c2")
    assert rim.route("OnlySlave") is None and rim.all_topics() == []


def test_unchanged_data_version_does_not_reread_topics():
    rim = RouteInfoManager()
    rim.register_broker("C", MASTER, "b", 0, "", wrapper("A", counter=1), T0, "c")
    rim.register_broker("C", MASTER, "b", 0, "", wrapper("A", "B", counter=1), T0 + 30_000, "c")
    assert rim.all_topics() == ["A"]
    assert rim.broker_live_table[MASTER].last_update_ms == T0 + 30_000
    rim.register_broker("C", MASTER, "b", 0, "", wrapper("A", "B", counter=2), T0 + 60_000, "c")
    assert rim.all_topics() == ["A", "B"]


def test_queue_numbers_update_when_version_changes():
    rim = RouteInfoManager()
    rim.register_broker("C", MASTER, "b", 0, "", wrapper("A", counter=1, queues=4), T0, "c")
    rim.register_broker("C", MASTER, "b", 0, "", wrapper("A", counter=2, queues=8), T0, "c")
    assert rim.route("A")["queueDatas"][0]["writeQueueNums"] == 8


def test_expiry_after_120_seconds():
    rim = master_and_slave()
    rim.register_broker("DefaultCluster", SLAVE, "broker-a", 1, "", wrapper("TopicTest"), T0 + 60_000, "c2")
    assert rim.scan_inactive(T0 + 120_000) == []                # exactly at the limit: still alive
    assert rim.scan_inactive(T0 + 120_001) == [MASTER]
    assert rim.route("TopicTest")["brokerDatas"][0]["brokerAddrs"] == {"1": SLAVE}
    assert rim.scan_inactive(T0 + 180_001) == [SLAVE]
    assert rim.route("TopicTest") is None
    assert rim.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}
    assert rim.all_topics() == []


def test_broker_heartbeat_timeout_overrides_default():
    rim = RouteInfoManager()
    rim.register_broker("C", MASTER, "b", 0, "", wrapper("A"), T0, "c", timeout_ms=10_000)
    assert rim.scan_inactive(T0 + 10_001) == [MASTER]


def test_connection_close_removes_only_that_connections_broker():
    rim = master_and_slave()
    assert rim.on_connection_closed("c2") == [SLAVE]
    assert rim.route("TopicTest")["brokerDatas"][0]["brokerAddrs"] == {"0": MASTER}
    assert rim.on_connection_closed("unknown") == []
    rim.register_broker("DefaultCluster", MASTER, "broker-a", 0, "", wrapper("TopicTest"), T0, "c3")
    assert rim.on_connection_closed("c1") == []                 # superseded by the reconnection
    assert rim.on_connection_closed("c3") == [MASTER]
    assert rim.route("TopicTest") is None


def test_unregister():
    rim = master_and_slave()
    rim.unregister_broker("DefaultCluster", MASTER, "broker-a", 0)
    assert MASTER not in rim.broker_live_table
    assert rim.route("TopicTest")["brokerDatas"][0]["brokerAddrs"] == {"1": SLAVE}
    rim.unregister_broker("DefaultCluster", SLAVE, "broker-a", 1)
    assert rim.route("TopicTest") is None and rim.cluster_addr_table == {}


def test_slave_promoted_to_master_keeps_one_entry_per_addr():
    rim = master_and_slave()
    rim.unregister_broker("DefaultCluster", MASTER, "broker-a", 0)
    rim.register_broker("DefaultCluster", SLAVE, "broker-a", 0, "", wrapper("TopicTest"), T0, "c2")
    assert rim.broker_addr_table["broker-a"].broker_addrs == {0: SLAVE}


def test_a_replaced_master_registering_late_does_not_take_the_route_back():
    """Controller mode: the slave elected master of epoch 2 holds id 0; the old master of epoch 1 (its
    periodic registration, or one sent before it heard) is ignored and forgotten, as in RocketMQ 5."""
    rim = RouteInfoManager()
    rim.register_broker("C", MASTER, "b", 0, "ha-m", wrapper("T", state=1), T0, "c1")
    rim.register_broker("C", SLAVE, "b", 1, "ha-s", wrapper("T", state=1), T0, "c2")
    rim.register_broker("C", SLAVE, "b", 0, "ha-s", wrapper("T", state=2, counter=2), T0 + 1, "c2")
    result = rim.register_broker("C", MASTER, "b", 0, "ha-m", wrapper("T", state=1, counter=3), T0 + 2, "c1")
    assert result.master_addr is None
    assert rim.route("T")["brokerDatas"][0]["brokerAddrs"] == {"0": SLAVE}
    assert MASTER not in rim.broker_live_table and SLAVE in rim.broker_live_table
    # a newer epoch (the old master elected again after it rejoined) takes the id back
    rim.register_broker("C", MASTER, "b", 0, "ha-m", wrapper("T", state=3, counter=4), T0 + 3, "c1")
    assert rim.route("T")["brokerDatas"][0]["brokerAddrs"] == {"0": MASTER}


def test_without_state_versions_the_latest_registration_holds_the_id():
    rim = master_and_slave()
    rim.register_broker("DefaultCluster", "10.0.0.9:10911", "broker-a", 0, "", wrapper("TopicTest"), T0, "c9")
    assert rim.route("TopicTest")["brokerDatas"][0]["brokerAddrs"]["0"] == "10.0.0.9:10911"


def test_wipe_write_perm():
    rim = master_and_slave()
    rim.register_broker("DefaultCluster", MASTER, "broker-a", 0, "", wrapper("TopicTest", "Other", counter=2), T0, "c1")
    rim.register_broker("DefaultCluster", "10.0.0.3:10911", "broker-b", 0, "", wrapper("TopicTest"), T0, "c3")
    assert rim.wipe_write_perm("broker-a") == 2
    perms = {q["brokerName"]: q["perm"] for q in rim.route("TopicTest")["queueDatas"]}
    assert perms == {"broker-a": 4, "broker-b": 6}
    assert rim.wipe_write_perm("no-such-broker") == 0


def test_delete_topic():
    rim = master_and_slave()
    assert rim.delete_topic("TopicTest") is True
    assert rim.route("TopicTest") is None and rim.all_topics() == []
    assert rim.delete_topic("TopicTest") is False


def test_delete_topic_on_one_cluster():
    rim = RouteInfoManager()
    rim.register_broker("C1", MASTER, "a", 0, "", wrapper("T"), T0, "c1")
    rim.register_broker("C2", SLAVE, "b", 0, "", wrapper("T"), T0, "c2")
    assert rim.delete_topic("T", "C1") is True
    assert [q["brokerName"] for q in rim.route("T")["queueDatas"]] == ["b"]


def test_topics_by_cluster_and_cluster_info():
    rim = RouteInfoManager()
    rim.register_broker("C1", MASTER, "a", 0, "", wrapper("T1", "Shared"), T0, "c1")
    rim.register_broker("C2", SLAVE, "b", 0, "", wrapper("T2", "Shared"), T0, "c2")
    assert rim.topics_by_cluster("C1") == ["Shared", "T1"]
    assert rim.topics_by_cluster("C2") == ["Shared", "T2"]
    assert rim.topics_by_cluster("none") == []
    info = rim.cluster_info()
    assert info["clusterAddrTable"] == {"C1": ["a"], "C2": ["b"]}
    assert info["brokerAddrTable"]["a"]["brokerAddrs"] == {"0": MASTER}


def test_filter_servers_appear_in_route():
    rim = RouteInfoManager()
    rim.register_broker("C", MASTER, "a", 0, "", wrapper("T"), T0, "c", filter_servers=["10.0.0.9:1"])
    assert rim.route("T")["filterServerTable"] == {MASTER: ["10.0.0.9:1"]}
    rim.register_broker("C", MASTER, "a", 0, "", wrapper("T"), T0, "c", filter_servers=[])
    assert rim.route("T")["filterServerTable"] == {}


def test_slave_acting_master_is_routed_read_only_while_the_master_is_away():
    rim = RouteInfoManager()
    for addr, bid, conn in ((MASTER, 0, "c1"), (SLAVE, 1, "c2"), ("10.0.0.3:10911", 2, "c3")):
        rim.register_broker("DefaultCluster", addr, "broker-a", bid, "", wrapper("TopicTest"), T0, conn,
                            enable_acting_master=True)
    assert rim.route("TopicTest")["brokerDatas"][0]["enableActingMaster"] is True
    rim.on_connection_closed("c1")                               # the master is gone
    route = rim.route("TopicTest")
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": SLAVE, "2": "10.0.0.3:10911"}
    assert route["queueDatas"][0]["perm"] == 4                   # read-only: producers go elsewhere
    assert rim.cluster_info()["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"1": SLAVE, "2": "10.0.0.3:10911"}
    rim.register_broker("DefaultCluster", SLAVE, "broker-a", 1, "", wrapper("TopicTest", "NewTopic", counter=2),
                        T0 + 1, "c2", enable_acting_master=True)  # the prime slave's topics reach the route
    assert rim.route("NewTopic")["queueDatas"][0]["perm"] == 4
    rim.register_broker("DefaultCluster", MASTER, "broker-a", 0, "", wrapper("TopicTest"), T0 + 2, "c4",
                        enable_acting_master=True)
    route = rim.route("TopicTest")
    assert route["brokerDatas"][0]["brokerAddrs"]["0"] == MASTER and route["queueDatas"][0]["perm"] == 6


def test_without_acting_master_a_masterless_group_has_no_id_0():
    rim = master_and_slave()
    rim.on_connection_closed("c1")
    assert rim.route("TopicTest")["brokerDatas"][0]["brokerAddrs"] == {"1": SLAVE}
    assert rim.route("TopicTest")["queueDatas"][0]["perm"] == 6
