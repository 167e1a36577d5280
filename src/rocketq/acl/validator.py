"""Checking each request against ``plain_acl.yml`` (RocketMQ's PlainAccessValidator).

:meth:`AclValidator.authorize` is the one decision both protocols use: the remoting side
(:meth:`AclValidator.check`, below) and the gRPC endpoint (:mod:`rocketq.grpc_endpoint.auth`,
which has its own signature and its own table of what each RPC needs).
Order of checks for a request from IP ``ip``:

1. ``ip`` matches ``globalWhiteRemoteAddresses``: allowed, nothing else is checked;
2. the request's ``AccessKey`` names an account (else refused);
3. ``ip`` matches the account's ``whiteRemoteAddress``: allowed;
4. the ``Signature`` is the HMAC-SHA1 of the request (see :mod:`rocketq.acl.signing`), else refused;
5. admin requests need ``admin: true``;
6. the resources the request touches need the account's permission (admins have all; a
   resource not listed gets ``defaultTopicPerm`` / ``defaultGroupPerm``; ``DENY`` refuses all; a
   topic named ``%RETRY%group`` is checked as the group).  On remoting, what each request code
   is and touches is :mod:`rocketq.acl.requests`' table (a code it does not list is an admin
   request); a request whose resource is only known after a lookup (the message VIEW_MESSAGE_BY_ID
   finds) is checked again then, with :meth:`AclValidator.check_found`.

Refusals are answered NO_PERMISSION with a remark saying which check failed (gRPC: UNAUTHORIZED
for checks 2-4, FORBIDDEN for 5-6).  The file is re-read when it changes (size or mtime); a file
that does not parse is logged and the previous accounts stay in force.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from rocketq.acl.plain_acl import ANY, DENY, PUB, SUB, Account, AclConfigError, PlainAcl, load_plain_acl
from rocketq.acl.requests import Needs, needs_of
from rocketq.acl.signing import ACCESS_KEY, SIGNATURE, signature
from rocketq.common.sysflag import RETRY_GROUP_TOPIC_PREFIX
from rocketq.remoting import RemotingCommand, ResponseCode

log = logging.getLogger(__name__)

class AclDenied(Exception):
    """A refused request; the message names the account, the resource and what was missing."""


class AclUnauthenticated(AclDenied):
    """No AccessKey, an unknown account, or a signature that does not match."""


class AclForbidden(AclDenied):
    """The account is known and the signature matches, but it lacks a permission."""


def permits(owned: int, need: int) -> bool:
    """RocketMQ's ``Permission.checkPermission``: DENY refuses everything; a need of ``PUB|SUB``
    (RocketMQ's ANY, asked by QueryRoute) is met by either; PUB or SUB must be owned as such."""
    return not owned & DENY and bool(owned & need)


def perm_text(perm: int) -> str:
    if perm & DENY:
        return "DENY"
    return {PUB: "PUB", SUB: "SUB", ANY: "PUB|SUB"}.get(perm, str(perm))


def resolve_resource(kind: str, name: str) -> tuple[str, str]:
    """A topic named ``%RETRY%<group>`` is the group's resource (RocketMQ keeps group permissions
    under the retry topic's name, so such a topic is checked against the group's permission)."""
    if kind == "topic" and name.startswith(RETRY_GROUP_TOPIC_PREFIX):
        return "group", name[len(RETRY_GROUP_TOPIC_PREFIX):]
    return kind, name


def check_permissions(account: Account, resources: Iterable[tuple[str, str, int]]) -> None:
    """Raise AclForbidden unless *account* holds each (kind "topic"|"group", name, PUB|SUB|ANY)
    (RocketMQ's ``PlainPermissionChecker``): admins hold everything; a resource the account does
    not list gets its ``defaultTopicPerm`` / ``defaultGroupPerm``."""
    if account.admin:
        return
    for kind, name, need in resources:
        kind, name = resolve_resource(kind, name)
        listed = account.topic_perms if kind == "topic" else account.group_perms
        owned = listed.get(name, account.default_topic_perm if kind == "topic" else account.default_group_perm)
        if not permits(owned, need):
            has = f"{'the default ' if name not in listed else ''}{perm_text(owned)}"
            raise AclForbidden(f"no {perm_text(need).replace('|', ' or ')} permission for {kind} {name!r} "
                               f"(AccessKey {account.access_key!r} has {has})")


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

    def account(self, access_key: str) -> Account | None:
        return self.acl.accounts.get(access_key or "")

    def globally_whitelisted(self, ip: str) -> bool:
        return self.acl.globally_whitelisted(ip)

    def admin_credentials(self) -> tuple[str, str] | None:
        """The first admin account's keys, for a broker that signs its own requests."""
        admin = next((a for a in self.acl.accounts.values() if a.admin), None)
        return (admin.access_key, admin.secret_key) if admin is not None else None

    def check(self, ip: str, cmd: RemotingCommand, needs: Needs | None = None) -> RemotingCommand | None:
        """None when *cmd* from *ip* is allowed, else the NO_PERMISSION answer.  *needs* is
        :func:`rocketq.acl.requests.needs_of` of *cmd* when the caller has it already."""
        needs = needs_of(cmd) if needs is None else needs
        return self._decide(ip, cmd, needs.resources, admin_request=needs.admin)

    def check_admin(self, ip: str, cmd: RemotingCommand) -> RemotingCommand | None:
        """None when *cmd* from *ip* is an admin account's signed request (or the address is
        white-listed), else the NO_PERMISSION answer: what a NameServer asks of a write."""
        return self._decide(ip, cmd, (), admin_request=True)

    def check_found(self, ip: str, cmd: RemotingCommand,
                    resources: list[tuple[str, str, int]]) -> RemotingCommand | None:
        """The same decision for resources only known once the request was looked up (the topic of
        the message a VIEW_MESSAGE_BY_ID finds): None when allowed, else the NO_PERMISSION answer."""
        return self._decide(ip, cmd, resources, admin_request=False)

    def _decide(self, ip: str, cmd: RemotingCommand, resources, *, admin_request: bool) -> RemotingCommand | None:
        f = cmd.ext_fields

        def signed(account: Account) -> bool:
            expected = signature(account.secret_key, f, cmd.body)
            return hmac.compare_digest(expected, str(f.get(SIGNATURE, "")))
        try:
            self.authorize(ip, f.get(ACCESS_KEY), signed, resources, admin_request=admin_request,
                           what=f"request code {cmd.code}")
        except AclDenied as exc:
            return RemotingCommand.create_response(cmd, ResponseCode.NO_PERMISSION, str(exc))
        return None

    def authorize(self, ip: str, access_key: str | None, signed: Callable[[Account], bool],
                  resources: Iterable[tuple[str, str, int]] | Callable[[], Iterable[tuple[str, str, int]]], *,
                  admin_request: bool = False, what: str = "the request", no_key_hint: str = "") -> None:
        """The whole ACL 1.0 decision for one request, for both protocols.

        *signed(account)* says whether the request's signature matches the account's secret (each
        protocol signs differently); *resources* (or a callable giving them) are the
        (kind, name, PUB|SUB|ANY) the request touches.  Raises AclUnauthenticated or AclForbidden,
        counted in :attr:`refused` and :attr:`last_refusal`."""
        try:
            account = self._authenticate(ip, access_key, signed, what, no_key_hint)
            if account is None or account.admin:
                return
            if admin_request:
                raise AclForbidden(f"{what} needs an admin account; AccessKey {account.access_key!r} is not one")
            check_permissions(account, resources() if callable(resources) else resources)
        except AclDenied as exc:
            self.refused += 1
            self.last_refusal = str(exc)
            log.info("refused %s from %s: %s", what, ip, exc)
            raise

    def _authenticate(self, ip: str, access_key: str | None, signed: Callable[[Account], bool], what: str,
                      no_key_hint: str) -> Account | None:
        """The account, or None when *ip* is white-listed (then nothing more is checked)."""
        acl = self.acl
        if acl.globally_whitelisted(ip):
            return None
        if not access_key:
            raise AclUnauthenticated(f"{what} from {ip} carries no AccessKey{no_key_hint}; "
                                     "ACL is enabled on this broker")
        account = acl.accounts.get(access_key)
        if account is None:
            raise AclUnauthenticated(f"no ACL account for AccessKey {access_key!r}")
        if account.white_address is not None and account.white_address.matches(ip):
            return None
        if not signed(account):
            raise AclUnauthenticated(f"signature of {what} does not match for AccessKey {access_key!r}")
        return account
