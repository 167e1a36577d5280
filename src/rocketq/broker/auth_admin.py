"""ACL 2.0's admin requests 3001-3010 (RocketMQ 5.3's ``AdminBrokerProcessor`` createUser ... listAcl),
which mqadmin's ``createUser`` / ``updateUser`` / ``deleteUser`` / ``getUser`` / ``listUser`` /
``createAcl`` / ``updateAcl`` / ``deleteAcl`` / ``getAcl`` / ``listAcl`` and ``rocketq user|acl`` send.

=================  ==========================  ===============================================
request            header fields               body
=================  ==========================  ===============================================
AUTH_CREATE_USER   username                    UserInfo {username, password, userType, userStatus}
AUTH_UPDATE_USER   username                    UserInfo (the fields to change)
AUTH_DELETE_USER   username                    -
AUTH_GET_USER      username                    answer: UserInfo, or no body
AUTH_LIST_USER     filter                      answer: [UserInfo], or no body
AUTH_CREATE_ACL    subject                     AclInfo {subject, policies: [{policyType, entries:
AUTH_UPDATE_ACL    subject                       [{resource, actions, sourceIps, decision}]}]}
AUTH_DELETE_ACL    subject, policyType,        -
                   resource
AUTH_GET_ACL       subject                     answer: AclInfo, or no body
AUTH_LIST_ACL      subjectFilter,              answer: [AclInfo], or no body
                   resourceFilter
=================  ==========================  ===============================================

Who may send them is the ACL's business (Update on ``Cluster:<brokerClusterName>``, Get for the reads:
:mod:`rocketq.acl.requests`); beyond that, as in RocketMQ, only a super user creates a super user or
changes or deletes one.  A body that is not JSON, a bad name, action or address is INVALID_PARAMETER
with the field named (RocketMQ answers NO_PERMISSION for those too); a change the rules refuse (the user
exists, the subject does not) is NO_PERMISSION with RocketMQ's wording.  Nothing is stored unless the
whole request is valid (:mod:`rocketq.acl.auth_store`).
"""

from __future__ import annotations

import json
import logging

from rocketq.acl.auth_model import (POLICY_TYPES, USER_STATUSES, USER_TYPES, Acl, AuthError, Resource, User,
                                    _by_name, check_password, check_username, parse_subject)
from rocketq.acl.auth_store import AuthStoreError
from rocketq.acl.signing import ACCESS_KEY
from rocketq.common import fastjson
from rocketq.remoting import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger(__name__)

MAX_AUTH_BODY_BYTES = 512 * 1024
R = RequestCode


def handlers(broker) -> dict:
    def bind(fn):
        return lambda conn, cmd: _answer(broker, cmd, fn)
    return {R.AUTH_CREATE_USER: bind(_create_user), R.AUTH_UPDATE_USER: bind(_update_user),
            R.AUTH_DELETE_USER: bind(_delete_user), R.AUTH_GET_USER: bind(_get_user),
            R.AUTH_LIST_USER: bind(_list_user), R.AUTH_CREATE_ACL: bind(_put_acl), R.AUTH_UPDATE_ACL: bind(_put_acl),
            R.AUTH_DELETE_ACL: bind(_delete_acl), R.AUTH_GET_ACL: bind(_get_acl), R.AUTH_LIST_ACL: bind(_list_acl)}


class _Refused(Exception):
    def __init__(self, code: int, remark: str):
        super().__init__(remark)
        self.code = code


async def _answer(broker, cmd: RemotingCommand, fn) -> RemotingCommand:
    auth = getattr(broker, "auth", None)
    if auth is None:
        return RemotingCommand.create_response(
            cmd, ResponseCode.SYSTEM_ERROR, "ACL 2.0 is off on this broker: set authenticationEnabled / "
            "authorizationEnabled (or authenticationMetadataProvider) to keep users and ACLs")
    try:
        body = fn(auth, cmd, _requester_is_super(auth, cmd))
    except _Refused as exc:
        return RemotingCommand.create_response(cmd, exc.code, str(exc))
    except AuthStoreError as exc:
        return RemotingCommand.create_response(cmd, ResponseCode.NO_PERMISSION, str(exc))
    except AuthError as exc:
        return RemotingCommand.create_response(cmd, ResponseCode.INVALID_PARAMETER, str(exc))
    except OSError as exc:               # a full disk: nothing changed (auth_store writes before it switches)
        log.error("ACL 2.0 change not saved: %s", exc)
        return RemotingCommand.create_response(cmd, ResponseCode.SYSTEM_ERROR, f"not saved: {exc}")
    data = b"" if body is None else json.dumps(body).encode()
    return RemotingCommand.create_response(cmd, ResponseCode.SUCCESS, None, body=data)


def _requester_is_super(auth, cmd: RemotingCommand) -> bool:
    """RocketMQ's isNotSuperUserLogin, negated: no AccessKey (checks off) counts as super."""
    key = cmd.ext_fields.get(ACCESS_KEY)
    if not key:
        return True
    user = auth.get_user(key)
    return user is not None and user.super


def _body(cmd: RemotingCommand, what: str, *, required: bool = True):
    if not cmd.body:
        if required:
            raise AuthError(f"the {what} body is missing")
        return {}
    if len(cmd.body) > MAX_AUTH_BODY_BYTES:
        raise AuthError(f"the {what} body is {len(cmd.body)} bytes, more than {MAX_AUTH_BODY_BYTES}")
    try:
        return fastjson.loads(cmd.body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise AuthError(f"the {what} body is not JSON: {exc}") from None


def _header(cmd: RemotingCommand, name: str) -> str | None:
    value = cmd.ext_fields.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _username(cmd: RemotingCommand) -> str:
    name = _header(cmd, "username")
    if name is None:
        raise _Refused(ResponseCode.INVALID_PARAMETER, "The username is blank")
    return check_username(name)


def _create_user(auth, cmd, is_super):
    name = _username(cmd)
    data = _body(cmd, "UserInfo")
    if not isinstance(data, dict):
        raise AuthError("the UserInfo body is not a JSON object")
    user = User.from_json({**data, "username": name}, "UserInfo")
    if user.super and not is_super:
        raise _Refused(ResponseCode.SYSTEM_ERROR, "The super user can only be create by super user")
    auth.create_user(user)


def _update_user(auth, cmd, is_super):
    name = _username(cmd)
    data = _body(cmd, "UserInfo")
    if not isinstance(data, dict):
        raise AuthError("the UserInfo body is not a JSON object")
    password = check_password(data["password"], "UserInfo password") if data.get("password") else None
    user_type = _by_name(data["userType"], USER_TYPES, "UserInfo userType") if data.get("userType") else None
    status = _by_name(data["userStatus"], USER_STATUSES, "UserInfo userStatus") if data.get("userStatus") else None
    if user_type == "Super" and not is_super:
        raise _Refused(ResponseCode.SYSTEM_ERROR, "The super user can only be update by super user")
    old = auth.get_user(name)
    if old is not None and old.super and not is_super:
        raise AuthStoreError("The super user can only be update by super user")
    auth.update_user(name, password, user_type, status)


def _delete_user(auth, cmd, is_super):
    name = _username(cmd)
    old = auth.get_user(name)
    if old is not None and old.super and not is_super:
        raise AuthStoreError("The super user can only be update by super user")
    auth.delete_user(name)


def _get_user(auth, cmd, is_super):
    user = auth.get_user(_username(cmd))
    return user.to_json() if user is not None else None


def _list_user(auth, cmd, is_super):
    users = auth.list_users(_header(cmd, "filter"))
    return [u.to_json() for u in users] or None


def _put_acl(auth, cmd, is_super):
    subject = _header(cmd, "subject")
    acl = Acl.from_json(_body(cmd, "AclInfo"), subject, "AclInfo")
    if subject is not None and parse_subject(subject, "the subject header") != acl.subject:
        raise AuthError(f"the subject header {subject!r} and the body's {acl.subject!r} differ")
    auth.put_acl(acl)


def _subject(cmd) -> str:
    return parse_subject(_header(cmd, "subject"), "the subject header")


def _delete_acl(auth, cmd, is_super):
    policy_type = _header(cmd, "policyType")
    policy_type = _by_name(policy_type, POLICY_TYPES, "policyType") if policy_type else "Custom"
    resource = _header(cmd, "resource")
    auth.delete_acl(_subject(cmd), policy_type, Resource.parse(resource, "resource") if resource else None)


def _get_acl(auth, cmd, is_super):
    acl = auth.get_acl(_subject(cmd))
    return acl.to_json() if acl is not None else None


def _list_acl(auth, cmd, is_super):
    acls = auth.list_acls(_header(cmd, "subjectFilter"), _header(cmd, "resourceFilter"))
    return [a.to_json() for a in acls] or None
