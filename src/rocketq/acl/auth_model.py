"""ACL 2.0 (RocketMQ 5.3's ``org.apache.rocketmq.auth``): users, ACLs of policies, and the decision.

A **user** is ``{username, password, userType: Super|Normal, userStatus: enable|disable}``; the
password is the HMAC key its requests are signed with (ACL 1.0's SecretKey, see
:mod:`rocketq.acl.signing`).  An **ACL** belongs to a subject ``User:<name>`` and holds policies of
type ``Custom`` (what admins write) or ``Default``; a policy is a list of **entries**::

    {"resource": "Topic:orders" | "Topic:order*" | "Topic:*" | "Group:g" | "Cluster:c" | "Namespace:n" | "*",
     "actions": ["Pub", "Sub", "Create", "Update", "Delete", "Get", "List", "All"],
     "sourceIps": ["10.0.0.0/8", "192.168.1.7"],        # empty: from anywhere
     "decision": "Allow" | "Deny"}

The decision for one wanted ``(resource, actions, source ip)`` is RocketMQ's
``AclAuthorizationHandler``: the entries of the Custom policy that match the resource, any one of
the actions (``All`` matches every action) and the ip; if none, those of the Default policy; if
still none, **denied**.  The matches are ordered most specific first - a literal name before a
prefix, a longer prefix before a shorter one, a prefix before ``Topic:*``, a typed resource before
``*`` - and, between equally specific entries, Deny before Allow; the first one decides.  So Deny
wins over Allow on the same resource, and a more specific Allow wins over a broader Deny, as in
RocketMQ.  Super users are not checked at all.

Parsing is strict where RocketMQ is lenient: an unknown action, decision, policy type or resource
type is refused with its name and place (RocketMQ silently drops unknown actions).  Names follow
RocketMQ's topic character rule, usernames ``[A-Za-z0-9_.@-]``; limits are named below.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from rocketq.common.validation import name_refusal

USERNAME_MAX_CHARS = 128
PASSWORD_MAX_CHARS = 256
RESOURCE_NAME_MAX_CHARS = 255          # a topic's limit in RocketMQ; groups and clusters are shorter
MAX_ENTRIES_PER_ACL = 1_000            # entries of all policies of one subject
MAX_SOURCE_IPS_PER_ENTRY = 64

ACTIONS = ("All", "Any", "Pub", "Sub", "Create", "Update", "Delete", "Get", "List")
RESOURCE_TYPES = ("Cluster", "Namespace", "Topic", "Group")
USER_TYPES = ("Super", "Normal")
USER_STATUSES = ("enable", "disable")
POLICY_TYPES = ("Custom", "Default")
DECISIONS = ("Allow", "Deny")
SUBJECT_PREFIX = "User:"

_USERNAME = re.compile(r"^[A-Za-z0-9_.@-]+$")
_OTHER_NAME = re.compile(r"^[%|A-Za-z0-9_-]+$")      # cluster and namespace names: RocketMQ's topic characters


class AuthError(ValueError):
    """A bad user, ACL or subject; the message names the field and the value."""


def _by_name(value, names: tuple[str, ...], what: str) -> str:
    """*value* as one of *names*, matched without regard to case (RocketMQ's ``getByName``)."""
    if isinstance(value, str):
        for name in names:
            if name.lower() == value.strip().lower():
                return name
    raise AuthError(f"{what} {value!r} is not one of {', '.join(names)}")


def check_username(name, what: str = "username") -> str:
    if not isinstance(name, str) or not name.strip():
        raise AuthError(f"{what} is blank")
    if len(name) > USERNAME_MAX_CHARS or not _USERNAME.match(name):
        raise AuthError(f"{what} {name[:USERNAME_MAX_CHARS]!r} must be 1-{USERNAME_MAX_CHARS} of A-Z a-z 0-9 _ . @ -")
    return name


def check_password(password, what: str = "password") -> str:
    if not isinstance(password, str) or not password.strip():
        raise AuthError(f"{what} is blank")
    if len(password) > PASSWORD_MAX_CHARS or any(ord(c) < 32 or ord(c) == 127 for c in password):
        raise AuthError(f"{what} must be 1-{PASSWORD_MAX_CHARS} characters without control characters")
    return password


@dataclass
class User:
    username: str
    password: str
    user_type: str = "Normal"
    user_status: str = "enable"

    @property
    def super(self) -> bool:
        return self.user_type == "Super"

    @property
    def enabled(self) -> bool:
        return self.user_status == "enable"

    def to_json(self) -> dict:
        """RocketMQ's ``UserInfo`` body."""
        return {"username": self.username, "password": self.password, "userType": self.user_type,
                "userStatus": self.user_status}

    @classmethod
    def from_json(cls, data: dict, where: str) -> "User":
        """A whole user (creation, or the file): username and password required."""
        if not isinstance(data, dict):
            raise AuthError(f"{where}: a user is a JSON object, got {type(data).__name__}")
        user_type = data.get("userType")
        status = data.get("userStatus")
        return cls(check_username(data.get("username"), f"{where} username"),
                   check_password(data.get("password"), f"{where} password"),
                   _by_name(user_type, USER_TYPES, f"{where} userType") if user_type else "Normal",
                   _by_name(status, USER_STATUSES, f"{where} userStatus") if status else "enable")


@dataclass(frozen=True)
class Resource:
    type: str                  # "Any" for "*", else one of RESOURCE_TYPES
    name: str | None           # None for ANY patterns; the prefix for PREFIXED
    pattern: str               # "ANY" | "LITERAL" | "PREFIXED"

    @property
    def key(self) -> str:
        if self.type == "Any":
            return "*"
        return f"{self.type}:" + {"ANY": "*", "LITERAL": self.name, "PREFIXED": f"{self.name}*"}[self.pattern]

    @classmethod
    def parse(cls, text, where: str) -> "Resource":
        """``*``, ``Type:*``, ``Type:prefix*`` or ``Type:name`` (RocketMQ's ``Resource.of``)."""
        if not isinstance(text, str) or not text.strip():
            raise AuthError(f"{where}: resource is blank")
        text = text.strip()
        if text == "*":
            return cls("Any", None, "ANY")
        kind, sep, name = text.partition(":")
        if not sep:
            raise AuthError(f"{where}: resource {text!r} is not Type:name (Topic:, Group:, Cluster:, Namespace:) or *")
        kind = _by_name(kind, RESOURCE_TYPES, f"{where}: resource type of {text!r}")
        if name == "*":
            return cls(kind, None, "ANY")
        prefixed = name.endswith("*")
        name = name[:-1] if prefixed else name
        _check_resource_name(kind, name, f"{where}: resource {text!r}")
        return cls(kind, name, "PREFIXED" if prefixed else "LITERAL")

    def matches(self, kind: str, name: str) -> bool:
        if self.type == "Any":
            return True
        if self.type != kind:
            return False
        if self.pattern == "ANY":
            return True
        return name == self.name if self.pattern == "LITERAL" else name.startswith(self.name)

    def specificity(self) -> tuple[int, int, int]:
        """Smaller sorts first: RocketMQ's ``comparePolicyEntries`` before the decision."""
        rank = {"LITERAL": 0, "PREFIXED": 1, "ANY": 2}[self.pattern]
        return (self.type == "Any", rank, -len(self.name) if self.pattern == "PREFIXED" else 0)


def _check_resource_name(kind: str, name: str, where: str) -> None:
    if not name or len(name) > RESOURCE_NAME_MAX_CHARS or "*" in name:
        raise AuthError(f"{where}: the name must be 1-{RESOURCE_NAME_MAX_CHARS} characters, '*' only at the end")
    if kind in ("Topic", "Group"):
        why = name_refusal(kind.lower(), name)
        if why is not None:
            raise AuthError(f"{where}: {why}")
    elif not _OTHER_NAME.match(name):
        raise AuthError(f"{where}: a {kind} name has only the characters % | A-Z a-z 0-9 _ -")


def _source_ip(text, where: str) -> str:
    try:
        if not isinstance(text, str):
            raise ValueError
        ipaddress.ip_network(text.strip(), strict=False) if "/" in text else ipaddress.ip_address(text.strip())
    except ValueError:
        raise AuthError(f"{where}: source ip {text!r} is not an IP address or CIDR block") from None
    return text.strip()


@dataclass
class PolicyEntry:
    resource: Resource
    actions: tuple[str, ...]
    source_ips: tuple[str, ...] = ()
    decision: str = "Allow"
    _networks: tuple = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        self._networks = tuple(ipaddress.ip_network(ip, strict=False) for ip in self.source_ips)

    def matches(self, kind: str, name: str, wanted: tuple[str, ...], ip: str) -> bool:
        """RocketMQ's isMatchResource / isMatchAction / isMatchEnvironment."""
        if not self.resource.matches(kind, name):
            return False
        if "Any" not in wanted and "All" not in self.actions and not any(a in self.actions for a in wanted):
            return False
        if not self._networks:
            return True
        try:
            address = ipaddress.ip_address(ip)
        except ValueError:
            return False
        return any(address in net for net in self._networks)

    def to_json(self) -> dict:
        return {"resource": self.resource.key, "actions": list(self.actions), "sourceIps": list(self.source_ips),
                "decision": self.decision}

    @classmethod
    def from_json(cls, data, where: str) -> "PolicyEntry":
        if not isinstance(data, dict):
            raise AuthError(f"{where}: an entry is a JSON object, got {type(data).__name__}")
        actions = data.get("actions")
        if not isinstance(actions, list) or not actions:
            raise AuthError(f"{where}: actions is empty")
        actions = tuple(dict.fromkeys(_by_name(a, ACTIONS, f"{where}: action") for a in actions))
        if "Any" in actions:
            raise AuthError(f"{where}: the actions can not be Any (RocketMQ's rule; use All)")
        ips = data.get("sourceIps") or []
        if not isinstance(ips, list) or len(ips) > MAX_SOURCE_IPS_PER_ENTRY:
            raise AuthError(f"{where}: sourceIps must be a list of at most {MAX_SOURCE_IPS_PER_ENTRY} addresses")
        decision = data.get("decision")
        if decision is None:
            raise AuthError(f"{where}: decision is missing (Allow or Deny)")
        return cls(Resource.parse(data.get("resource"), where), actions,
                   tuple(_source_ip(ip, where) for ip in ips), _by_name(decision, DECISIONS, f"{where}: decision"))


@dataclass
class Acl:
    subject: str                                     # "User:<name>"
    policies: dict[str, list[PolicyEntry]]           # policy type -> entries, in the order written

    @property
    def username(self) -> str:
        return self.subject[len(SUBJECT_PREFIX):]

    def entry_count(self) -> int:
        return sum(len(e) for e in self.policies.values())

    def merge(self, other: "Acl") -> None:
        """RocketMQ's ``Acl.updatePolicy``: an entry for a resource already present replaces its actions,
        ips and decision; a new resource is added."""
        for policy_type, entries in other.policies.items():
            mine = self.policies.setdefault(policy_type, [])
            for entry in entries:
                at = next((i for i, e in enumerate(mine) if e.resource == entry.resource), None)
                if at is None:
                    mine.append(entry)
                else:
                    mine[at] = entry

    def delete(self, policy_type: str, resource: Resource | None) -> None:
        """Remove the entry for *resource* from the policy (all policies' entries when *resource* is None)."""
        if resource is None:
            self.policies.clear()
            return
        entries = [e for e in self.policies.get(policy_type, []) if e.resource != resource]
        if entries:
            self.policies[policy_type] = entries
        else:
            self.policies.pop(policy_type, None)

    def decide(self, kind: str, name: str, wanted: tuple[str, ...], ip: str) -> PolicyEntry | None:
        """The entry that decides, or None (then the request is denied)."""
        for policy_type in POLICY_TYPES:
            matched = [e for e in self.policies.get(policy_type, ()) if e.matches(kind, name, wanted, ip)]
            if matched:
                return min(matched, key=lambda e: (e.resource.specificity(), e.decision != "Deny"))
        return None

    def to_json(self) -> dict:
        """RocketMQ's ``AclInfo`` body."""
        return {"subject": self.subject,
                "policies": [{"policyType": t, "entries": [e.to_json() for e in self.policies[t]]}
                             for t in POLICY_TYPES if self.policies.get(t)]}

    @classmethod
    def from_json(cls, data, subject: str | None, where: str) -> "Acl":
        """An AclInfo body; *subject* (the request header's) is used when the body names none."""
        if not isinstance(data, dict):
            raise AuthError(f"{where}: the ACL body is not a JSON object")
        subject = parse_subject(data.get("subject") or subject, where)
        raw = data.get("policies")
        if not isinstance(raw, list) or not raw:
            raise AuthError(f"{where}: the policies are empty")
        acl = cls(subject, {})
        for i, p in enumerate(raw):
            if not isinstance(p, dict):
                raise AuthError(f"{where}: policies[{i}] is not a JSON object")
            policy_type = _by_name(p.get("policyType"), POLICY_TYPES, f"{where}: policies[{i}].policyType") \
                if p.get("policyType") else "Custom"
            entries = p.get("entries")
            if not isinstance(entries, list) or not entries:
                raise AuthError(f"{where}: policies[{i}] has no entries")
            acl.merge(cls(subject, {policy_type: [PolicyEntry.from_json(e, f"{where}: policies[{i}].entries[{j}]")
                                                  for j, e in enumerate(entries)]}))
        if acl.entry_count() > MAX_ENTRIES_PER_ACL:
            raise AuthError(f"{where}: more than {MAX_ENTRIES_PER_ACL} entries for {subject}")
        return acl


def parse_subject(text, where: str) -> str:
    """``User:<name>``, the only subject type RocketMQ 5.3 has."""
    if not isinstance(text, str) or not text.startswith(SUBJECT_PREFIX):
        raise AuthError(f"{where}: subject {text!r} is not User:<username>")
    check_username(text[len(SUBJECT_PREFIX):], f"{where}: the subject's username")
    return text
