"""The message a producer hands to the store.

``Message`` is what callers build; the store turns it into a CommitLog record (see
:mod:`rocketq.store.record`).  Tags, keys and the delay level are properties on the wire and on
disk (``TAGS``, ``KEYS`` space-separated, ``DELAY``); they get their own fields here because
every caller uses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketq.common.msgid import HostAddress
from rocketq.common.properties import check_separators
from rocketq.common.sysflag import KEY_SEPARATOR, PROPERTY_DELAY, PROPERTY_KEYS, PROPERTY_TAGS

DEFAULT_BORN_HOST = HostAddress(b"\x7f\x00\x00\x01", 0)


@dataclass(slots=True)
class Message:
    topic: str
    body: bytes = b""
    queue_id: int = 0
    tags: str | None = None
    keys: list[str] | str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0          # ms since the epoch; 0 means "now" at append time
    born_host: HostAddress = DEFAULT_BORN_HOST
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    delay_level: int = 0

    def key_list(self) -> list[str]:
        keys = self.keys
        if keys is None:
            keys = self.properties.get(PROPERTY_KEYS) or ""
        if isinstance(keys, str):
            return [k for k in keys.split(KEY_SEPARATOR) if k]
        return list(keys)

    def properties_string(self) -> str:
        """The on-disk properties string, tags/keys/delay folded in; raises on separators."""
        props = self.properties
        parts = []
        pairs = 0
        tags, keys, delay = self.tags, self.keys, self.delay_level
        if props:
            skip = {PROPERTY_TAGS} if tags else set()
            if keys is not None:
                skip.add(PROPERTY_KEYS)
            if delay:
                skip.add(PROPERTY_DELAY)
            for k, v in props.items():
                if k not in skip:
                    parts.append(f"{k}\x01{v}\x02")
                    pairs += 1
        if tags:
            parts.append(f"TAGS\x01{tags}\x02")
            pairs += 1
        keys_text = keys if keys is None or isinstance(keys, str) else " ".join(keys)
        if keys_text:
            parts.append(f"KEYS\x01{keys_text}\x02")
            pairs += 1
        if delay:
            parts.append(f"DELAY\x01{delay}\x02")
            pairs += 1
        text = "".join(parts)
        check_separators(text, pairs)
        return text
