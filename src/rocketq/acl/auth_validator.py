"""ACL 2.0's authentication and authorization chains, for both protocols (RocketMQ 5.3's
``AuthenticationEvaluator`` / ``AuthorizationEvaluator`` with the default providers).

:class:`AuthValidator` has the interface of ACL 1.0's :class:`~rocketq.acl.validator.AclValidator`,
so the broker, the gRPC endpoint, HA, the metrics port and the console use either one the same way.
For one request from ``ip`` carrying an AccessKey (the username) and a signature:

1. authentication (``authenticationEnabled``): no AccessKey, no such user, a disabled user or a
   signature that does not match the user's password is refused (the signature is ACL 1.0's HMAC,
   :mod:`rocketq.acl.signing` on remoting, ``MQv2-HMAC-SHA1`` on gRPC - RocketMQ 5.3 kept both);
2. authorization (``authorizationEnabled``): a super user may do everything; any other user needs,
   for each resource the request touches, an ACL entry that allows one of the actions the request
   needs on it (:meth:`rocketq.acl.auth_model.Acl.decide`; deny by default).  What a remoting code
   needs is :func:`rocketq.acl.requests.v2_grants`; a gRPC call's, :mod:`rocketq.grpc_endpoint.auth`.

With authorization on and authentication off the AccessKey is taken at its word, as in RocketMQ;
the broker logs a warning at start for that combination.  A topic ``%RETRY%<group>`` is checked as
the group, and a group named ``%RETRY%g`` or ``%DLQ%g`` as ``g`` (RocketMQ's ``Resource.ofGroup``).
Refusals answer NO_PERMISSION (gRPC: UNAUTHORIZED / FORBIDDEN) with RocketMQ's wording: who, which
resource, from where, and why.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Callable, Iterable

from rocketq.acl.auth_store import AuthMetadata
from rocketq.acl.plain_acl import ANY, PUB, SUB, Account
from rocketq.acl.requests import Needs, needs_of, v2_found_grants, v2_grants
from rocketq.acl.signing import ACCESS_KEY, SIGNATURE, signature
from rocketq.acl.validator import AclDenied, AclForbidden, AclUnauthenticated, resolve_resource
from rocketq.remoting import RemotingCommand, ResponseCode

log = logging.getLogger(__name__)

# gRPC's ANY (QueryRoute) is RocketMQ's [Pub, Sub]; remoting never passes numbers (see v2_grants)
_PERM_ACTIONS = {PUB: ("Pub",), SUB: ("Sub",), ANY: ("Pub", "Sub")}
_TYPES = {"topic": "Topic", "group": "Group", "cluster": "Cluster", "namespace": "Namespace"}
_GROUP_PREFIXES = ("%RETRY%", "%DLQ%")


class AuthValidator:
    def __init__(self, metadata: AuthMetadata, *, cluster: str, authentication: bool = True,
                 authorization: bool = True):
        self.metadata = metadata
        self.cluster = cluster
        self.authentication = authentication
        self.authorization = authorization
        self.refused = 0
        self.last_refusal = ""

    def reload_if_changed(self) -> bool:
        """Users and ACLs change only through the admin requests, in this process: nothing to re-read."""
        return False

    # -- what the HTTP ports and the broker's own credentials need ------------------------------

    def account(self, username: str) -> Account | None:
        """The enabled user as an ACL 1.0 account (admin = super user), or None."""
        user = self.metadata.get_user(username or "")
        if user is None or not user.enabled:
            return None
        return Account(user.username, user.password, admin=user.super)

    def globally_whitelisted(self, ip: str) -> bool:
        return False                     # ACL 2.0 has no address that skips the checks

    def admin_credentials(self) -> tuple[str, str] | None:
        """A super user's (username, password), for a broker that signs its own requests."""
        user = next((u for u in self.metadata.list_users() if u.super and u.enabled), None)
        return (user.username, user.password) if user is not None else None

    # -- remoting -------------------------------------------------------------------------------

    def check(self, ip: str, cmd: RemotingCommand, needs: Needs | None = None) -> RemotingCommand | None:
        needs = needs_of(cmd) if needs is None else needs
        return self._decide(ip, cmd, lambda: v2_grants(cmd.code, needs, self.cluster))

    def check_admin(self, ip: str, cmd: RemotingCommand) -> RemotingCommand | None:
        return self._decide(ip, cmd, lambda: [("cluster", self.cluster, ("Update",))])

    def check_found(self, ip: str, cmd: RemotingCommand, resources) -> RemotingCommand | None:
        return self._decide(ip, cmd, lambda: v2_found_grants(cmd.code, resources))

    def _decide(self, ip: str, cmd: RemotingCommand, grants) -> RemotingCommand | None:
        f = cmd.ext_fields

        def signed(account: Account) -> bool:
            return hmac.compare_digest(signature(account.secret_key, f, cmd.body), str(f.get(SIGNATURE, "")))
        try:
            self.authorize(ip, f.get(ACCESS_KEY), signed, grants, what=f"request code {cmd.code}")
        except AclDenied as exc:
            return RemotingCommand.create_response(cmd, ResponseCode.NO_PERMISSION, str(exc))
        return None

    # -- both protocols -------------------------------------------------------------------------

    def authorize(self, ip: str, access_key: str | None, signed: Callable[[Account], bool],
                  resources: Iterable | Callable[[], Iterable], *, admin_request: bool = False,
                  what: str = "the request", no_key_hint: str = "") -> None:
        """The whole decision for one request.  *resources* (or a callable giving them) are
        (kind, name, actions) - actions a tuple of ACL 2.0 action names, or ACL 1.0's PUB / SUB / ANY;
        an *admin_request* with none needs Update on the cluster.  Raises AclUnauthenticated or
        AclForbidden, counted in :attr:`refused` and :attr:`last_refusal`."""
        try:
            username = self._authenticate(ip, access_key, signed, what, no_key_hint)
            if not self.authorization:
                return
            user = self.metadata.get_user(username)
            if user is None:
                raise AclForbidden(f"User:{username} not found")
            if not user.enabled:
                raise AclUnauthenticated(f"User:{username} is disabled")
            if user.super:
                return
            wanted = list(resources() if callable(resources) else resources)
            if admin_request and not wanted:
                wanted = [("cluster", self.cluster, ("Update",))]
            for kind, name, actions in wanted:
                self._authorize_one(username, ip, kind, name, actions)
        except AclDenied as exc:
            self.refused += 1
            self.last_refusal = str(exc)
            log.info("refused %s from %s: %s", what, ip, exc)
            raise

    def _authenticate(self, ip: str, access_key: str | None, signed, what: str, no_key_hint: str) -> str:
        """The username the request is made as."""
        if not access_key:
            raise AclUnauthenticated(f"{what} from {ip} carries no AccessKey{no_key_hint}; ACL 2.0 "
                                     "(authentication/authorization) is enabled on this broker")
        if not self.authentication:
            return access_key
        user = self.metadata.get_user(access_key)
        if user is None:
            raise AclUnauthenticated(f"User:{access_key} is not found")
        if not user.enabled:
            raise AclUnauthenticated(f"User:{access_key} is disabled")
        if not signed(Account(user.username, user.password)):
            raise AclUnauthenticated(f"check signature failed: the signature of {what} does not match "
                                     f"User:{access_key}'s password")
        return access_key

    def _authorize_one(self, username: str, ip: str, kind: str, name: str, actions) -> None:
        kind, name = resolve_resource(kind, name)
        if kind == "group":
            name = next((name[len(p):] for p in _GROUP_PREFIXES if name.startswith(p)), name)
        if isinstance(actions, int):
            actions = getattr(actions, "v2_actions", None) or _PERM_ACTIONS[int(actions)]
        rtype = _TYPES[kind]
        acl = self.metadata.acls.get(f"User:{username}")
        entry = acl.decide(rtype, name, actions, ip) if acl is not None else None
        where = f"User:{username} has no permission to access {rtype}:{name} from {ip}"
        if entry is None:
            raise AclForbidden(f"{where}, no matched policies (it needs {' or '.join(actions)})")
        if entry.decision == "Deny":
            raise AclForbidden(f"{where}, the decision is deny ({entry.resource.key} "
                               f"{','.join(entry.actions)} Deny)")
