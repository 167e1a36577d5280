"""The users and ACLs of ACL 2.0, kept in the broker's metadata directory.

RocketMQ 5.3 keeps them in two RocksDB stores under ``authConfigPath`` (``users`` and ``acls``, by
``LocalAuthenticationMetadataProvider`` / ``LocalAuthorizationMetadataProvider``).  rocketq keeps
them as its other managers keep their tables: atomic JSON files in ``<storePathRootDir>/config``
(:mod:`rocketq.store.config_files`: written to a temp file, fsync'ed, renamed, the previous kept as
``.bak``), ``authUsers.json`` and ``authAcls.json``, readable only by the owner since passwords are
HMAC keys and must be stored as they are (RocketMQ stores them as they are too).

Every change is checked whole before anything moves (:mod:`rocketq.acl.auth_model`), applied to a
copy, written, and only then made current: a refused or failed change leaves both the file and the
tables as they were.  The rules are RocketMQ's ``AuthenticationMetadataManagerImpl`` and
``AuthorizationMetadataManagerImpl``: creating an existing user is an error, updating a missing one
too; deleting a user deletes its ACL; an ACL needs its user to exist; create and update of an ACL
both merge into the subject's existing one; deleting without a resource deletes the whole ACL.

At start the bootstrap users are made super users if they do not exist yet (``initAuthenticationUser``
``{"username": ..., "password": ...}`` and ``innerClientAuthenticationCredentials``
``{"accessKey": ..., "secretKey": ...}``), as RocketMQ's ``initUser`` does.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from pathlib import Path

from rocketq.acl.auth_model import Acl, AuthError, Resource, User, check_username, parse_subject
from rocketq.store.config_files import read_json, write_json

log = logging.getLogger(__name__)

USERS_FILE = "authUsers.json"
ACLS_FILE = "authAcls.json"
MAX_USERS = 10_000
MAX_ACLS = 10_000
FILE_MODE = 0o600


class AuthStoreError(AuthError):
    """A change the rules refuse (a user that exists, an ACL of a missing user...)."""


class AuthMetadata:
    def __init__(self, config_dir: Path):
        self.users_path = Path(config_dir) / USERS_FILE
        self.acls_path = Path(config_dir) / ACLS_FILE
        self.users: dict[str, User] = {}
        self.acls: dict[str, Acl] = {}

    # -- loading -------------------------------------------------------------------------------

    def load(self) -> "AuthMetadata":
        """Read both files; a broken entry is an error naming the file and the entry (the broker does not
        start on half its users)."""
        users = read_json(self.users_path) or {}
        for name, raw in (users.get("users") or {}).items():
            self.users[name] = User.from_json(raw, f"{self.users_path} users[{name!r}]")
        acls = read_json(self.acls_path) or {}
        for subject, raw in (acls.get("acls") or {}).items():
            self.acls[subject] = Acl.from_json(raw, subject, f"{self.acls_path} acls[{subject!r}]")
        return self

    def bootstrap(self, init_user: str | None, inner_credentials: str | None) -> None:
        """Create the configured super users that do not exist yet (never changes an existing one)."""
        for key, text, name_key, password_key in (("initAuthenticationUser", init_user, "username", "password"),
                                                  ("innerClientAuthenticationCredentials", inner_credentials,
                                                   "accessKey", "secretKey")):
            if not text:
                continue
            try:
                data = json.loads(text)
                if not isinstance(data, dict):
                    raise ValueError("not a JSON object")
                user = User.from_json({"username": data.get(name_key), "password": data.get(password_key),
                                       "userType": "Super"}, key)
            except (ValueError, AuthError) as exc:
                raise AuthError(f'{key} must be {{"{name_key}": "...", "{password_key}": "..."}}: {exc}') from None
            if user.username not in self.users:
                self.create_user(user)
                log.info("ACL 2.0: super user %r created from %s", user.username, key)

    # -- users ---------------------------------------------------------------------------------

    def get_user(self, username: str) -> User | None:
        return self.users.get(username)

    def list_users(self, filter_text: str | None = None) -> list[User]:
        """RocketMQ's listUser: the users whose name contains *filter_text*."""
        return [u for name, u in sorted(self.users.items()) if not filter_text or filter_text in name]

    def create_user(self, user: User) -> None:
        if user.username in self.users:
            raise AuthStoreError(f"The user {user.username!r} is existed")
        if len(self.users) >= MAX_USERS:
            raise AuthStoreError(f"there are {MAX_USERS} users already (the limit)")
        self._save_users({**self.users, user.username: user})

    def update_user(self, username: str, password: str | None, user_type: str | None,
                    user_status: str | None) -> User:
        """RocketMQ's updateUser: only what is given changes."""
        old = self.users.get(username)
        if old is None:
            raise AuthStoreError(f"The user {username!r} is not exist")
        new = User(username, password or old.password, user_type or old.user_type, user_status or old.user_status)
        self._save_users({**self.users, username: new})
        return new

    def delete_user(self, username: str) -> None:
        """The user and its ACL; a missing user is no error (RocketMQ's deleteUser)."""
        check_username(username)
        if username in self.users:
            self._save_users({k: v for k, v in self.users.items() if k != username})
        subject = f"User:{username}"
        if subject in self.acls:
            self._save_acls({k: v for k, v in self.acls.items() if k != subject})

    # -- ACLs ----------------------------------------------------------------------------------

    def get_acl(self, subject: str) -> Acl | None:
        self._existing_user(parse_subject(subject, "subject"))
        return self.acls.get(subject)

    def list_acls(self, subject_filter: str | None = None, resource_filter: str | None = None) -> list[Acl]:
        """RocketMQ's listAcl: ACLs whose subject contains *subject_filter*; with *resource_filter*, only
        the entries whose resource contains it (unless the subject does), ACLs left empty dropped."""
        out = []
        for subject, acl in sorted(self.acls.items()):
            if subject_filter and subject_filter not in subject:
                continue
            acl = copy.deepcopy(acl)
            if resource_filter and resource_filter not in subject:
                acl.policies = {t: [e for e in entries if resource_filter in e.resource.key]
                                for t, entries in acl.policies.items()}
                acl.policies = {t: e for t, e in acl.policies.items() if e}
            if acl.policies:
                out.append(acl)
        return out

    def put_acl(self, acl: Acl) -> Acl:
        """createAcl and updateAcl alike: merged into the subject's ACL (made when it has none)."""
        self._existing_user(acl.subject)
        merged = copy.deepcopy(self.acls.get(acl.subject)) or Acl(acl.subject, {})
        merged.merge(acl)
        if acl.subject not in self.acls and len(self.acls) >= MAX_ACLS:
            raise AuthStoreError(f"there are {MAX_ACLS} ACLs already (the limit)")
        Acl.from_json(merged.to_json(), None, f"the ACL of {acl.subject}")      # the entry limit, once merged
        self._save_acls({**self.acls, acl.subject: merged})
        return merged

    def delete_acl(self, subject: str, policy_type: str, resource: Resource | None) -> None:
        self._existing_user(subject)
        old = self.acls.get(subject)
        if old is None:
            raise AuthStoreError(f"The acl of {subject} is not exist")
        new = copy.deepcopy(old)
        new.delete(policy_type, resource)
        rest = {k: v for k, v in self.acls.items() if k != subject}
        self._save_acls({**rest, subject: new} if new.policies else rest)

    def _existing_user(self, subject: str) -> None:
        if subject[len("User:"):] not in self.users:
            raise AuthStoreError(f"The subject of {subject} is not exist")

    # -- persistence ---------------------------------------------------------------------------

    def _save_users(self, users: dict[str, User]) -> None:
        _write(self.users_path, {"users": {k: u.to_json() for k, u in sorted(users.items())}})
        self.users = users

    def _save_acls(self, acls: dict[str, Acl]) -> None:
        _write(self.acls_path, {"acls": {k: a.to_json() for k, a in sorted(acls.items())}})
        self.acls = acls


def _write(path: Path, data: dict) -> None:
    """write_json, then owner-only permissions on the file and its backup (they hold passwords)."""
    write_json(path, data)
    for p in (path, path.with_name(path.name + ".bak")):
        if p.exists():
            os.chmod(p, FILE_MODE)
