"""Durability claims, tested by killing a writer process with SIGKILL and opening what it left.

* SYNC_FLUSH: every put acknowledged PUT_OK is readable after the kill, body intact, at the queue
  offset it was given; queues are dense; the restart is seen as abnormal.
* ASYNC_FLUSH (mapped): no corruption, queues are a consistent prefix of the log, and - the page
  cache outlives a killed process - nothing acknowledged is missing either.
* ASYNC_FLUSH with the transient store pool: bytes still in the anonymous buffer die with the
  process, so what survives is a consistent prefix - which must still reach at least as far as
  the offset the store reported as flushed.
* Delay levels: a delayed message acknowledged before the kill is delivered after the restart
  (at least once).
* Config files: after a kill the file holds the last completed write or a later one.

The kill lands wherever the writer happens to be; the number of acknowledgements to wait for is
random, and its seed is in every assertion message.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from store_helpers import (
    FakeClock,
    new_seed,
    read_queue,
    small_config,
    subprocess_env,
    wait_until,
)

from rocketq.store import GetStatus, Message, MessageStore, StoreConfig
from rocketq.store.config_files import read_json
from rocketq.store.tools import verify_store

pytestmark = pytest.mark.timeout(120)     # a hung writer must fail the test, not stall the suite

QUEUES = 3
COMMON = {"commitlog_file_size": 64 * 1024, "consume_queue_entries": 200, "message_index_enable": False}

WRITER = textwrap.dedent("""
    import json, sys
    from rocketq.store import MessageStore, StoreConfig, Message
    cfg = StoreConfig(**json.loads(sys.argv[1]))
    store = MessageStore(cfg).start()
    out = sys.stdout
    out.write("ready\\n"); out.flush()
    i = 0
    while True:
        if i % 3 == 0:
            n = 2 + i % 5
            tags = ["b%d-%d" % (i, j) for j in range(n)]
            msgs = [Message(topic="Crash", body=(t + "|").encode() * (1 + (i + j) % 40), queue_id=(i + j) % 3,
                            keys=[t]) for j, t in enumerate(tags)]
            rs = store.put_messages(msgs)
            if rs.status == "PUT_OK":
                out.write("".join("%d %d %d %s\\n" % (r.physical_offset, r.queue_id, r.queue_offset, t)
                                  for r, t in zip(rs, tags)))
                out.flush()
        else:
            t = "s%d" % i
            r = store.put_message(Message(topic="Crash", body=(t + "|").encode() * (1 + i % 40), queue_id=i % 3,
                                          keys=[t]))
            if r.status == "PUT_OK":
                out.write("%d %d %d %s\\n" % (r.physical_offset, r.queue_id, r.queue_offset, t))
                out.flush()
        i += 1
""")


def run_until_acks(tmp_path: Path, script: str, args: list[str], acks_wanted: int) -> list[list[str]]:
    """Start *script*, read acknowledgement lines until *acks_wanted*, then SIGKILL it."""
    with open(tmp_path / "writer.stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=err,
                                env=subprocess_env())
    acks = []
    try:
        first = proc.stdout.readline()
        assert first.strip() == b"ready", (first, (tmp_path / "writer.stderr").read_text()[-2000:])
        while len(acks) < acks_wanted:
            line = proc.stdout.readline()
            assert line, "the writer died before the kill: " + (tmp_path / "writer.stderr").read_text()[-2000:]
            acks.append(line.decode().split())
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return acks


def puts_then_kill(tmp_path: Path, script: str, settings: dict, count: int) -> tuple[list[list[str]], list[str]]:
    """Run a :data:`SINGLE_PUTS_HEAD` *script* for *count* puts; its acks and its state line, read before
    the SIGKILL."""
    with open(tmp_path / "writer.stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", script, json.dumps(settings), str(count)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=subprocess_env())
    try:
        assert proc.stdout.readline().strip() == b"ready", (tmp_path / "writer.stderr").read_text()[-2000:]
        acks = [proc.stdout.readline().decode().split() for _ in range(count)]
        state = proc.stdout.readline().decode().split()
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        proc.stdin.close()
        proc.stdout.close()
    return acks, state


def body_for(tag: str) -> bytes:
    """Bodies describe themselves: '<tag>|' repeated, as the writer makes them."""
    kind, rest = tag[0], tag[1:]
    if kind == "s":
        i = int(rest)
        return (tag + "|").encode() * (1 + i % 40)
    i, j = map(int, rest.split("-"))
    return (tag + "|").encode() * (1 + (i + j) % 40)


def tag_of(body: bytes) -> str:
    return body.split(b"|", 1)[0].decode()


def check_queues_are_a_dense_intact_prefix(store, seed) -> dict[int, list]:
    queues = {}
    for qid in range(QUEUES):
        got = read_queue(store, "Crash", qid, page=500)
        assert [m.queue_offset for m in got] == list(range(len(got))), f"seed {seed} queue {qid}"
        assert store.max_offset("Crash", qid) == len(got), f"seed {seed} queue {qid}"
        for m in got:
            assert m.crc_ok() and m.queue_id == qid, f"seed {seed}: damaged record at {m.physical_offset}"
            assert m.body == body_for(tag_of(m.body)), f"seed {seed}: body at {m.physical_offset}"
            assert m.keys == [tag_of(m.body)], f"seed {seed}"
        queues[qid] = got
    return queues


def check_writing_continues(store, queues, seed) -> None:
    end = store.commitlog.max_offset()
    r = store.put_message(Message(topic="Crash", body=b"after the crash", queue_id=1))
    assert r.ok and r.queue_offset == len(queues[1]), f"seed {seed}"
    assert r.physical_offset == end or r.physical_offset % COMMON["commitlog_file_size"] == 0, f"seed {seed}"


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(3))
def test_sync_flush_keeps_every_acknowledged_message(tmp_path, round_):
    seed = new_seed()
    rng = random.Random(seed)
    cfg = small_config(tmp_path / "store", flush_disk_type="SYNC_FLUSH", **COMMON)
    args = [json.dumps(dict(store_path=str(cfg.store_path), flush_disk_type="SYNC_FLUSH", **COMMON))]
    acks = run_until_acks(tmp_path, WRITER, args, rng.randrange(1, 1500))
    with MessageStore(cfg) as store:
        assert store.recovery.abnormal is True, f"seed {seed}"
        for phy, qid, qoff, tag in acks:
            m = store.read_message(int(phy))
            assert m is not None, f"seed {seed}: acknowledged {tag} at {phy} is gone"
            assert m.body == body_for(tag), f"seed {seed}: {tag} at {phy}"
            assert (m.queue_id, m.queue_offset) == (int(qid), int(qoff)), f"seed {seed}: {tag}"
        store.wait_dispatched()
        queues = check_queues_are_a_dense_intact_prefix(store, seed)
        for phy, qid, qoff, tag in acks:                       # and each is in its queue where it was put
            got = queues[int(qid)]
            assert int(qoff) < len(got) and got[int(qoff)].physical_offset == int(phy), f"seed {seed}: {tag}"
        check_writing_continues(store, queues, seed)
    report = verify_store(cfg.store_path)
    assert report.ok, f"seed {seed}: {report.problems[:5]}"


@pytest.mark.slow
@pytest.mark.parametrize("pool", [False, True], ids=["mapped", "transient-pool"])
def test_async_flush_leaves_a_consistent_prefix(tmp_path, pool):
    seed = new_seed()
    rng = random.Random(seed)
    extra = {"transient_store_pool_enable": True, "commit_interval_commitlog_ms": 5} if pool else {}
    cfg = small_config(tmp_path / "store", flush_disk_type="ASYNC_FLUSH", **COMMON, **extra)
    args = [json.dumps(dict(store_path=str(cfg.store_path), flush_disk_type="ASYNC_FLUSH", **COMMON, **extra))]
    acks = run_until_acks(tmp_path, WRITER, args, rng.randrange(1, 3000))
    with MessageStore(cfg) as store:
        assert store.recovery.abnormal is True, f"seed {seed}"
        store.wait_dispatched()
        queues = check_queues_are_a_dense_intact_prefix(store, seed)
        end = store.recovery.end_offset
        present = [a for a in acks if int(a[0]) < end]
        # whatever survived is a prefix of what was acknowledged, in log order
        assert present == acks[:len(present)], f"seed {seed}"
        for phy, qid, qoff, tag in present:
            m = store.read_message(int(phy))
            assert m is not None and m.body == body_for(tag), f"seed {seed}: {tag} at {phy}"
            assert (m.queue_id, m.queue_offset) == (int(qid), int(qoff)), f"seed {seed}: {tag}"
        if not pool:        # mapped writes sit in the page cache, which outlives the process
            assert len(present) == len(acks), f"seed {seed}: {len(acks) - len(present)} acknowledged lost"
        check_writing_continues(store, queues, seed)
    report = verify_store(cfg.store_path)
    assert report.ok, f"seed {seed}: {report.problems[:5]}"


DELAY_WRITER = textwrap.dedent("""
    import json, sys, threading
    from rocketq.store import MessageStore, StoreConfig, Message
    class Clock:                       # 10 ms of store time per put: level 1 (1 s) comes due after ~100 puts
        def __init__(self): self.t, self.lock = 1_800_000_000.0, threading.Lock()
        def __call__(self):
            with self.lock: return self.t
        def tick(self):
            with self.lock: self.t += 0.01
    clock = Clock()
    store = MessageStore(StoreConfig(**json.loads(sys.argv[1])), clock=clock).start()
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    i = 0
    while True:
        r = store.put_message(Message(topic="Late", body=b"d%d" % i, queue_id=i % 2, delay_level=1))
        if r.status == "PUT_OK":
            sys.stdout.write("%d d%d %d\\n" % (r.physical_offset, i, store.max_offset("Late", 0) + store.max_offset("Late", 1)))
            sys.stdout.flush()
        clock.tick()
        i += 1
""")


@pytest.mark.slow
def test_acknowledged_delayed_messages_are_delivered_after_a_crash(tmp_path):
    seed = new_seed()
    rng = random.Random(seed)
    settings = dict(store_path=str(tmp_path / "store"), flush_disk_type="SYNC_FLUSH", message_delay_level="1s",
                    schedule_poll_interval_ms=2, **COMMON)
    acks = run_until_acks(tmp_path, DELAY_WRITER, [json.dumps(settings)], rng.randrange(150, 800))
    delivered_before_kill = int(acks[-1][2])
    clock = FakeClock(1_800_000_000.0 + 3600)                # everything is due now
    with MessageStore(StoreConfig(**settings), clock=clock) as store:
        assert store.recovery.abnormal is True
        wanted = {tag for _, tag, _ in acks}

        def delivered() -> set[str]:
            store.wait_dispatched()
            return {m.body.decode() for q in (0, 1) for m in read_queue(store, "Late", q)}

        assert wait_until(lambda: wanted <= delivered(), 20), \
            f"seed {seed}: never delivered {sorted(wanted - delivered())[:10]}"
        got = [m for q in (0, 1) for m in read_queue(store, "Late", q)]
        assert all(m.properties["REAL_TOPIC"] == "Late" and "DELAY" not in m.properties for m in got)
        assert all(m.crc_ok() for m in got), f"seed {seed}"
        assert len(got) >= len(wanted) and delivered_before_kill <= len(got), f"seed {seed}"
        assert store.get_messages("SCHEDULE_TOPIC_XXXX", 0, 0, 1).status == GetStatus.FOUND


CONFIG_WRITER = textwrap.dedent("""
    import sys
    from rocketq.store.config_files import write_json
    i = 0
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    while True:
        write_json(sys.argv[1], {"offsetTable": {"T@G": {"0": i}}, "pad": "x" * (i % 5000)})
        sys.stdout.write("%d\\n" % i); sys.stdout.flush()
        i += 1
""")


@pytest.mark.slow
def test_config_file_holds_the_last_completed_write_after_a_kill(tmp_path):
    seed = new_seed()
    rng = random.Random(seed)
    path = tmp_path / "config" / "consumerOffset.json"
    for round_ in range(3):
        acks = run_until_acks(tmp_path, CONFIG_WRITER, [str(path)], rng.randrange(1, 300))
        data = read_json(path)
        assert data is not None, f"seed {seed} round {round_}"
        assert data["offsetTable"]["T@G"]["0"] >= int(acks[-1][0]), f"seed {seed} round {round_}"


# A child that opens a store with the settings of argv[1] (JSON), puts argv[2] single messages (tags
# s0, s1, ...: bodies as body_for makes them), saying "ready" first and "phys queue_id queue_offset tag"
# after each put; a test appends what it does next, ending with one line of state, then it idles.
SINGLE_PUTS_HEAD = textwrap.dedent("""
    import json, sys, threading, time
    from rocketq.store import MessageStore, StoreConfig, Message
    store = MessageStore(StoreConfig(**json.loads(sys.argv[1]))).start()
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    for i in range(int(sys.argv[2])):
        r = store.put_message(Message(topic="Crash", body=(("s%d|" % i).encode()) * (1 + i % 40), queue_id=i % 3))
        assert r.status == "PUT_OK", r
        sys.stdout.write("%d %d %d s%d\\n" % (r.physical_offset, r.queue_id, r.queue_offset, i))
    sys.stdout.flush()
""")

FLUSHED_WRITER = SINGLE_PUTS_HEAD + textwrap.dedent("""
    end, deadline, tick = store.commitlog.max_offset(), time.monotonic() + 5, threading.Event()
    while store.commitlog.flushed_offset() < end and time.monotonic() < deadline:
        tick.wait(0.005)                  # the store's own flush service does the work
    sys.stdout.write("flushed %d\\n" % store.commitlog.flushed_offset()); sys.stdout.flush()
    sys.stdin.read()                      # idle until killed
""")


@pytest.mark.slow
def test_transient_pool_data_the_store_reports_flushed_survives_a_kill(tmp_path):
    """With the transient pool on, the store says how far the log is flushed; everything below that
    offset must be there after the process dies.

    One pool buffer makes the shape deterministic: segment 0 is written into the buffer, the
    segments after it straight into their mappings (the pool is empty when they are made).
    """
    seed = new_seed()
    rng = random.Random(seed)
    settings = dict(store_path=str(tmp_path / "store"), flush_disk_type="ASYNC_FLUSH", transient_store_pool_enable=True,
                    transient_store_pool_size=1, flush_interval_commitlog_ms=10, flush_commitlog_least_pages=1,
                    **COMMON)
    count = rng.randrange(700, 1500)                    # three to six 64 KiB segments
    acks, last = puts_then_kill(tmp_path, FLUSHED_WRITER, settings, count)
    assert last and last[0] == "flushed", (last, (tmp_path / "writer.stderr").read_text()[-2000:])
    flushed = int(last[1])
    durable = [a for a in acks if int(a[0]) + len(body_for(a[3])) <= flushed]
    assert durable, f"seed {seed}: nothing reported flushed ({flushed})"
    with MessageStore(StoreConfig(**settings)) as store:
        lost = [a[3] for a in durable if (m := store.read_message(int(a[0]))) is None or m.body != body_for(a[3])]
        assert not lost, (f"seed {seed}: {len(lost)} of {len(durable)} messages below the reported flushed offset "
                          f"{flushed} are gone after the kill (recovery end {store.recovery.end_offset}, "
                          f"truncated {store.recovery.truncated_bytes} bytes); first: {lost[:3]}")
