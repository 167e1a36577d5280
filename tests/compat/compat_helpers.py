"""Harness for the third-party client tests: the pinned Node.js client, a real NameServer + broker, the wire.

* :func:`ensure_client` installs the client pinned in ``package-lock.json`` with ``npm ci`` when
  ``node_modules`` is missing, and skips (naming what is absent) only when ``node`` or ``npm`` is.
* :func:`servers` starts a NameServer and a broker that registers with it, both on loopback port 0,
  with a store in the test's tmp_path.  Delay levels are all ``1s`` (``messageDelayLevel`` is a
  broker setting) so that a retry, which RocketMQ parks at level ``3 + reconsumeTimes`` (10 s by
  default), comes back within a second.
* :func:`serve_process` runs ``rocketq serve`` (the standalone mode users start) as a process
  instead, with its own defaults.
* :func:`run_phase` runs one phase of ``scenario.js`` with a timeout and returns its JSON result.
* The rest are the few wire requests the tests make from Python (create a topic, wait for its
  route, query committed offsets and max offsets, query by key).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.namesrv import NameServer
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketq.store import StoreConfig

COMPAT_DIR = Path(__file__).resolve().parent
SCENARIO = COMPAT_DIR / "scenario.js"
CLIENT_PACKAGE = "ali-ons"
NPM_CI_TIMEOUT_S = 300
PHASE_TIMEOUT_S = 90            # one node process; a consume phase gives up by itself well before this
CONSUME_TIMEOUT_MS = 45_000     # how long a consume phase waits for the deliveries it expects
REQUEST_TIMEOUT_S = 10
ROUTE_DEADLINE_S = 20
ALL_DELAYS_ONE_SECOND = " ".join(["1s"] * 18)
SERVE_BOOT_TIMEOUT_S = 60
SERVE_BOOT_LINE = re.compile(r"NameServer [\d.]+:(\d+), broker \S+ \(\S+\) [\d.]+:(\d+)")


def ensure_client() -> None:
    """Install the pinned client into tests/compat/node_modules unless it is there already."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH: {CLIENT_PACKAGE}, the third-party RocketMQ client "
                    f"these tests drive, is a Node.js package and cannot run without Node.js 18+ and npm "
                    f"(Debian: apt-get install nodejs npm)")
    if (COMPAT_DIR / "node_modules" / CLIENT_PACKAGE / "package.json").exists():
        return
    proc = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=COMPAT_DIR, capture_output=True,
                          text=True, timeout=NPM_CI_TIMEOUT_S)
    assert proc.returncode == 0, f"npm ci in {COMPAT_DIR} failed ({proc.returncode}): {proc.stderr[-2000:]}"


@dataclass
class Servers:
    namesrv_port: int
    client: RemotingClient          # to the broker
    ns_client: RemotingClient       # to the NameServer
    broker: Broker | None = None    # when it runs in this process

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    async def close(self) -> None:
        await self.client.close()
        await self.ns_client.close()


@contextlib.asynccontextmanager
async def servers(tmp_path: Path, **broker_settings):
    """A NameServer and a broker in this process (this test's event loop serves them)."""
    namesrv = await NameServer("127.0.0.1", 0, kv_path=tmp_path / "kvConfig.json").start()
    store = StoreConfig(store_path=tmp_path / "store", commitlog_file_size=1 << 20, consume_queue_entries=1000,
                        index_slots=1009, index_max_entries=4000, message_delay_level=ALL_DELAYS_ONE_SECOND)
    try:
        broker = await Broker(BrokerSettings(host="127.0.0.1", port=0, namesrv_addr=f"127.0.0.1:{namesrv.port}",
                                             **broker_settings), store).start()
    except BaseException:
        await namesrv.close()
        raise
    env = Servers(namesrv.port, RemotingClient("127.0.0.1", broker.server.port),
                  RemotingClient("127.0.0.1", namesrv.port), broker)
    try:
        yield env
    finally:
        await env.close()
        await broker.close()
        await namesrv.close()


@contextlib.asynccontextmanager
async def serve_process(tmp_path: Path):
    """``rocketq serve`` as its own process, with its defaults except the ports (0) and the store path."""
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:          # a file, not a pipe nobody reads while the test runs
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "rocketq.cli.main", "serve", "--store-path", str(tmp_path / "serve-store"),
            "--host", "127.0.0.1", "--port", "0", "--namesrv-port", "0", "--no-grpc",
            stdout=asyncio.subprocess.PIPE, stderr=log, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), SERVE_BOOT_TIMEOUT_S)).decode()
        match = SERVE_BOOT_LINE.search(line)
        assert match, f"rocketq serve printed no boot line: {line!r}; log: {log_path.read_text()[-2000:]}"
        namesrv_port, broker_port = int(match.group(1)), int(match.group(2))
        env = Servers(namesrv_port, RemotingClient("127.0.0.1", broker_port), RemotingClient("127.0.0.1", namesrv_port))
        try:
            yield env
        finally:
            await env.close()
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), SERVE_BOOT_TIMEOUT_S)
        assert proc.returncode == 0, f"rocketq serve exited {proc.returncode}: {log_path.read_text()[-2000:]}"
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def run_phase(env: Servers, phase: str, **cfg) -> dict:
    """Run ``node scenario.js`` for one phase; its stdout is one JSON object."""
    arg = json.dumps({"phase": phase, "namesrv": env.namesrv_addr, **cfg})
    proc = await asyncio.create_subprocess_exec("node", str(SCENARIO), arg, cwd=COMPAT_DIR,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), PHASE_TIMEOUT_S)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"scenario phase {phase!r} did not finish within {PHASE_TIMEOUT_S} s") from None
    lines = out.decode().strip().splitlines()
    assert proc.returncode == 0 and lines, (
        f"scenario phase {phase!r} exited {proc.returncode}: {out.decode()[-1000:]}\n{err.decode()[-3000:]}")
    result = json.loads(lines[-1])
    not_supported = {code for code, answers in result["wire"].items()
                     if str(int(ResponseCode.REQUEST_CODE_NOT_SUPPORTED)) in answers}
    assert not not_supported, f"rocketq answered REQUEST_CODE_NOT_SUPPORTED to request codes {not_supported}"
    return result


async def consume(env: Servers, **cfg) -> dict:
    """A consume phase that must see everything it expects (it returns early when it does)."""
    result = await run_phase(env, "consume", timeoutMs=CONSUME_TIMEOUT_MS, settleMs=800, **cfg)
    seen = [d["key"] for d in result["deliveries"]]
    assert not result["timedOut"], f"consumer gave up; expected {cfg['expect']}, saw {seen}; errors {result['errors']}"
    return result


async def invoke(client: RemotingClient, code: int, header: dict) -> RemotingCommand:
    return await client.invoke(RemotingCommand.create_request(code, header), timeout_s=REQUEST_TIMEOUT_S)


async def create_topic(env: Servers, topic: str, queues: int = 4) -> None:
    """UPDATE_AND_CREATE_TOPIC on the broker, then wait until the NameServer routes it."""
    r = await invoke(env.client, RequestCode.UPDATE_AND_CREATE_TOPIC, {
        "topic": topic, "defaultTopic": "TBW102", "readQueueNums": queues, "writeQueueNums": queues, "perm": 6,
        "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})
    assert r.code == ResponseCode.SUCCESS, r.remark
    deadline = time.monotonic() + ROUTE_DEADLINE_S
    while True:
        route = await invoke(env.ns_client, RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
        if route.code == ResponseCode.SUCCESS:
            return
        assert time.monotonic() < deadline, f"NameServer has no route for {topic} after {ROUTE_DEADLINE_S} s"
        await asyncio.sleep(0.05)


async def committed_offsets(env: Servers, group: str, topic: str, queues: int) -> dict[int, int]:
    """QUERY_CONSUMER_OFFSET per queue; -1 where the group committed nothing."""
    out = {}
    for qid in range(queues):
        r = await invoke(env.client, RequestCode.QUERY_CONSUMER_OFFSET,
                         {"consumerGroup": group, "topic": topic, "queueId": qid, "setZeroIfNotFound": False})
        out[qid] = int(r.ext_fields["offset"]) if r.code == ResponseCode.SUCCESS else -1
    return out


async def max_offsets(env: Servers, topic: str, queues: int) -> dict[int, int]:
    out = {}
    for qid in range(queues):
        r = await invoke(env.client, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": qid})
        assert r.code == ResponseCode.SUCCESS, r.remark
        out[qid] = int(r.ext_fields["offset"])
    return out


async def query_by_key(env: Servers, topic: str, key: str) -> RemotingCommand:
    return await invoke(env.client, RequestCode.QUERY_MESSAGE, {
        "topic": topic, "key": key, "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 2 ** 62})
