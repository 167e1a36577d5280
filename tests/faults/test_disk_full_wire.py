"""A full disk seen through the wire: what a real broker answers, what it keeps, what it deletes.

Issue 22 items 9 and 10, on a small tmpfs (``disk_helpers``): a full disk while a consume-queue file
is made (the ``rocketq send`` CLI against ``rocketq serve``: told failed means never delivered), and
the fill-level thresholds (refuse writes past ``diskSpaceWarningLevelRatio``, delete early only what
retention allows and every group has read, forced deletion only with ``cleanFileForciblyEnable``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from disk_helpers import Filler, small_fs, store_verify, wait_until

from rocketq.broker.broker import Broker, BrokerSettings
from rocketq.remoting import RemotingClient, RemotingCommand, RequestCode, ResponseCode
from rocketq.store import StoreConfig
from rocketq.store.mapped_file import file_name
from rocketq.store.record import StoredMessage

SEGMENT = 64 << 10
BODY = b"x" * 1000
BOOT = re.compile(r"NameServer [\d.]+:(\d+), broker \S+ \(\S+\) [\d.]+:(\d+)")


def not_now_hour() -> str:
    """A ``deleteWhen`` hour that is not the current one, so retention's daily run stays out of the test."""
    return "%02d" % ((time.localtime().tm_hour + 12) % 24)


def send(topic: str, body: bytes, queue_id: int = 0) -> RemotingCommand:
    return RemotingCommand.create_request(RequestCode.SEND_MESSAGE_V2, {
        "a": "P", "b": topic, "c": "TBW102", "d": 1, "e": queue_id, "f": 0, "g": 0, "h": 0, "i": "", "j": 0,
        "k": False}, body)


async def pull_all(client: RemotingClient, topic: str, queue_id: int = 0, offset: int = 0) -> list[StoredMessage]:
    out = []
    while True:
        r = await client.invoke(RemotingCommand.create_request(RequestCode.PULL_MESSAGE, {
            "consumerGroup": "reader", "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
            "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0}),
            timeout_s=10)
        if r.code != ResponseCode.SUCCESS:
            return out
        pos = 0
        while pos < len(r.body):
            size = int.from_bytes(r.body[pos:pos + 4], "big")
            out.append(StoredMessage(r.body[pos:pos + size]))
            pos += size
        offset = int(r.ext_fields["nextBeginOffset"])


async def commit(client: RemotingClient, group: str, topic: str, offset: int) -> None:
    r = await client.invoke(RemotingCommand.create_request(RequestCode.UPDATE_CONSUMER_OFFSET, {
        "consumerGroup": group, "topic": topic, "queueId": 0, "commitOffset": offset}), timeout_s=10)
    assert r.code == ResponseCode.SUCCESS, r.remark


class Ledger:
    """Bodies the broker acknowledged and bodies it refused, per topic."""

    def __init__(self, client: RemotingClient):
        self.client = client
        self.acked: dict[str, list[bytes]] = {}
        self.refused: list[bytes] = []
        self.last: RemotingCommand | None = None

    async def send(self, topic: str, body: bytes) -> int:
        self.last = r = await self.client.invoke(send(topic, body), timeout_s=10)
        if r.code == ResponseCode.SUCCESS:
            self.acked.setdefault(topic, []).append(body)
        else:
            self.refused.append(body)
        return r.code

    async def until(self, topic: str, prefix: bytes, *, accepted: bool, timeout_s: float = 20.0) -> RemotingCommand:
        deadline = time.monotonic() + timeout_s
        i = 0
        while (await self.send(topic, prefix + b"-%05d" % i) == ResponseCode.SUCCESS) != accepted:
            i += 1
            assert time.monotonic() < deadline, f"{topic}: still {'refused' if accepted else 'accepted'}"
            await asyncio.sleep(0.01 if accepted else 0)
        return self.last

    async def check(self, broker_store, topics=None) -> None:
        await asyncio.to_thread(broker_store.wait_dispatched, 30)
        refused = set(self.refused)
        for topic in topics or self.acked:
            got = [m.body for m in await pull_all(self.client, topic)]
            assert got == self.acked[topic], f"{topic}: {len(got)} delivered, {len(self.acked[topic])} acknowledged"
            assert not refused & set(got)


def store_config(root: Path, **kw) -> StoreConfig:
    base = dict(store_path=root, commitlog_file_size=SEGMENT, consume_queue_entries=1000, index_slots=1009,
                index_max_entries=4000, clean_resource_interval_ms=100, delete_when=not_now_hour())
    base.update(kw)
    return StoreConfig(**base)


async def start_broker(root: Path, **store_kw) -> tuple[Broker, RemotingClient]:
    broker = await Broker(BrokerSettings(port=0), store_config(root, **store_kw)).start()
    return broker, RemotingClient("127.0.0.1", broker.server.port)


async def stop_broker(broker: Broker, client: RemotingClient) -> None:
    await client.close()
    await broker.close()


def segments(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "commitlog").iterdir() if not p.name.endswith(".tmp"))


# ---- item 9, end to end: rocketq serve + the rocketq send / consume CLI ------------------------------

def cli(*args: str, timeout_s: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocketq.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout_s, env=dict(os.environ), check=False)


def start_serve(store: Path) -> tuple[subprocess.Popen, int, int]:
    env = dict(os.environ, ROCKETQ_MAPEDFILESIZECOMMITLOG=str(1 << 20), ROCKETQ_MAPEDFILESIZECONSUMEQUEUE="2000",
               ROCKETQ_MAXHASHSLOTNUM="1009", ROCKETQ_MAXINDEXNUM="4000",
               ROCKETQ_DISKSPACEWARNINGLEVELRATIO="100", ROCKETQ_DISKSPACECLEANFORCIBLYRATIO="100")
    proc = subprocess.Popen([sys.executable, "-m", "rocketq.cli.main", "serve", "--store-path", str(store), "--host",
                             "127.0.0.1", "--port", "0", "--namesrv-port", "0", "--no-grpc"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    ready, _, _ = select.select([proc.stdout], [], [], 60)
    match = BOOT.search(proc.stdout.readline() if ready else "")
    if not match:
        proc.kill()
        raise AssertionError(f"rocketq serve did not start: {proc.stderr.read()}")
    return proc, int(match.group(1)), int(match.group(2))


def consume(namesrv: str, topic: str, count: int) -> list[str]:
    res = cli("consume", topic, "--namesrv", namesrv, "--from", "first", "--count", str(count), "--idle", "3",
              "--json")
    assert res.returncode == 0, res.stderr
    return [json.loads(line)["body"] for line in res.stdout.splitlines() if line.strip()]


def test_cli_send_on_a_full_disk_is_refused_never_delivered_and_sends_resume_without_restart(tmp_path):
    """The issue's report: after a full disk stopped dispatch, every send failed (also after space was
    freed), and one CLI send that reported an error was delivered three times after the restart."""
    with small_fs(tmp_path, 32 << 20) as mnt:
        store, fill = mnt / "store", Filler(mnt)
        proc, ns_port, broker_port = start_serve(store)
        namesrv = f"127.0.0.1:{ns_port}"
        try:
            assert cli("send", "A", "a-first", "--namesrv", namesrv).returncode == 0
            assert cli("topic", "create", "B", "--queues", "1", "--namesrv", namesrv).returncode == 0
            wait_until(lambda: len(segments(store)) == 2, what="the next commitlog segment")
            fill.leave(0)
            ok = cli("send", "B", "b-first", "--namesrv", namesrv)      # appended; its queue file is refused
            assert ok.returncode == 0, ok.stderr
            refused = cli("send", "A", "a-refused", "--namesrv", namesrv)
            assert refused.returncode != 0 and "disk is full" in refused.stderr, refused.stderr
            no_topic = cli("topic", "create", "C", "--namesrv", namesrv)     # topics.json cannot be written
            assert no_topic.returncode != 0 and "topics.json" in no_topic.stderr, no_topic.stderr
            assert '"C"' not in cli("topic", "list", "--json", "--namesrv", namesrv).stdout
            fill.remove()
            assert cli("topic", "create", "C", "--namesrv", namesrv).returncode == 0

            async def resume() -> list[bytes]:
                client = RemotingClient("127.0.0.1", broker_port)
                try:
                    ledger = Ledger(client)
                    await ledger.until("A", b"a-after", accepted=True)          # no restart
                    return ledger.acked["A"]
                finally:
                    await client.close()
            after = asyncio.run(resume())
            assert cli("send", "B", "b-after", "--namesrv", namesrv).returncode == 0
            assert consume(namesrv, "B", 2) == ["b-first", "b-after"]
            assert consume(namesrv, "A", 1 + len(after)) == ["a-first"] + [b.decode() for b in after]
        finally:
            proc.send_signal(signal.SIGTERM)
            out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert not (store / "abort").exists()
        assert '"C"' in (store / "config" / "topics.json").read_text()
        res = store_verify(store)
        assert res.returncode == 0, res.stdout + res.stderr


# ---- item 10: the fill-level thresholds --------------------------------------------------------------

def test_past_the_warning_level_sends_are_refused_and_nothing_unread_is_deleted(tmp_path, caplog):
    """Default settings.  Past diskMaxUsedSpaceRatio (75 %) rocketq used to delete the oldest segments
    whoever had read them; now nothing unread goes, and past diskSpaceWarningLevelRatio (90 %) sends
    are refused (SERVICE_NOT_AVAILABLE, "disk is full") until usage is at or below 85 %."""
    caplog.set_level(logging.WARNING, logger="rocketq.store.cleaner")

    async def scenario(mnt: Path) -> None:
        root, fill = mnt / "store", Filler(mnt)
        broker, client = await start_broker(root)
        ledger = Ledger(client)
        try:
            for i in range(200):                                        # three segments and more
                assert await ledger.send("T", BODY + b"%03d" % i) == ResponseCode.SUCCESS
            await asyncio.to_thread(broker.store.wait_dispatched)
            before = segments(root)
            assert len(before) >= 4
            fill.leave_used(80)
            await asyncio.to_thread(wait_until, lambda: "nothing deleted" in caplog.text
                                    or segments(root)[0] != before[0], 20, "a cleaning round under pressure")
            assert segments(root)[:len(before) - 1] == before[:-1], "unread messages were deleted"
            await ledger.check(broker.store)

            fill.leave_used(95)
            r = await ledger.until("T", b"full", accepted=False)
            assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE and "disk is full" in r.remark, r.remark
            fill.leave_used(88)                                         # between 85 and 90: still refused
            await asyncio.to_thread(wait_until, lambda: "(88." in broker.store.cleaner.full, 20, "a check at 88 %")
            assert await ledger.send("T", b"at-88") == ResponseCode.SERVICE_NOT_AVAILABLE
            fill.leave_used(50)
            await ledger.until("T", b"again", accepted=True)             # no restart
            await ledger.check(broker.store)
        finally:
            await stop_broker(broker, client)
        assert not (root / "abort").exists()
        res = store_verify(root)
        assert res.returncode == 0, res.stdout + res.stderr

    with small_fs(tmp_path, 8 << 20) as mnt:
        asyncio.run(scenario(mnt))
    assert sum("disk full:" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records) == 1


def test_under_pressure_only_expired_segments_every_group_has_read_are_deleted(tmp_path, caplog):
    """fileReservedTime=0: every full segment is past retention.  Past 75 % used, the cleaner deletes
    the segments below the lowest offset any group committed, and stops there."""
    caplog.set_level(logging.WARNING, logger="rocketq.store.cleaner")

    async def scenario(mnt: Path) -> None:
        root, fill = mnt / "store", Filler(mnt)
        broker, client = await start_broker(root, file_reserved_time_hours=0)
        ledger = Ledger(client)
        try:
            for i in range(250):
                assert await ledger.send("T", BODY + b"%03d" % i) == ResponseCode.SUCCESS
            await asyncio.to_thread(broker.store.wait_dispatched)
            per_segment = SEGMENT // (len(BODY) + 150)
            first_of = {n: next(i for i, m in enumerate(await pull_all(client, "T"))
                                if m.physical_offset >= n * SEGMENT) for n in (1, 2)}
            await commit(client, "fast", "T", first_of[2])              # has read segments 0 and 1
            await commit(client, "slow", "T", first_of[1] + 1)          # still needs segment 1
            assert per_segment > 10 and len(segments(root)) >= 4
            fill.leave_used(80)
            await asyncio.to_thread(wait_until, lambda: file_name(0) not in segments(root), 20, "segment 0 to go")
            await asyncio.to_thread(wait_until, lambda: "nothing deleted" in caplog.text
                                    or segments(root)[0] != file_name(SEGMENT), 20, "a later round")
            assert segments(root)[0] == file_name(SEGMENT), "segment 1 went, but group 'slow' has not read it"
            left = await pull_all(client, "T", offset=first_of[1])
            assert [m.body for m in left] == ledger.acked["T"][first_of[1]:]
        finally:
            await stop_broker(broker, client)

    with small_fs(tmp_path, 8 << 20) as mnt:
        asyncio.run(scenario(mnt))


def test_forced_deletion_is_opt_in_and_reported_as_an_error_with_counts(tmp_path, caplog):
    """cleanFileForciblyEnable=true past diskSpaceCleanForciblyRatio (85 %): the oldest segments go,
    unread or not, and one ERROR says how many messages in how many queues were lost."""
    caplog.set_level(logging.WARNING, logger="rocketq.store.cleaner")

    async def scenario(mnt: Path) -> None:
        root, fill = mnt / "store", Filler(mnt)
        broker, client = await start_broker(root, clean_file_forcibly_enable=True)
        ledger = Ledger(client)
        try:
            for i in range(200):
                assert await ledger.send("T", BODY + b"%03d" % i) == ResponseCode.SUCCESS
            await asyncio.to_thread(broker.store.wait_dispatched)
            n = len(segments(root))
            fill.leave_used(87)
            await asyncio.to_thread(wait_until, lambda: len(segments(root)) < n, 20, "forced deletion")
            await asyncio.to_thread(wait_until, lambda: "before their time" in caplog.text, 5, "its error line")
            assert await ledger.send("T", b"still-accepted") == ResponseCode.SUCCESS      # below 90 %
            left = await pull_all(client, "T", offset=broker.store.min_offset("T", 0))
            assert [m.body for m in left] == ledger.acked["T"][-len(left):]
        finally:
            await stop_broker(broker, client)

    with small_fs(tmp_path, 8 << 20) as mnt:
        asyncio.run(scenario(mnt))
    errors = [r.getMessage() for r in caplog.records
              if r.levelno == logging.ERROR and "before their time" in r.getMessage()]
    assert errors and re.search(r"\d+ messages in 1 queues lost, \d+ of them not read by every consumer group",
                                errors[0]), errors


def test_a_broker_on_a_full_disk_closes_cleanly_with_offsets_it_could_not_save_and_starts_again(tmp_path):
    """Saving consumer offsets at shutdown fails on the full disk; that used to skip the store's
    shutdown, leaving the abort marker (a crash recovery next time) and the store locked.  Started
    again on the full disk, the broker serves reads and refuses sends until there is room."""
    async def scenario(mnt: Path) -> None:
        root, fill = mnt / "store", Filler(mnt)
        broker, client = await start_broker(root, disk_space_warning_level_ratio=100,
                                            disk_space_clean_forcibly_ratio=100)
        ledger = Ledger(client)
        await ledger.send("T", b"m0")
        await ledger.send("T", b"m1")
        await asyncio.to_thread(broker.store.wait_dispatched)
        wait_until(lambda: len(segments(root)) == 2, what="the next commitlog segment")
        fill.leave(0)
        await commit(client, "G", "T", 1)
        await stop_broker(broker, client)
        assert not (root / "abort").exists()
        broker, client = await start_broker(root)                   # starts on the full disk, to be read
        try:
            assert not broker.store.recovery.abnormal
            assert [m.body for m in await pull_all(client, "T")] == [b"m0", b"m1"]
            r = await client.invoke(send("T", b"refused"), timeout_s=10)
            assert r.code == ResponseCode.SERVICE_NOT_AVAILABLE and "disk is full" in r.remark, r.remark
            fill.remove()
            await Ledger(client).until("T", b"after", accepted=True)
        finally:
            await stop_broker(broker, client)

    with small_fs(tmp_path, 8 << 20) as mnt:
        asyncio.run(scenario(mnt))


def test_an_unresolved_transaction_is_not_lost_while_writes_are_refused(tmp_path):
    """The transaction check marked a half message resolved, then re-put its copy: on a full disk the
    copy was refused, the check offset moved past the half, and the transaction was never asked
    about again.  Now the copy goes first, and a refused one leaves the half to the next round."""
    async def scenario(mnt: Path) -> None:
        root, fill = mnt / "store", Filler(mnt)
        broker = await Broker(BrokerSettings(port=0, transaction_timeout_s=0.0, transaction_check_interval_s=3600),
                              store_config(root)).start()
        checks: asyncio.Queue = asyncio.Queue()

        async def producer_handler(conn, cmd):
            if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:
                await checks.put(cmd)
            return None

        producer = RemotingClient("127.0.0.1", broker.server.port, handler=producer_handler)
        try:
            hb = {"clientID": "p1", "producerDataSet": [{"groupName": "PID_TX"}], "consumerDataSet": []}
            await producer.invoke(RemotingCommand.create_request(RequestCode.HEART_BEAT, {}, json.dumps(hb).encode()),
                                  timeout_s=10)
            half = send("Pay", b"maybe")
            half.ext_fields.update(f="4", i="TRAN_MSG\x01true\x02PGROUP\x01PID_TX\x02")
            assert (await producer.invoke(half, timeout_s=10)).code == ResponseCode.SUCCESS
            await asyncio.to_thread(broker.store.wait_dispatched)
            fill.leave_used(95)
            await Ledger(producer).until("Other", b"probe", accepted=False)      # writes are refused now
            assert await broker.transaction_checker.check_once() == 0
            assert broker.offsets.query("CID_RMQ_SYS_TRANS", "RMQ_SYS_TRANS_HALF_TOPIC", 0) == 0
            fill.remove()
            await Ledger(producer).until("Other", b"probe", accepted=True)
            assert await broker.transaction_checker.check_once() == 1
            check = await asyncio.wait_for(checks.get(), 10)
            assert check.ext_fields["commitLogOffset"]
        finally:
            await producer.close()
            await broker.close()

    with small_fs(tmp_path, 8 << 20) as mnt:
        asyncio.run(scenario(mnt))
