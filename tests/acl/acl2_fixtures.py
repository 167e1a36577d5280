"""ACL 2.0 test set-up shared by tests/acl and tests/grpc_endpoint: a broker with authentication and
authorization on and a bootstrap super user, and helpers that manage users and ACLs over the wire
with rocketq's admin client (requests 3001-3010)."""

from __future__ import annotations

import json

from rocketq.client import Admin
from rocketq.client.model import Credentials

SUPER = ("root", "root-secret")
ACL2_SETTINGS = {"authentication_enabled": True, "authorization_enabled": True,
                 "init_authentication_user": json.dumps({"username": SUPER[0], "password": SUPER[1]})}


def admin_for(addr: str, identity=SUPER) -> tuple[Admin, str]:
    """rocketq's Admin signing as *identity*, and the broker address to give it (no NameServer needed)."""
    return Admin("127.0.0.1:1", credentials=Credentials(*identity), timeout_s=5), addr


async def grant(addr: str, username: str, password: str, entries: list[tuple[str, str, str]] | None = None,
                *, source_ips: list[str] | None = None) -> None:
    """Create *username* and give it (resource, "Action,Action", Allow|Deny) entries."""
    admin, broker = admin_for(addr)
    async with admin:
        await admin.auth.create_user(username, password, broker_addr=broker)
        for resource, actions, decision in entries or ():
            await admin.auth.put_acl(f"User:{username}", [resource], actions.split(","), decision,
                                     source_ips=source_ips, broker_addr=broker)
