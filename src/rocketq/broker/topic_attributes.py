"""Topic attributes (RocketMQ 5's ``TopicAttributes``, ``AttributeParser``, ``AttributeUtil``).

UPDATE_AND_CREATE_TOPIC carries an ``attributes`` header such as ``+message.type=FIFO,-reserve.time``:
``+key=value`` adds or changes a key, ``-key`` removes one.  :func:`parse_modification` reads it,
:func:`alter` applies it to a topic's current attributes and validates the result against the
known attributes, as RocketMQ does: a new topic takes only ``+`` entries; an unknown key, a key
given twice, removing a key the topic does not have, changing an unchangeable key, or a value
outside the attribute's range is refused with a sentence naming the key.  The attributes are
merged into the topic's, not replacing them; the stored form has no signs
(``{"message.type": "FIFO"}``), as in RocketMQ's ``topics.json``.

==================  ===========  ==========================================  ==================
attribute           changeable   values                                      in rocketq
==================  ===========  ==========================================  ==================
``message.type``    yes          NORMAL FIFO DELAY TRANSACTION MIXED          enforced on sends
                                 UNSPECIFIED                                  (both protocols)
``queue.type``      no           SimpleCQ, BatchCQ                            SimpleCQ only
``cleanup.policy``  no           DELETE, COMPACTION                           DELETE only
``reserve.time``    yes          -1 .. 2^63-1                                 refused, as RocketMQ
                                                                              without a tiered store
==================  ===========  ==========================================  ==================

MIXED is refused unless ``enableMixedMessageType`` (off by default, as in RocketMQ).

:func:`message_type_of` classifies a message by its properties (``TopicMessageType
.parseFromMessageProperty``) and :func:`type_refusal` says why a topic will not take it.  A
remoting client marks no FIFO message (an orderly producer picks the queue itself), so a FIFO topic
takes NORMAL messages over remoting as well; gRPC clients say the type, see
:mod:`rocketq.grpc_endpoint.route`.
"""

from __future__ import annotations

from dataclasses import dataclass

MESSAGE_TYPE = "message.type"
NORMAL, FIFO, DELAY, TRANSACTION, MIXED, UNSPECIFIED = "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED", "UNSPECIFIED"
LONG_MAX = (1 << 63) - 1
DELAY_PROPERTIES = ("DELAY", "TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS")


class TopicAttributeError(ValueError):
    """An attributes modification RocketMQ would refuse; the message names the key."""


@dataclass(frozen=True)
class Attribute:
    name: str
    changeable: bool
    values: frozenset[str] | None = None          # an enum attribute's values
    long_range: tuple[int, int] | None = None     # a long attribute's bounds
    unsupported: frozenset[str] = frozenset()     # values RocketMQ has and rocketq does not implement
    refusal: str | None = None                    # any value refused (what RocketMQ says)

    def verify(self, value: str) -> None:
        if self.refusal is not None:
            raise TopicAttributeError(f"{self.name}: {self.refusal}")
        if self.values is not None and value not in self.values:
            raise TopicAttributeError(f"{self.name}: value {value!r} is not one of {sorted(self.values)}")
        if self.long_range is not None:
            lo, hi = self.long_range
            try:
                ok = lo <= int(value) <= hi
            except ValueError:
                ok = False
            if not ok:
                raise TopicAttributeError(f"{self.name}: value {value!r} is not a number in {lo}..{hi}")
        if value in self.unsupported:
            raise TopicAttributeError(f"{self.name}={value} is not supported by rocketq")


KNOWN = {a.name: a for a in (
    Attribute(MESSAGE_TYPE, True, frozenset({UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, MIXED})),
    Attribute("queue.type", False, frozenset({"SimpleCQ", "BatchCQ"}), unsupported=frozenset({"BatchCQ"})),
    Attribute("cleanup.policy", False, frozenset({"DELETE", "COMPACTION"}), unsupported=frozenset({"COMPACTION"})),
    Attribute("reserve.time", True, long_range=(-1, LONG_MAX),
              refusal="Update topic reserveTime not supported (it needs a tiered store)"),
)}


def parse_modification(text: str | None) -> dict[str, str]:
    """``+k=v,-k2`` as ``{"+k": "v", "-k2": ""}`` (``AttributeParser.parseToMap``)."""
    out: dict[str, str] = {}
    for kv in (text or "").split(",") if text else ():
        key, eq, value = kv.partition("=")
        if eq and not key.startswith("+"):
            raise TopicAttributeError(f"attribute {kv!r}: adding or changing is written +key=value")
        if not eq and not key.startswith("-"):
            raise TopicAttributeError(f"attribute {kv!r}: removing is written -key")
        if key in out:
            raise TopicAttributeError(f"attribute {key[1:]!r} is given twice")
        out[key] = value
    return out


def alter(current: dict[str, str], modification: dict[str, str], *, create: bool,
          allow_mixed: bool = False) -> dict[str, str]:
    """*current* with *modification* applied (``AttributeUtil.alterCurrentAttributes``)."""
    final, seen = dict(current), set()
    for signed, value in modification.items():
        sign, key = signed[:1], signed[1:]
        if not key or "+" in key or "-" in key:
            raise TopicAttributeError(f"attribute {signed!r}: the key is empty or holds a sign")
        if key in seen:
            raise TopicAttributeError(f"attribute {key!r} is given twice")
        seen.add(key)
        attr = KNOWN.get(key)
        if attr is None:
            raise TopicAttributeError(f"unsupported attribute {key!r} (known: {', '.join(sorted(KNOWN))})")
        if create and sign != "+":
            raise TopicAttributeError(f"attribute {key!r}: a new topic takes only +key=value")
        if sign == "-":
            if key not in current:
                raise TopicAttributeError(f"attribute {key!r}: the topic has no such attribute to remove")
            if not attr.changeable:
                raise TopicAttributeError(f"attribute {key!r} cannot be changed once the topic exists")
            del final[key]
            continue
        if not create and not attr.changeable and current.get(key) != value:
            raise TopicAttributeError(f"attribute {key!r} cannot be changed once the topic exists")
        attr.verify(value)
        if key == MESSAGE_TYPE and value == MIXED and not allow_mixed:
            raise TopicAttributeError("MIXED message type is not supported (enableMixedMessageType=false)")
        final[key] = value
    return final


def topic_message_type(attributes: dict | None) -> str | None:
    """The topic's declared message type (None: undeclared, UNSPECIFIED or MIXED - any type)."""
    attrs = attributes or {}
    value = str(attrs.get(MESSAGE_TYPE) or attrs.get("+" + MESSAGE_TYPE) or "").upper()
    return value if value in (NORMAL, FIFO, DELAY, TRANSACTION) else None


def message_type_of(properties_text: str) -> str:
    """``TopicMessageType.parseFromMessageProperty`` on a properties string."""
    if property_value(properties_text, "TRAN_MSG") == "true":
        return TRANSACTION
    if any(property_value(properties_text, p) is not None for p in DELAY_PROPERTIES):
        return DELAY
    if property_value(properties_text, "__SHARDINGKEY") is not None:
        return FIFO
    return NORMAL


def property_value(properties_text: str, name: str) -> str | None:
    """The (last) value of *name* in a ``k\x01v\x02`` properties string, without decoding it all."""
    key = name + "\x01"
    i = properties_text.rfind("\x02" + key)
    if i >= 0:
        start = i + 1 + len(key)
    elif properties_text.startswith(key):
        start = len(key)
    else:
        return None
    end = properties_text.find("\x02", start)
    return properties_text[start:end if end >= 0 else len(properties_text)]


def type_refusal(topic: str, attributes: dict | None, message_type: str) -> str | None:
    """Why a topic of declared type refuses a *message_type* message over remoting, or None."""
    declared = topic_message_type(attributes)
    if declared is None or declared == message_type or (declared == FIFO and message_type == NORMAL):
        return None
    return f"topic {topic!r} takes {declared} messages (message.type={declared}), not {message_type} ones"
