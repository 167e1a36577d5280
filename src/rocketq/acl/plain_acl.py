"""``plain_acl.yml``: accounts, their permissions and IP whitelists (RocketMQ's PlainAccessResource).

The file, as RocketMQ reads it::

    globalWhiteRemoteAddresses:        # these addresses need no signature at all
      - 10.10.103.*
      - 192.168.0.{1,2}
    accounts:
      - accessKey: RocketMQ
        secretKey: "12345678"
        whiteRemoteAddress: 192.168.1.*    # from here this account needs no signature
        admin: false                       # admin requests (topic/group config ...) need true
        defaultTopicPerm: DENY             # for topics not listed: DENY | PUB | SUB | PUB|SUB
        defaultGroupPerm: SUB
        topicPerms: [topicA=DENY, topicB=PUB|SUB]
        groupPerms: [groupA=DENY, groupB=PUB|SUB]

Address patterns (IPv4): an exact address, ``*`` for any, trailing ``*`` segments
(``192.168.*.*`` or ``192.168.*``), a range in the last segments (``192.168.1.100-200``) or a set
(``192.168.1.{1,2,3}``).  IPv6 addresses match exactly or by a ``*`` suffix.

Errors name the file and the account (or address) that is wrong; a bad file never replaces a
good one that is already loaded (:class:`rocketq.acl.validator.AclValidator` keeps the last good).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

DENY, PUB, SUB = 1, 2, 4
ANY = PUB | SUB
_PERMS = {"DENY": DENY, "PUB": PUB, "SUB": SUB, "PUB|SUB": ANY, "SUB|PUB": ANY}


class AclConfigError(ValueError):
    pass


def parse_perm(text: str, where: str) -> int:
    perm = _PERMS.get(str(text).strip().upper().replace(" ", ""))
    if perm is None:
        raise AclConfigError(f"{where}: permission {text!r} is not one of DENY, PUB, SUB, PUB|SUB")
    return perm


class AddressPattern:
    """One whitelist entry; :meth:`matches` takes an IP address string."""

    _SEGMENT = re.compile(r"^(\*|\d{1,3}|\d{1,3}-\d{1,3}|\{\d{1,3}(,\d{1,3})*\})$")

    def __init__(self, text: str, where: str):
        self.text = text = str(text).strip()
        self._v6 = ":" in text
        if text in ("*", ""):
            self._segments = None
            return
        if self._v6:
            self._prefix = text[:-1].lower() if text.endswith("*") else None
            if self._prefix is None:
                try:
                    self._exact = ipaddress.IPv6Address(text)
                except ValueError:
                    raise AclConfigError(f"{where}: {text!r} is not an IPv6 address or prefix*") from None
            return
        parts = text.split(".")
        if len(parts) > 4 or not all(self._SEGMENT.match(p) for p in parts) or (len(parts) < 4 and parts[-1] != "*"):
            raise AclConfigError(f"{where}: {text!r} is not an address pattern (a.b.c.d with *, ranges a-b "
                                 "or sets {a,b})")
        parts += ["*"] * (4 - len(parts))
        self._segments = [self._segment_set(p, text, where) for p in parts]

    @staticmethod
    def _segment_set(part: str, text: str, where: str) -> range | set[int] | None:
        if part == "*":
            return None
        if "-" in part:
            lo, hi = (int(x) for x in part.split("-"))
            if not 0 <= lo <= hi <= 255:
                raise AclConfigError(f"{where}: range {part} in {text!r} is not within 0-255")
            return range(lo, hi + 1)
        values = {int(x) for x in part.strip("{}").split(",")}
        if max(values) > 255:
            raise AclConfigError(f"{where}: {part} in {text!r} is above 255")
        return values

    def matches(self, ip: str) -> bool:
        if self.text in ("*", ""):
            return True
        if self._v6:
            if ":" not in ip:
                return False
            if self._prefix is not None:
                return ipaddress.IPv6Address(ip).exploded.startswith(self._prefix) or ip.lower().startswith(self._prefix)
            return ipaddress.IPv6Address(ip) == self._exact
        parts = ip.split(".")
        if len(parts) != 4:
            return False
        return all(seg is None or int(p) in seg for seg, p in zip(self._segments, parts))


@dataclass
class Account:
    access_key: str
    secret_key: str
    admin: bool = False
    default_topic_perm: int = DENY
    default_group_perm: int = DENY
    topic_perms: dict[str, int] = field(default_factory=dict)
    group_perms: dict[str, int] = field(default_factory=dict)
    white_address: AddressPattern | None = None

    def topic_perm(self, topic: str) -> int:
        return self.topic_perms.get(topic, self.default_topic_perm)

    def group_perm(self, group: str) -> int:
        return self.group_perms.get(group, self.default_group_perm)


@dataclass
class PlainAcl:
    accounts: dict[str, Account]
    global_white: list[AddressPattern]

    def globally_whitelisted(self, ip: str) -> bool:
        return any(p.matches(ip) for p in self.global_white)


def _perm_map(items, where: str) -> dict[str, int]:
    out = {}
    for item in items or ():
        name, sep, perm = str(item).partition("=")
        if not sep or not name.strip():
            raise AclConfigError(f"{where}: {item!r} is not name=PERM")
        out[name.strip()] = parse_perm(perm, f"{where} {name.strip()}")
    return out


def load_plain_acl(path: Path) -> PlainAcl:
    """Parse *path*; raises AclConfigError naming the file and the bad entry."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise AclConfigError(f"{path}: {exc}") from None
    if not isinstance(data, dict):
        raise AclConfigError(f"{path}: expected a mapping with 'accounts', got {type(data).__name__}")
    white = [AddressPattern(a, f"{path} globalWhiteRemoteAddresses")
             for a in data.get("globalWhiteRemoteAddresses") or ()]
    accounts: dict[str, Account] = {}
    for i, raw in enumerate(data.get("accounts") or ()):
        where = f"{path} accounts[{i}]"
        if not isinstance(raw, dict) or not raw.get("accessKey") or raw.get("secretKey") in (None, ""):
            raise AclConfigError(f"{where}: accessKey and secretKey are required")
        ak = str(raw["accessKey"])
        if ak in accounts:
            raise AclConfigError(f"{where}: accessKey {ak!r} appears twice")
        wa = raw.get("whiteRemoteAddress")
        accounts[ak] = Account(
            access_key=ak, secret_key=str(raw["secretKey"]), admin=bool(raw.get("admin", False)),
            default_topic_perm=parse_perm(raw.get("defaultTopicPerm", "DENY"), f"{where} defaultTopicPerm"),
            default_group_perm=parse_perm(raw.get("defaultGroupPerm", "DENY"), f"{where} defaultGroupPerm"),
            topic_perms=_perm_map(raw.get("topicPerms"), f"{where} topicPerms"),
            group_perms=_perm_map(raw.get("groupPerms"), f"{where} groupPerms"),
            white_address=AddressPattern(wa, f"{where} whiteRemoteAddress") if wa else None)
    return PlainAcl(accounts, white)
