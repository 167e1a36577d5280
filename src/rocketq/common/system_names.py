"""Topic and group names that are not the user's: what listings hide unless asked.

RocketMQ's lists, by name (``TopicValidator.SYSTEM_TOPIC_SET`` and the ``rmq_sys_`` prefix;
``MixAll``'s system consumer groups).  Besides those, a broker registers two topics named after
its cluster and after itself (RocketMQ's ``clusterTopicEnable`` / ``brokerTopicEnable``; the
NameServer lists them with every other topic), and every consumer group has its ``%RETRY%group``
and possibly ``%DLQ%group`` topics.  :func:`topic_kind` sorts a name into one of those kinds.
"""

from __future__ import annotations

from collections.abc import Collection

from rocketq.common.sysflag import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

SYSTEM_TOPICS = frozenset({
    "TBW102", "SCHEDULE_TOPIC_XXXX", "SCHEDULE_TOPIC_XXXX_V2", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
})
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
REPLY_TOPIC_SUFFIX = "_REPLY_TOPIC"

# The group RocketMQ's own tools read with (mqadmin, the dashboard): rocketq's CLI does the same
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
SYSTEM_GROUPS = frozenset({
    "DEFAULT_CONSUMER", TOOLS_CONSUMER_GROUP, "FILTERSRV_CONSUMER", "__MONITOR_CONSUMER", "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_ONSAPI_PULL", "SCHEDULE_CONSUMER",
})
SYSTEM_GROUP_PREFIX = "CID_RMQ_SYS_"

USER, RETRY, DLQ, SYSTEM, CLUSTER, BROKER = "user", "retry", "dlq", "system", "cluster", "broker"


def topic_kind(topic: str, clusters: Collection[str] = (), brokers: Collection[str] = ()) -> str:
    """``user``, ``retry``, ``dlq``, ``system``, ``cluster`` or ``broker`` (the names of the given
    clusters and brokers are the topics those register)."""
    if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return RETRY
    if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
        return DLQ
    if topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX):
        return SYSTEM
    if topic in clusters:
        return CLUSTER
    if topic.endswith(REPLY_TOPIC_SUFFIX) and topic[:-len(REPLY_TOPIC_SUFFIX)] in clusters:
        return SYSTEM                             # request-reply's <cluster>_REPLY_TOPIC
    if topic in brokers:
        return BROKER
    return USER


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX)
