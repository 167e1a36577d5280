"""The NameServer: a route registry that brokers register with and clients ask for routes.

* :mod:`~rocketq.namesrv.route_info` — :class:`RouteInfoManager`, the route tables (pure state).
* :mod:`~rocketq.namesrv.register_body` — REGISTER_BROKER bodies, JSON and compressed (pure decode).
* :mod:`~rocketq.namesrv.kv_config` — the persisted namespace/key/value config.
* :mod:`~rocketq.namesrv.processor` — one function per request code, in a dispatch table.
* :mod:`~rocketq.namesrv.controller` — the controller of brokers in controller mode (``--enable-controller``).
* :mod:`~rocketq.namesrv.server` — :class:`NameServer`, all of the above behind a RemotingServer.
* :mod:`~rocketq.namesrv.cli` — the ``rocketq namesrv`` command.
"""

from rocketq.namesrv.kv_config import KVConfigManager
from rocketq.namesrv.register_body import (
    DataVersion, RegisterBodyError, RegisterBrokerBody, TopicConfigWrapper, TopicQueueConfig, decode_register_body,
)
from rocketq.namesrv.route_info import BrokerData, QueueData, RegisterResult, RouteInfoManager
from rocketq.namesrv.server import NameServer

__all__ = [
    "BrokerData", "DataVersion", "KVConfigManager", "NameServer", "QueueData", "RegisterBodyError",
    "RegisterBrokerBody", "RegisterResult", "RouteInfoManager", "TopicConfigWrapper", "TopicQueueConfig",
    "decode_register_body",
]
