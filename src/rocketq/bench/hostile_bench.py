"""Hostile clients against a real ``rocketq serve`` process (issue 22's numbers; Linux only).

Scenarios, each against a fresh server on loopback:

* ``one non-reading client`` - the issue's probe: one connection sends ``probe_requests``
  VIEW_MESSAGE_BY_ID of a ``probe_bytes`` message and never reads; the broker's heap growth
  (RssAnon of its process: anonymous memory, not the store's mapped files) at its peak;
* ``non-reading clients`` - ``clients`` connections each send ``requests`` of those for a
  ``message_bytes`` message and never read: peak heap growth (over the heap of the server before
  the message was sent, so the send's own buffers count too), a normal client's round trips
  meanwhile (a small request every 50 ms, and one fetch of the message), and the time until the
  broker has reset every stuck connection (``serverWriteStallTimeoutSeconds``=``stall_s``);
* ``connection flood`` - ``flood`` connections opened as fast as one thread can while a normal
  client keeps opening a connection and sending one request: its time to be served, per try, with
  the default (RLIMIT_NOFILE-derived) limit;
* ``flood past the limit`` - ``serverMaxConnections``=``limit`` and ``flood`` connections: how many
  the broker holds, its descriptors, a config write (UPDATE_AND_CREATE_TOPIC) from a client
  connected before, the time for a new client to be served once 1% of the flood leaves, and the
  time until the idle timeout (``idle_s``) has closed the whole flood.

Every scenario runs ``runs`` times, each against a fresh server; each measure is reported as the
list of its values, one per run.
"""

from __future__ import annotations

import asyncio
import os
import re
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from rocketq.remoting import RemotingClient, RemotingCommand, RemotingError, RequestCode, ResponseCode
from rocketq.remoting.codec import encode
from rocketq.remoting.limits import raise_open_files_limit

BOOT = re.compile(r"NameServer [\d.]+:(\d+), broker \S+ \(\S+\) [\d.]+:(\d+)")
MIB = 1 << 20
SMALL_RCVBUF_BYTES = 4096
SAMPLE_INTERVAL_S = 0.05
NORMAL_TIMEOUT_S = 120.0       # a normal client's wait is measured, not cut short (the machine may be busy)
TCP_ESTABLISHED = 1


class Serve:
    """``rocketq serve --no-grpc`` on free loopback ports with ``--set`` settings."""

    def __init__(self, root: Path, settings: dict[str, object]):
        sets = [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]
        self.proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "serve", "--store-path", str(root),
                                      "--host", "127.0.0.1", "--port", "0", "--namesrv-port", "0", "--no-grpc", *sets],
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        match = BOOT.search(self.proc.stdout.readline() if ready else "")
        if not match:
            self.proc.kill()
            raise RuntimeError("rocketq serve did not start")
        self.port = int(match.group(2))

    def heap_bytes(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
        return 0

    def open_fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _is_open(sock: socket.socket) -> bool:
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)[0] == TCP_ESTABLISHED


def _connect(port: int, rcvbuf: int | None = None) -> socket.socket:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect(("127.0.0.1", port))
    return sock


def _views(count: int) -> bytes:
    cmd = RemotingCommand.create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"})
    return encode(cmd) * count


async def _request(port: int, cmd: RemotingCommand, timeout_s: float = NORMAL_TIMEOUT_S) -> RemotingCommand:
    async with RemotingClient("127.0.0.1", port) as client:
        return await client.invoke(cmd, timeout_s=timeout_s)


def _send(topic: str, body: bytes) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {
        "a": "BENCH", "b": topic, "c": "TBW102", "d": 4, "e": 0, "f": 0, "g": 0, "h": 0, "i": "", "j": 0,
        "k": False}, body)


def _max_offset() -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.GET_MAX_OFFSET, {"topic": "Hostile", "queueId": 0})


async def _non_reading(server: Serve, clients: int, requests: int, stall_s: float) -> dict:
    """*clients* connections asking for *requests* answers each and reading none."""
    base = server.heap_before_send
    socks = [_connect(server.port, SMALL_RCVBUF_BYTES) for _ in range(clients)]
    started = time.monotonic()
    payload = _views(requests)
    for sock in socks:
        sock.sendall(payload)
    peak, rtts, fetch_ms, closed_s = 0, [], None, None
    async with RemotingClient("127.0.0.1", server.port) as normal:
        while closed_s is None and time.monotonic() - started < 10 * stall_s + 60:
            peak = max(peak, server.heap_bytes() - base)
            t = time.perf_counter()
            answer = await normal.invoke(_max_offset(), timeout_s=NORMAL_TIMEOUT_S)
            rtts.append((time.perf_counter() - t) * 1000)
            if answer.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"normal client refused: {answer.remark}")
            if fetch_ms is None:
                t = time.perf_counter()
                await normal.invoke(RemotingCommand.create_request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "0"}))
                fetch_ms = (time.perf_counter() - t) * 1000
            if not any(_is_open(s) for s in socks):
                closed_s = time.monotonic() - started
            await asyncio.sleep(SAMPLE_INTERVAL_S)
    still_open = sum(map(_is_open, socks))
    for sock in socks:
        sock.close()
    return {"clients": clients, "answers_asked_mib": round(clients * requests * server.message_bytes / MIB),
            "heap_growth_peak_mib": round(peak / MIB, 1), "heap_growth_per_client_kib": round(peak / clients / 1024),
            "normal_rtt_ms_p50": round(statistics.median(rtts), 2), "normal_rtt_ms_max": round(max(rtts), 2),
            "normal_fetch_of_the_message_ms": round(fetch_ms, 2), "all_stuck_reset_after_s": closed_s and
            round(closed_s, 1), "still_open": still_open, "stall_timeout_s": stall_s}


def _open_flood(port: int, count: int, out: list) -> None:
    for _ in range(count):
        out.append(_connect(port))


async def _flood_under_default(server: Serve, flood: int) -> dict:
    """A new client's time to be served while *flood* connections are being opened."""
    socks: list[socket.socket] = []
    opener = threading.Thread(target=_open_flood, args=(server.port, flood, socks))
    opener.start()
    served_ms = []
    while opener.is_alive() or not served_ms:
        t = time.perf_counter()
        answer = await _request(server.port, _max_offset())
        if answer.code == ResponseCode.SUCCESS:
            served_ms.append((time.perf_counter() - t) * 1000)
    opener.join()
    held = sum(map(_is_open, socks))
    for sock in socks:
        sock.close()
    return {"flood": flood, "held": held, "new_client_served_ms_p50": round(statistics.median(served_ms), 2),
            "new_client_served_ms_max": round(max(served_ms), 2), "tries": len(served_ms)}


async def _flood_past_limit(server: Serve, flood: int, limit: int, idle_s: float) -> dict:
    async with RemotingClient("127.0.0.1", server.port) as admin:
        await admin.connect()
        socks: list[socket.socket] = []
        started = time.monotonic()
        await asyncio.to_thread(_open_flood, server.port, flood, socks)
        while sum(map(_is_open, socks)) > limit and time.monotonic() - started < 30:
            await asyncio.sleep(SAMPLE_INTERVAL_S)
        held, fds = sum(map(_is_open, socks)), server.open_fds()
        created = await admin.invoke(RemotingCommand.create_request(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": "AfterFlood", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6}), timeout_s=10)
        leaving = [s for s in socks if _is_open(s)][:max(1, flood // 100)]
        for sock in leaving:
            sock.close()
        t = time.perf_counter()
        while True:
            try:
                if (await _request(server.port, _max_offset())).code == ResponseCode.SUCCESS:
                    break
            except RemotingError:
                await asyncio.sleep(0.01)
        room_ms = (time.perf_counter() - t) * 1000
        rest = [s for s in socks if s not in leaving]
        while any(_is_open(s) for s in rest) and time.monotonic() - started < 4 * idle_s + 30:
            await asyncio.sleep(SAMPLE_INTERVAL_S)
        cleared_s = time.monotonic() - started
        for sock in rest:
            sock.close()
    return {"flood": flood, "limit": limit, "held": held, "server_fds": fds,
            "config_write": "ok" if created.code == ResponseCode.SUCCESS else created.remark,
            "new_client_served_after_room_ms": round(room_ms, 2),
            "flood_closed_by_idle_timeout_s_after_it_began": round(cleared_s, 1), "idle_timeout_s": idle_s}


def run_hostile_bench(*, runs: int = 3, clients: int = 1000, requests: int = 16, message_bytes: int = MIB,
                      probe_requests: int = 1000, probe_bytes: int = 4 * MIB - 4096, stall_s: float = 10.0,
                      flood: int = 2000, limit: int = 1000, idle_s: float = 5.0, progress=lambda label: None) -> dict:
    raise_open_files_limit()                       # this process holds the flood's sockets
    results: dict[str, dict[str, list]] = {}
    for run in range(runs):
        _one_run(results, f"run {run + 1}/{runs}", progress, clients=clients, requests=requests,
                 message_bytes=message_bytes, probe_requests=probe_requests, probe_bytes=probe_bytes, stall_s=stall_s,
                 flood=flood, limit=limit, idle_s=idle_s)
    return results


def _one_run(results: dict, label: str, progress, *, clients, requests, message_bytes, probe_requests, probe_bytes,
             stall_s, flood, limit, idle_s) -> None:
    def scenario(name, settings, body, coro_fn):
        progress(f"{label}: {name}")
        with tempfile.TemporaryDirectory(prefix="rocketq-hostile-") as root:
            server = Serve(Path(root), settings)
            try:
                server.message_bytes = len(body)
                server.heap_before_send = server.heap_bytes()
                if body:
                    sent = asyncio.run(_request(server.port, _send("Hostile", body)))
                    if sent.code != ResponseCode.SUCCESS:
                        raise RuntimeError(f"send failed: {sent.remark}")
                for key, value in asyncio.run(coro_fn(server)).items():
                    results.setdefault(name, {}).setdefault(key, []).append(value)
            finally:
                server.close()

    scenario("one non-reading client", {"serverWriteStallTimeoutSeconds": stall_s}, b"p" * probe_bytes,
             lambda s: _non_reading(s, 1, probe_requests, stall_s))
    scenario("non-reading clients", {"serverWriteStallTimeoutSeconds": stall_s}, b"m" * message_bytes,
             lambda s: _non_reading(s, clients, requests, stall_s))
    scenario("connection flood", {}, b"f", lambda s: _flood_under_default(s, flood))
    scenario("flood past the limit", {"serverMaxConnections": limit, "serverChannelMaxIdleTimeSeconds": idle_s},
             b"f", lambda s: _flood_past_limit(s, flood, limit, idle_s))
