"""Topic and group name rules (RocketMQ ``TopicValidator`` and the client's ``Validators``).

* a topic is 1 to 127 characters of ``[%|a-zA-Z0-9_-]`` (``TopicValidator.validateTopic``);
* a group (consumer, producer or subscription group) is 1 to 255 characters of the same set
  (RocketMQ 5.3: ``Validators.CHARACTER_MAX_LENGTH`` and ``isTopicOrGroupIllegal``).

The character set is also what makes a name safe as a directory name: it has no ``/``, no NUL, no
``.`` (so never ``.`` or ``..``), and 255 characters is the longest file name Linux file systems
allow.  :func:`topic_error` is on the store's put path, so it is cached; :func:`name_refusal` is
the sentence a broker answers a request with, naming the bad name and the rule.
"""

from __future__ import annotations

import re
from functools import lru_cache

TOPIC_MAX_BYTES = 127
GROUP_MAX_CHARS = 255            # RocketMQ 5.3 Validators.CHARACTER_MAX_LENGTH
PATH_COMPONENT_MAX_BYTES = 255   # NAME_MAX on Linux file systems
LEGAL_CHARS = "^[%|a-zA-Z0-9_-]+$"
_LEGAL_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]+")
_SHOWN_CHARS = 40                # a refusal shows this much of a long name


def topic_error(topic: str) -> str | None:
    """A sentence saying why *topic* is illegal, or None when it is fine."""
    if len(topic) > TOPIC_MAX_BYTES:       # before the cache: hostile long names must not fill it
        return f"the topic {topic[:40]!r}... is longer than {TOPIC_MAX_BYTES} bytes"
    return _short_topic_error(topic)


@lru_cache(maxsize=8192)
def _short_topic_error(topic: str) -> str | None:
    if not topic:
        return "the topic is empty"
    if len(topic.encode()) > TOPIC_MAX_BYTES:
        return f"the topic {topic[:40]!r}... is longer than {TOPIC_MAX_BYTES} bytes"
    if not _LEGAL_TOPIC.fullmatch(topic):
        return f"the topic {topic!r} contains characters other than letters, digits, '%', '|', '-' and '_'"
    return None


def name_refusal(kind: str, name: str) -> str | None:
    """None when *name* is a legal *kind* ("topic" or "group") name, else the sentence a refusal
    carries: the name (shortened when long) and the rule it breaks."""
    limit = TOPIC_MAX_BYTES if kind == "topic" else GROUP_MAX_CHARS
    if not isinstance(name, str) or not name or len(name) > limit:     # never cached: see topic_error
        return _refusal(kind, name, limit)
    return _short_name_refusal(kind, name, limit)


@lru_cache(maxsize=8192)
def _short_name_refusal(kind: str, name: str, limit: int) -> str | None:
    return _refusal(kind, name, limit)


def _refusal(kind: str, name: str, limit: int) -> str | None:
    rule = f"a {kind} name is 1 to {limit} characters matching {LEGAL_CHARS}"
    if not isinstance(name, str) or not name:
        return f"the {kind} name is empty; {rule}"
    shown = repr(name) if len(name) <= _SHOWN_CHARS else f"{name[:_SHOWN_CHARS]!r}... ({len(name)} characters)"
    if len(name) > limit:
        return f"the {kind} name {shown} is longer than {limit} characters; {rule}"
    if not _LEGAL_TOPIC.fullmatch(name):
        return f"the {kind} name {shown} contains illegal characters; {rule}"
    return None


def path_component_error(name: str) -> str | None:
    """Why *name* cannot be one directory name inside the store (a topic's consume-queue directory),
    or None.  The store's own line of defence, whatever the layers above let through."""
    if not name or name in (".", ".."):
        return f"{name!r} is not a directory name"
    if "/" in name or "\\" in name or "\x00" in name:
        return f"{name[:_SHOWN_CHARS]!r} contains a path separator or NUL"
    if len(name.encode("utf-8", "surrogatepass")) > PATH_COMPONENT_MAX_BYTES:
        return f"{name[:_SHOWN_CHARS]!r}... is longer than {PATH_COMPONENT_MAX_BYTES} bytes"
    return None


# RocketMQ's TopicValidator: names an admin may not create or delete (validateSystemTopicWhenUpdateTopic,
# on by default), and topics no client may send to
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYSTEM_TOPICS = frozenset({"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC",
                           "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC",
                           "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT", "CHECKPOINT_TOPIC"})
NOT_ALLOWED_SEND_TOPICS = frozenset({"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC",
                                     "TRANS_CHECK_MAX_TIME_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT"})


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)
