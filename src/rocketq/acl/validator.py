"""Checking each remoting request against ``plain_acl.yml`` (RocketMQ's PlainAccessValidator).

Order of checks for a request from IP ``ip``:

1. ``ip`` matches ``globalWhiteRemoteAddresses``: allowed, nothing else is checked;
2. the request's ``AccessKey`` names an account (else refused);
3. ``ip`` matches the account's ``whiteRemoteAddress``: allowed;
4. the ``Signature`` is the HMAC-SHA1 of the request (see :mod:`rocketq.acl.signing`), else refused;
5. admin requests (create/delete topic, subscription group, broker config) need ``admin: true``;
6. the resources the request touches need the account's permission (admins have all):

   ====================================  =============================================
   request                               needs
   ====================================  =============================================
   SEND_MESSAGE(_V2) / SEND_BATCH        topic PUB (a ``%RETRY%group`` topic: group SUB)
   PULL_MESSAGE                          topic SUB, consumerGroup SUB
   QUERY/UPDATE_CONSUMER_OFFSET          topic SUB, consumerGroup SUB
   QUERY_MESSAGE                         topic SUB
   HEART_BEAT                            each consumer group SUB, each subscribed topic SUB
   CONSUMER_SEND_MSG_BACK                group SUB
   UNREGISTER_CLIENT / consumer list     consumerGroup SUB
   ====================================  =============================================

Refusals are answered NO_PERMISSION with a remark saying which check failed.  The file is
re-read when it changes (size or mtime); a file that does not parse is logged and the previous
accounts stay in force.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
from pathlib import Path

from rocketq.acl.plain_acl import PUB, SUB, AclConfigError, PlainAcl, load_plain_acl
from rocketq.acl.signing import ACCESS_KEY, SIGNATURE, signature
from rocketq.common.sysflag import RETRY_GROUP_TOPIC_PREFIX
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

ADMIN_CODES = frozenset({RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER,
                         RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RequestCode.DELETE_SUBSCRIPTIONGROUP,
                         25})    # UPDATE_BROKER_CONFIG
_SEND_CODES = frozenset({RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE})
_TOPIC_AND_GROUP = frozenset({RequestCode.PULL_MESSAGE, RequestCode.QUERY_CONSUMER_OFFSET,
                              RequestCode.UPDATE_CONSUMER_OFFSET})


class AclDenied(Exception):
    pass


def needed_resources(cmd: RemotingCommand) -> list[tuple[str, str, int]]:
    """(kind "topic"|"group", name, PUB|SUB) the request touches."""
    f = cmd.ext_fields
    code = cmd.code
    if code in _SEND_CODES:
        topic = f.get("topic") or f.get("b") or ""
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return [("group", topic[len(RETRY_GROUP_TOPIC_PREFIX):], SUB)]
        return [("topic", topic, PUB)]
    if code in _TOPIC_AND_GROUP:
        return [("topic", f.get("topic", ""), SUB), ("group", f.get("consumerGroup", ""), SUB)]
    if code == RequestCode.QUERY_MESSAGE:
        return [("topic", f.get("topic", ""), SUB)]
    if code == RequestCode.CONSUMER_SEND_MSG_BACK:
        return [("group", f.get("group", ""), SUB)]
    if code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP) and f.get("consumerGroup"):
        return [("group", f["consumerGroup"], SUB)]
    if code == RequestCode.HEART_BEAT:
        return _heartbeat_resources(cmd.body)
    return []


def _heartbeat_resources(body: bytes) -> list[tuple[str, str, int]]:
    try:
        data = json.loads(body or b"{}")
    except ValueError:
        return []
    out = []
    for consumer in data.get("consumerDataSet") or ():
        out.append(("group", str(consumer.get("groupName", "")), SUB))
        for sub in consumer.get("subscriptionDataSet") or ():
            topic = str(sub.get("topic", ""))
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                out.append(("topic", topic, SUB))
    return out


class AclValidator:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._stamp: tuple[int, int] | None = None
        self.acl: PlainAcl = load_plain_acl(self.path)       # a bad file at start-up is an error
        self.refused = 0
        self.last_refusal = ""
        self._stamp = self._file_stamp()

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def reload_if_changed(self) -> bool:
        stamp = self._file_stamp()
        if stamp is None or stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            self.acl = load_plain_acl(self.path)
        except AclConfigError as exc:
            log.error("ACL file not reloaded, the previous accounts stay in force: %s", exc)
            return False
        log.info("ACL reloaded from %s (%d accounts)", self.path, len(self.acl.accounts))
        return True

    def check(self, ip: str, cmd: RemotingCommand) -> RemotingCommand | None:
        """None when *cmd* from *ip* is allowed, else the NO_PERMISSION answer."""
        try:
            self._validate(ip, cmd)
        except AclDenied as exc:
            self.refused += 1
            self.last_refusal = str(exc)
            log.info("refused request code %d from %s: %s", cmd.code, ip, exc)
            return RemotingCommand.create_response(cmd, ResponseCode.NO_PERMISSION, str(exc))
        return None

    def _validate(self, ip: str, cmd: RemotingCommand) -> None:
        acl = self.acl
        if acl.globally_whitelisted(ip):
            return
        ak = cmd.ext_fields.get(ACCESS_KEY)
        if not ak:
            raise AclDenied(f"no AccessKey in request code {cmd.code} from {ip}; ACL is enabled on this broker")
        account = acl.accounts.get(ak)
        if account is None:
            raise AclDenied(f"no ACL account for AccessKey {ak!r}")
        if account.white_address is not None and account.white_address.matches(ip):
            return
        expected = signature(account.secret_key, cmd.ext_fields, cmd.body)
        if not hmac.compare_digest(expected, cmd.ext_fields.get(SIGNATURE, "")):
            raise AclDenied(f"signature of request code {cmd.code} does not match for AccessKey {ak!r}")
        if account.admin:
            return
        if cmd.code in ADMIN_CODES:
            raise AclDenied(f"request code {cmd.code} needs an admin account; {ak!r} is not one")
        for kind, name, need in needed_resources(cmd):
            owned = account.topic_perm(name) if kind == "topic" else account.group_perm(name)
            if not owned & need:
                raise AclDenied(f"no {'PUB' if need == PUB else 'SUB'} permission for {kind} {name!r} "
                                f"(AccessKey {ak!r})")
