"""ACL 2.0 users and ACLs on running brokers (``Admin(...).auth``), as mqadmin's createUser ... listAcl.

Changes go to every broker of the cluster - masters and slaves, as mqadmin's ``-c`` does, since each
broker keeps its own users and ACLs - or to the one address given; reads ask the masters (or the
address) and answer from the first that has an answer.  The request and body shapes are RocketMQ's
(:mod:`rocketq.broker.auth_admin`): ``UserInfo`` and ``AclInfo`` dicts.
"""

from __future__ import annotations

from rocketq.common import fastjson
from rocketq.remoting import RequestCode as R


class AuthAdmin:
    def __init__(self, admin):
        self._admin = admin
        self._api = admin.api

    async def _every_broker(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        if broker_addr:
            return [broker_addr]
        return sorted({a for b in await self._admin.brokers(cluster) for a in b.addrs.values()})

    async def _masters(self, broker_addr: str | None, cluster: str | None) -> list[str]:
        return [broker_addr] if broker_addr else await self._admin._masters(cluster)

    async def _change(self, code: int, header: dict, body: dict | None, broker_addr, cluster) -> list[str]:
        """Send to every broker; the addresses changed."""
        addrs = await self._every_broker(broker_addr, cluster)
        data = fastjson.dumps(body).encode() if body is not None else b""
        for addr in addrs:
            await self._api.invoke(addr, code, {k: v for k, v in header.items() if v is not None}, data)
        return addrs

    async def _read(self, code: int, header: dict, broker_addr, cluster):
        for addr in await self._masters(broker_addr, cluster):
            r = await self._api.invoke(addr, code, {k: v for k, v in header.items() if v is not None})
            if r.body:
                return fastjson.loads(r.body)
        return None

    # -- users ---------------------------------------------------------------------------------

    async def create_user(self, username: str, password: str, user_type: str | None = None, *,
                          broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        info = {"username": username, "password": password, "userType": user_type}
        return await self._change(R.AUTH_CREATE_USER, {"username": username},
                                  {k: v for k, v in info.items() if v is not None}, broker_addr, cluster)

    async def update_user(self, username: str, *, password: str | None = None, user_type: str | None = None,
                          user_status: str | None = None, broker_addr: str | None = None,
                          cluster: str | None = None) -> list[str]:
        info = {"username": username, "password": password, "userType": user_type, "userStatus": user_status}
        return await self._change(R.AUTH_UPDATE_USER, {"username": username},
                                  {k: v for k, v in info.items() if v is not None}, broker_addr, cluster)

    async def delete_user(self, username: str, *, broker_addr: str | None = None,
                          cluster: str | None = None) -> list[str]:
        return await self._change(R.AUTH_DELETE_USER, {"username": username}, None, broker_addr, cluster)

    async def get_user(self, username: str, *, broker_addr: str | None = None,
                       cluster: str | None = None) -> dict | None:
        return await self._read(R.AUTH_GET_USER, {"username": username}, broker_addr, cluster)

    async def list_users(self, filter_text: str | None = None, *, broker_addr: str | None = None,
                         cluster: str | None = None) -> list[dict]:
        return await self._read(R.AUTH_LIST_USER, {"filter": filter_text}, broker_addr, cluster) or []

    # -- ACLs ----------------------------------------------------------------------------------

    async def put_acl(self, subject: str, resources: list[str], actions: list[str], decision: str, *,
                      source_ips: list[str] | None = None, policy_type: str | None = None, update: bool = False,
                      broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        """createAcl (or updateAcl with *update*): one entry per resource, each with *actions*, *source_ips*
        and *decision*, merged into the subject's ACL."""
        entries = [{"resource": r, "actions": list(actions), "sourceIps": list(source_ips or ()),
                    "decision": decision} for r in resources]
        policy = {"entries": entries, **({"policyType": policy_type} if policy_type else {})}
        code = R.AUTH_UPDATE_ACL if update else R.AUTH_CREATE_ACL
        return await self._change(code, {"subject": subject}, {"subject": subject, "policies": [policy]},
                                  broker_addr, cluster)

    async def delete_acl(self, subject: str, resource: str | None = None, *, policy_type: str | None = None,
                         broker_addr: str | None = None, cluster: str | None = None) -> list[str]:
        return await self._change(R.AUTH_DELETE_ACL, {"subject": subject, "resource": resource,
                                                      "policyType": policy_type}, None, broker_addr, cluster)

    async def get_acl(self, subject: str, *, broker_addr: str | None = None,
                      cluster: str | None = None) -> dict | None:
        return await self._read(R.AUTH_GET_ACL, {"subject": subject}, broker_addr, cluster)

    async def list_acls(self, subject_filter: str | None = None, resource_filter: str | None = None, *,
                        broker_addr: str | None = None, cluster: str | None = None) -> list[dict]:
        return await self._read(R.AUTH_LIST_ACL, {"subjectFilter": subject_filter, "resourceFilter": resource_filter},
                                broker_addr, cluster) or []
