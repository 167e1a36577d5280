"""A small asyncio client of etcd's v3 API through its JSON gateway (``/v3/...`` over HTTP, served by
every etcd 3.4+ member on its client port), on aiohttp - already a dependency of rocketq.

Why not a Python etcd package: ``etcd3`` on PyPI last released in 2020 (0.12.0), pins grpcio 1.27 /
protobuf 3.6 in its requirements and ships ``_pb2`` modules generated for protobuf 3 that protobuf 4+
(rocketq runs 7.x) refuses to load; it is synchronous as well.  Generating gRPC stubs from etcd's
protos at build time would need etcd's proto tree with gogoproto and google.api imports.  The JSON
gateway is part of etcd's documented API (it maps one-to-one onto the gRPC messages: int64 as strings,
bytes as base64), so the few calls needed here are a few lines each.

Theory of operation
-------------------
:class:`EtcdClient` holds the endpoints of all members.  Every call goes to the current endpoint; a
connection error or timeout moves to the next one and the call is retried there (every call here is
either a read or a compare-and-swap transaction, so a retry cannot apply a write twice: a write whose
answer was lost fails its compare the second time and the caller re-reads).  A member that is cut off
from the quorum answers errors (no leader), which are retried on the next member the same way.

:meth:`EtcdClient.watch` is a long-lived POST ``/v3/watch`` whose answer streams one JSON object per
line; it yields the events and reconnects (from the last revision seen + 1) when the stream breaks.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 2.0              # one HTTP call to one member
CONNECT_TIMEOUT_S = 0.5
WATCH_IDLE_TIMEOUT_S = 30.0       # etcd sends progress notifications; silence this long is a dead stream
RETRY_PAUSE_S = 0.1               # between two passes over all endpoints


class EtcdError(RuntimeError):
    """etcd could not be reached on any endpoint, or refused the request."""


def b64(s: str | bytes) -> str:
    return base64.b64encode(s.encode() if isinstance(s, str) else s).decode()


def unb64(s: str | None) -> bytes:
    return base64.b64decode(s) if s else b""


def prefix_end(prefix: str) -> str:
    """The range_end that makes a range over every key starting with *prefix* (etcd's convention)."""
    raw = bytearray(prefix.encode())
    raw[-1] += 1
    return b64(bytes(raw))


@dataclass
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int

    @classmethod
    def parse(cls, kv: dict) -> KeyValue:
        return cls(unb64(kv.get("key")).decode(), unb64(kv.get("value")), int(kv.get("create_revision", 0)),
                   int(kv.get("mod_revision", 0)), int(kv.get("lease", 0)))


@dataclass
class WatchEvent:
    type: str                     # "PUT" or "DELETE"
    kv: KeyValue


def compare(key: str, target: str, value, result: str = "EQUAL") -> dict:
    """A txn compare: *target* is CREATE, MOD, VERSION, VALUE or LEASE."""
    field = {"CREATE": "create_revision", "MOD": "mod_revision", "VERSION": "version",
             "VALUE": "value", "LEASE": "lease"}[target]
    return {"key": b64(key), "target": target, "result": result,
            field: b64(value) if target == "VALUE" else str(value)}


def put_op(key: str, value: bytes | str, lease: int = 0) -> dict:
    req = {"key": b64(key), "value": b64(value)}
    if lease:
        req["lease"] = str(lease)
    return {"request_put": req}


def range_op(key: str) -> dict:
    return {"request_range": {"key": b64(key)}}


def delete_op(key: str) -> dict:
    return {"request_delete_range": {"key": b64(key)}}


class EtcdClient:
    def __init__(self, endpoints: list[str], *, timeout_s: float = CALL_TIMEOUT_S):
        if not endpoints:
            raise ValueError("no etcd endpoint given")
        self.endpoints = [e.rstrip("/") if "://" in e else f"http://{e.rstrip('/')}" for e in endpoints]
        self.timeout_s = timeout_s
        self._current = 0
        self._session: aiohttp.ClientSession | None = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(
                total=self.timeout_s, sock_connect=CONNECT_TIMEOUT_S))
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def call(self, path: str, body: dict) -> dict:
        """POST *body* to *path* on the current member, moving on to the others when it fails."""
        errors = []
        for attempt in range(2 * len(self.endpoints)):
            endpoint = self.endpoints[self._current]
            try:
                async with self._http().post(endpoint + path, json=body) as resp:
                    data = await resp.json(content_type=None)
                    if resp.status == 200 and "error" not in data:
                        return data
                    errors.append(f"{endpoint}: {resp.status} {data.get('error') or data.get('message')}")
            except (TimeoutError, aiohttp.ClientError, ValueError) as exc:
                errors.append(f"{endpoint}: {type(exc).__name__} {exc}")
            self._current = (self._current + 1) % len(self.endpoints)
            if attempt + 1 == len(self.endpoints):
                await asyncio.sleep(RETRY_PAUSE_S)
        raise EtcdError(f"etcd {path} failed on every endpoint: {'; '.join(errors[-len(self.endpoints):])}")

    # -- key-value ---------------------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        data = await self.call("/v3/kv/range", {"key": b64(key)})
        kvs = data.get("kvs") or []
        return KeyValue.parse(kvs[0]) if kvs else None

    async def get_prefix(self, prefix: str) -> tuple[list[KeyValue], int]:
        """Every key under *prefix*, and the store revision they were read at."""
        data = await self.call("/v3/kv/range", {"key": b64(prefix), "range_end": prefix_end(prefix)})
        return [KeyValue.parse(kv) for kv in data.get("kvs") or []], int(data["header"]["revision"])

    async def txn(self, compares: list[dict], success: list[dict], failure: list[dict] = ()) -> tuple[bool, dict]:
        """One transaction: (whether every compare held, etcd's answer)."""
        data = await self.call("/v3/kv/txn", {"compare": compares, "success": success, "failure": list(failure)})
        return bool(data.get("succeeded")), data

    async def delete(self, key: str) -> None:
        await self.call("/v3/kv/deleterange", {"key": b64(key)})

    # -- leases --------------------------------------------------------------------------------------

    async def lease_grant(self, ttl_s: int) -> tuple[int, int]:
        data = await self.call("/v3/lease/grant", {"TTL": str(ttl_s)})
        return int(data["ID"]), int(data["TTL"])

    async def lease_keepalive(self, lease_id: int) -> int:
        """Refreshes the lease once; its remaining TTL (0 or less: the lease is gone)."""
        data = await self.call("/v3/lease/keepalive", {"ID": str(lease_id)})
        return int((data.get("result") or {}).get("TTL", 0))

    async def lease_revoke(self, lease_id: int) -> None:
        await self.call("/v3/lease/revoke", {"ID": str(lease_id)})

    # -- watches -------------------------------------------------------------------------------------

    async def watch(self, key: str, *, prefix: bool = False, start_revision: int = 0) -> AsyncIterator[WatchEvent]:
        """Events on *key* (or every key under it) from *start_revision*, for as long as the caller reads."""
        next_rev = start_revision
        while True:
            req = {"key": b64(key), "progress_notify": True}
            if prefix:
                req["range_end"] = prefix_end(key)
            if next_rev:
                req["start_revision"] = str(next_rev)
            endpoint = self.endpoints[self._current]
            try:
                timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S,
                                                sock_read=WATCH_IDLE_TIMEOUT_S)
                async with self._http().post(endpoint + "/v3/watch", json={"create_request": req},
                                             timeout=timeout) as resp:
                    async for line in resp.content:
                        result = json.loads(line).get("result") or {}
                        if result.get("canceled"):
                            if int(result.get("compact_revision", 0)):
                                next_rev = 0          # history compacted away: from now (callers re-read)
                            raise EtcdError(f"watch on {key} canceled: {result.get('cancel_reason')}")
                        rev = int((result.get("header") or {}).get("revision", 0))
                        for ev in result.get("events") or []:
                            kv = KeyValue.parse(ev["kv"])
                            next_rev = max(next_rev, kv.mod_revision + 1)
                            yield WatchEvent(ev.get("type", "PUT"), kv)
                        if rev and not result.get("events") and not result.get("created"):
                            next_rev = max(next_rev, rev + 1)      # a progress notification
            except (TimeoutError, aiohttp.ClientError, ValueError, EtcdError) as exc:
                log.info("etcd watch on %s via %s broke (%s); reconnecting", key, endpoint, exc)
                self._current = (self._current + 1) % len(self.endpoints)
                await asyncio.sleep(RETRY_PAUSE_S)
