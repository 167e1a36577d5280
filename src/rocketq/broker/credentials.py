"""The credentials a broker signs its own requests with, and where its ACL file is.

A broker is a client too: it registers with NameServers, a slave copies config and offsets from
its master's remoting port and the CommitLog from its HA port, a broker in controller mode talks to
the controller.  With ACL on at the other end these need an admin account (see the README's
Security section).  The account is, in order:

1. ``innerClientAuthenticationCredentials`` - RocketMQ 5.3's key, a JSON object
   ``{"accessKey": "...", "secretKey": "..."}``;
2. with ACL on at this broker, the first ``admin: true`` account of its own ``plain_acl.yml``:
   the usual set-up gives every broker and NameServer of a cluster the same file, and the broker
   holds every secret in it already;
   with ACL 2.0 on, a super user of its own users (``initAuthenticationUser`` usually);
3. none: requests go unsigned (fine where nothing checks them).

Unlike RocketMQ 5.3, which makes the inner account a super user of its authentication store,
rocketq only signs with it: the account must be an admin in the ``plain_acl.yml`` of whoever
checks, so that one file says who may do what.
"""

from __future__ import annotations

import json
from pathlib import Path

INNER_CREDENTIALS_KEY = "innerClientAuthenticationCredentials"


def parse_credentials(text: str) -> tuple[str, str]:
    """(accessKey, secretKey) from the key's JSON; ValueError naming the key when it is not that."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict) or not data.get("accessKey") or not data.get("secretKey"):
        raise ValueError(f'{INNER_CREDENTIALS_KEY} must be {{"accessKey": "...", "secretKey": "..."}}')
    return str(data["accessKey"]), str(data["secretKey"])


def acl_file_of(acl_file: str | None, store_path) -> Path:
    """The plain_acl.yml a broker (and a standalone NameServer) reads: ``aclFile``, else
    ``<storePathRootDir>/config/plain_acl.yml``."""
    return Path(acl_file) if acl_file else Path(store_path) / "config" / "plain_acl.yml"


def broker_credentials(inner_credentials: str | None, acl) -> tuple[str, str] | None:
    """The account a broker signs with (see the module's doc); *acl* is its AclValidator or None."""
    if inner_credentials:
        return parse_credentials(inner_credentials)
    if acl is not None:
        return acl.admin_credentials()
    return None
