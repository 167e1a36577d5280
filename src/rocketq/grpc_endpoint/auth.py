"""ACL on gRPC calls: ACL 1.0 against ``plain_acl.yml``, or ACL 2.0 against the broker's users and ACLs.

ACL 2.0 (RocketMQ 5.3) reads the same ``authorization`` header: the Credential is the username and
the signature's key its password; the table's PUB is the action Pub, SUB Sub, "PUB or SUB" [Pub,
Sub]; UpdateOffset needs Sub or Update, GetOffset Sub or Get, QueryOffset Get (as the remoting
requests that do the same work).  The rest of this text is ACL 1.0's; the decision is the validator's.

Every v2 client call carries ``authorization: MQv2-HMAC-SHA1 Credential=<ak>,
SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1(secret key, x-mq-date-time)>`` and the
signed ``x-mq-date-time`` header.  The decision is the remoting side's
(:meth:`rocketq.acl.validator.AclValidator.authorize`): a globally white-listed peer IP passes;
else the call must name an account, and either come from the account's ``whiteRemoteAddress``
(then nothing more is checked) or carry a matching signature; then, unless the account is an
admin, it needs these permissions (RocketMQ 5.1's ``PlainAccessResource.parse(GeneratedMessageV3,
AuthenticationHeader)``):

=================================  ===========================================================
RPC                                needs
=================================  ===========================================================
SendMessage                        PUB on each message's topic
EndTransaction                     PUB on the topic
RecallMessage                      PUB on the topic
QueryRoute                         PUB or SUB on the topic
QueryAssignment                    SUB on the topic, SUB on the group
ReceiveMessage                     SUB on the queue's topic, SUB on the group
AckMessage                         SUB on the topic, SUB on the group
ChangeInvisibleDuration            SUB on the topic, SUB on the group
ForwardMessageToDeadLetterQueue    SUB on the topic, SUB on the group
PullMessage                        SUB on the queue's topic, SUB on the group
UpdateOffset, GetOffset            SUB on the queue's topic, SUB on the group
QueryOffset                        PUB or SUB on the queue's topic
Heartbeat                          consumers (PUSH_CONSUMER, SIMPLE_CONSUMER): SUB on the group,
                                   which they must name; others: signature only
NotifyClientTermination            SUB on the group when one is named; else signature only
Telemetry                          signature when the stream opens; then each ``settings``
                                   command: PUB on each publishing topic, SUB on the
                                   subscription group and on each subscribed topic (one with
                                   neither publishing nor subscription is refused)
SyncLiteSubscription               not served (NOT_IMPLEMENTED), nothing checked
=================================  ===========================================================

RocketMQ 5.1's gRPC ACL lists none of PullMessage, UpdateOffset, GetOffset, QueryOffset and
RecallMessage (its proxy did not serve them), which would leave them open to any signed account;
they are checked as the remoting requests that do the same work are (``PULL_MESSAGE``,
``QUERY/UPDATE_CONSUMER_OFFSET``: SUB on topic and group), RecallMessage as RocketMQ 5.3's
authorization does (``DefaultAuthorizationContextBuilder``: PUB on the topic), and QueryOffset,
which RocketMQ 5.3 checks as GET on the topic (``GetMaxOffsetRequestHeader``,
``SearchOffsetRequestHeader``), as any access to the topic, like QueryRoute.

A topic named ``%RETRY%<group>`` is checked as that group.  A bad or missing signature (or no
such account) is answered UNAUTHORIZED, a missing permission FORBIDDEN, each with a message naming
the account, the resource and the permission.  Namespaces (``resource_namespace``) are not part of
the names checked, as the endpoint does not use them to name topics or groups either.  With ACL
off the header is ignored.
"""

from __future__ import annotations

import hashlib
import hmac

from rocketq.acl.plain_acl import ANY, PUB, SUB
from rocketq.acl.validator import AclForbidden, AclUnauthenticated
from rocketq.grpc_endpoint.protocol import Code, V2Error, pb, spb

SCHEME = "MQv2-HMAC-SHA1"
_CONSUMER_TYPES = frozenset({pb.ClientType.PUSH_CONSUMER, pb.ClientType.SIMPLE_CONSUMER})

Resources = list[tuple[str, str, int]]


def parse_authorization(value: str) -> dict[str, str]:
    """The fields of an ``authorization`` header; empty when it is not of the MQv2-HMAC-SHA1 scheme."""
    scheme, _, rest = value.strip().partition(" ")
    if scheme != SCHEME:
        return {}
    fields = {}
    for part in rest.split(","):
        k, sep, v = part.strip().partition("=")
        if sep:
            fields[k.strip()] = v.strip()
    return fields


class _Perm(int):
    """An ACL 1.0 permission that says which ACL 2.0 actions stand for it in this call (plain PUB, SUB and
    ANY are Pub, Sub and [Pub, Sub]: :class:`rocketq.acl.auth_validator.AuthValidator`)."""

    def __new__(cls, perm: int, v2_actions: tuple[str, ...]):
        self = super().__new__(cls, perm)
        self.v2_actions = v2_actions
        return self


# as the remoting requests that do the same work (RocketMQ 5.3's QUERY/UPDATE_CONSUMER_OFFSET, GET_MAX_OFFSET)
_GET_OFFSET, _UPDATE_OFFSET, _QUERY_OFFSET = _Perm(SUB, ("Sub", "Get")), _Perm(SUB, ("Sub", "Update")), \
    _Perm(ANY, ("Get",))


def _topic_and_group(req) -> Resources:
    return [("topic", req.topic.name, SUB), ("group", req.group.name, SUB)]


def _send(req) -> Resources:
    return [("topic", t, PUB) for t in dict.fromkeys(m.topic.name for m in req.messages)]


def _queue_and_group(req) -> Resources:
    return [("topic", req.message_queue.topic.name, SUB), ("group", req.group.name, SUB)]


def _heartbeat(req) -> Resources:
    if req.client_type not in _CONSUMER_TYPES:
        return []
    if not req.group.name:
        raise AclForbidden("a consumer's Heartbeat names no group; ACL needs one to check SUB on it")
    return [("group", req.group.name, SUB)]


_NEEDS = {
    spb.SendMessageRequest: _send,
    spb.EndTransactionRequest: lambda r: [("topic", r.topic.name, PUB)],
    spb.QueryRouteRequest: lambda r: [("topic", r.topic.name, ANY)],
    spb.QueryAssignmentRequest: _topic_and_group,
    spb.ReceiveMessageRequest: lambda r: [("topic", r.message_queue.topic.name, SUB), ("group", r.group.name, SUB)],
    spb.AckMessageRequest: _topic_and_group,
    spb.ChangeInvisibleDurationRequest: _topic_and_group,
    spb.ForwardMessageToDeadLetterQueueRequest: _topic_and_group,
    spb.HeartbeatRequest: _heartbeat,
    spb.NotifyClientTerminationRequest: lambda r: [("group", r.group.name, SUB)] if r.group.name else [],
    spb.PullMessageRequest: _queue_and_group,
    spb.UpdateOffsetRequest: lambda r: [("topic", r.message_queue.topic.name, _UPDATE_OFFSET),
                                        ("group", r.group.name, _UPDATE_OFFSET)],
    spb.GetOffsetRequest: lambda r: [("topic", r.message_queue.topic.name, _GET_OFFSET),
                                     ("group", r.group.name, _GET_OFFSET)],
    spb.QueryOffsetRequest: lambda r: [("topic", r.message_queue.topic.name, _QUERY_OFFSET)],
    spb.RecallMessageRequest: lambda r: [("topic", r.topic.name, PUB)],
}


def settings_resources(settings: pb.Settings) -> Resources:
    """What a Telemetry ``settings`` command needs (RocketMQ checks each one on the stream)."""
    publishing, subscription = settings.HasField("publishing"), settings.HasField("subscription")
    if not publishing and not subscription:
        raise AclForbidden("a Telemetry settings command with neither publishing nor subscription")
    out: Resources = []
    if publishing:
        out += [("topic", t.name, PUB) for t in settings.publishing.topics]
    if subscription:
        out.append(("group", settings.subscription.group.name, SUB))
        out += [("topic", e.topic.name, SUB) for e in settings.subscription.subscriptions]
    return out


def needed_resources(req) -> Resources:
    """(kind "topic"|"group", name, PUB|SUB|ANY) a v2 request needs; [] for one that needs only the
    signature (and for a request that did not parse, which is answered BAD_REQUEST afterwards)."""
    fn = _NEEDS.get(type(req))
    return fn(req) if fn is not None else []


def authorize(validator, ip: str, md: dict[str, str], rpc: str, resources=()) -> None:
    """Raises V2Error(UNAUTHORIZED) or V2Error(FORBIDDEN) unless the call may go on.

    *validator* is the broker's AclValidator, *md* the call's metadata (lower-case keys), *rpc* the
    method name for messages, *resources* what the call needs (see :func:`needed_resources`), or a
    callable giving them, so they are only worked out when the peer is not white-listed."""
    header = md.get("authorization")
    fields = parse_authorization(header) if header else {}
    access_key = fields.get("Credential", "").split("/")[0] or None
    date_time = md.get("x-mq-date-time", "").encode()

    def signed(account) -> bool:
        expected = hmac.new(account.secret_key.encode(), date_time, hashlib.sha1).hexdigest()
        return hmac.compare_digest(expected, fields.get("Signature", "").lower())
    hint = "" if not header or fields else f" (its authorization is not of the {SCHEME} scheme)"
    try:
        validator.authorize(ip, access_key, signed, resources, what=f"gRPC {rpc}", no_key_hint=hint)
    except AclUnauthenticated as exc:
        raise V2Error(Code.UNAUTHORIZED, str(exc)) from None
    except AclForbidden as exc:
        raise V2Error(Code.FORBIDDEN, str(exc)) from None
