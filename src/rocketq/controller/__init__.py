"""The controller of brokers in controller mode as its own replicated service: ``rocketq controller``
processes sharing their state through etcd (RocketMQ's controller on DLedger, with etcd in DLedger's place).

* :mod:`~rocketq.controller.etcd` — an asyncio client of etcd's v3 JSON gateway.
* :mod:`~rocketq.controller.leadership` — which controller process is active (lease + leader key).
* :mod:`~rocketq.controller.state` — broker sets stored in etcd, written by compare-and-swap.
* :mod:`~rocketq.controller.server` — the remoting server; :mod:`~rocketq.controller.wire` its RocketMQ answers.
* :mod:`~rocketq.controller.etcd_cluster` — local etcd members for tests and ``rocketq bench failover``.
"""
