"""The body of REGISTER_BROKER (RocketMQ ``RegisterBrokerBody``), in both of its wire forms.

Theory of operation
-------------------
A broker describes the topics it serves and a ``DataVersion`` that changes whenever that set
changes; the NameServer only re-reads the topics when the version moved.  The body comes in two
forms, chosen by the request header ``compressed``:

* JSON (the default)::

    {"topicConfigSerializeWrapper": {"topicConfigTable": {name: TopicConfig},
                                     "dataVersion": {"stateVersion", "timestamp", "counter"}},
     "filterServerList": []}

  written by fastjson, so integer map keys may be unquoted; it is parsed leniently.

* compressed: one zlib (Deflate) stream of big-endian length-prefixed parts::

    int32 len + DataVersion JSON
    int32 topicCount, then topicCount x (int32 len + TopicConfig.encode())
    int32 len + filterServerList JSON
    [5.x: int32 mappingCount + static-topic mappings - ignored here]

  where ``TopicConfig.encode()`` is ``"name read write perm filterType [attributesJSON]"``.

This module only decodes; it performs no I/O and knows nothing of routes or connections.  Any
malformed body raises :class:`RegisterBodyError`, never another exception type.
"""

from __future__ import annotations

import json
import struct
import zlib
from dataclasses import dataclass, field

from rocketq.common.data_version import DataVersion
from rocketq.store.config_files import loads_lenient

MAX_INFLATED_BODY_BYTES = 64 * 1024 * 1024     # a compressed body may not inflate beyond this
PERM_READ_WRITE = 6
_INT32 = struct.Struct(">i")


class RegisterBodyError(ValueError):
    """The REGISTER_BROKER body does not parse (the broker's fault, answered SYSTEM_ERROR)."""


@dataclass(frozen=True)
class TopicQueueConfig:
    """What the NameServer keeps of a broker's ``TopicConfig``."""

    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ_WRITE
    topic_sys_flag: int = 0


@dataclass
class TopicConfigWrapper:
    topic_configs: dict[str, TopicQueueConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass
class RegisterBrokerBody:
    wrapper: TopicConfigWrapper = field(default_factory=TopicConfigWrapper)
    filter_server_list: list[str] = field(default_factory=list)


def decode_register_body(body: bytes, *, compressed: bool) -> RegisterBrokerBody:
    """The body in either form; an empty body is an empty topic table with version zero (as Java)."""
    if not body:
        return RegisterBrokerBody()
    try:
        return _decode_compressed(body) if compressed else _decode_json(body)
    except RegisterBodyError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, struct.error, zlib.error) as exc:
        form = "compressed" if compressed else "JSON"
        raise RegisterBodyError(f"bad {form} RegisterBrokerBody: {type(exc).__name__}: {exc}") from None


def _decode_json(body: bytes) -> RegisterBrokerBody:
    data = loads_lenient(body.decode("utf-8"))
    if not isinstance(data, dict):
        raise RegisterBodyError("RegisterBrokerBody is not a JSON object")
    wrapper_json = data.get("topicConfigSerializeWrapper") or {}
    table = wrapper_json.get("topicConfigTable") or {}
    topics = {name: _topic_from_json(name, tc) for name, tc in table.items()}
    wrapper = TopicConfigWrapper(topics, DataVersion.from_json(wrapper_json.get("dataVersion")))
    return RegisterBrokerBody(wrapper, [str(s) for s in data.get("filterServerList") or []])


def _topic_from_json(name: str, tc: dict) -> TopicQueueConfig:
    return TopicQueueConfig(str(tc.get("topicName") or name), int(tc.get("readQueueNums", 0)),
                            int(tc.get("writeQueueNums", 0)), int(tc.get("perm", PERM_READ_WRITE)),
                            int(tc.get("topicSysFlag", 0) or 0))


def _inflate(body: bytes) -> bytes:
    inflater = zlib.decompressobj()
    data = inflater.decompress(body, MAX_INFLATED_BODY_BYTES)
    if inflater.unconsumed_tail:
        raise RegisterBodyError(f"compressed body inflates beyond {MAX_INFLATED_BODY_BYTES} bytes")
    return data + inflater.flush()


class _Reader:
    def __init__(self, data: bytes) -> None:
        self._data, self._pos = data, 0

    def int32(self) -> int:
        (value,) = _INT32.unpack_from(self._data, self._pos)
        self._pos += 4
        return value

    def chunk(self) -> bytes:
        size = self.int32()
        if size < 0 or self._pos + size > len(self._data):
            raise RegisterBodyError(f"length {size} at offset {self._pos - 4} runs past the body")
        part = self._data[self._pos:self._pos + size]
        self._pos += size
        return part


def _decode_compressed(body: bytes) -> RegisterBrokerBody:
    reader = _Reader(_inflate(body))
    version = DataVersion.from_json(loads_lenient(reader.chunk().decode("utf-8")))
    count = reader.int32()
    if count < 0:
        raise RegisterBodyError(f"negative topic count {count}")
    topics: dict[str, TopicQueueConfig] = {}
    for _ in range(count):
        topic = _topic_from_encoded(reader.chunk().decode("utf-8"))
        topics[topic.topic] = topic
    filters = json.loads(reader.chunk().decode("utf-8") or "null") or []
    return RegisterBrokerBody(TopicConfigWrapper(topics, version), [str(s) for s in filters])


def _topic_from_encoded(text: str) -> TopicQueueConfig:
    """``TopicConfig.decode``: ``name read write perm filterType [attributes JSON, may hold spaces]``."""
    parts = text.split(" ", 5)
    if len(parts) < 5:
        raise RegisterBodyError(f"TopicConfig {text[:80]!r} has fewer than 5 fields")
    return TopicQueueConfig(parts[0], int(parts[1]), int(parts[2]), int(parts[3]))


def encode_compressed_body(body: RegisterBrokerBody) -> bytes:
    """The compressed form, as a Java broker writes it (for tests and tools)."""
    def chunk(raw: bytes) -> bytes:
        return _INT32.pack(len(raw)) + raw
    wrapper = body.wrapper
    parts = [chunk(json.dumps(wrapper.data_version.to_json()).encode()), _INT32.pack(len(wrapper.topic_configs))]
    for t in wrapper.topic_configs.values():
        parts.append(chunk(f"{t.topic} {t.read_queue_nums} {t.write_queue_nums} {t.perm} SINGLE_TAG {{}}".encode()))
    parts.append(chunk(json.dumps(body.filter_server_list).encode()))
    return zlib.compress(b"".join(parts), 9)
