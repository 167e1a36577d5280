"""Topic name rules (RocketMQ ``TopicValidator``): at most 127 bytes of ``[%|a-zA-Z0-9_-]``."""

from __future__ import annotations

import re
from functools import lru_cache

TOPIC_MAX_BYTES = 127
_LEGAL_TOPIC = re.compile(r"[%|a-zA-Z0-9_-]+")


@lru_cache(maxsize=8192)
def topic_error(topic: str) -> str | None:
    """A sentence saying why *topic* is illegal, or None when it is fine."""
    if not topic:
        return "the topic is empty"
    if len(topic.encode()) > TOPIC_MAX_BYTES:
        return f"the topic {topic[:40]!r}... is longer than {TOPIC_MAX_BYTES} bytes"
    if not _LEGAL_TOPIC.fullmatch(topic):
        return f"the topic {topic!r} contains characters other than letters, digits, '%', '|', '-' and '_'"
    return None
