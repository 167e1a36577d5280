"""The durability claim, tested the hard way: SIGKILL a writer process, restart, check.

Under SYNC_FLUSH every message whose put returned PUT_OK must be readable after the kill, with
its body intact, and the store must verify.  Under ASYNC_FLUSH a process kill loses nothing
either (the page cache survives the process), and whatever is there must be a consistent prefix.
"""

import os
import random
import signal
import subprocess
import sys
import textwrap

import pytest

from rocketq.store import MessageStore, StoreConfig
from rocketq.store.tools import verify_store

WRITER = textwrap.dedent("""
    import sys
    from rocketq.store import MessageStore, StoreConfig, Message
    path, mode = sys.argv[1], sys.argv[2]
    store = MessageStore(StoreConfig(store_path=path, commitlog_file_size=256 * 1024, consume_queue_entries=500,
                                     index_slots=211, index_max_entries=2000, flush_disk_type=mode)).start()
    print("ready", flush=True)
    i = 0
    while True:
        if i % 3 == 0:
            rs = store.put_messages([Message(topic="Crash", body=b"b%d-%d" % (i, j) * 7, queue_id=j % 2,
                                             keys=["k%d-%d" % (i, j)]) for j in range(5)])
            for j, r in enumerate(rs):
                if r.status == "PUT_OK":
                    print(r.physical_offset, r.queue_id, r.queue_offset, "b%d-%d" % (i, j), flush=True)
        else:
            r = store.put_message(Message(topic="Crash", body=b"s%d" % i * 11, queue_id=i % 2, keys=["k%d" % i]))
            if r.status == "PUT_OK":
                print(r.physical_offset, r.queue_id, r.queue_offset, "s%d" % i, flush=True)
        i += 1
""")


def config(path, mode):
    return StoreConfig(store_path=path, commitlog_file_size=256 * 1024, consume_queue_entries=500,
                       index_slots=211, index_max_entries=2000, flush_disk_type=mode)


def run_and_kill(path, mode, acks_wanted):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), mode], stdout=subprocess.PIPE, env=env)
    acked = []
    try:
        assert proc.stdout.readline().strip() == b"ready"
        while len(acked) < acks_wanted:
            line = proc.stdout.readline()
            assert line, "writer died before the kill"
            phy, qid, qoff, tag = line.split()
            acked.append((int(phy), int(qid), int(qoff), tag.decode()))
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=30)
    return acked


def expected_body(tag: str) -> bytes:
    return tag.encode() * (7 if tag.startswith("b") else 11)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_every_acknowledged_message_survives_sigkill(tmp_path, mode):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for round_ in range(3):
        path = tmp_path / f"store-{round_}"
        acked = run_and_kill(path, mode, rng.randrange(200, 3000))
        with MessageStore(config(path, mode)) as store:
            assert store.recovery.abnormal, f"seed {seed}"
            for phy, qid, qoff, tag in acked:
                m = store.read_message(phy)
                assert m is not None and m.body == expected_body(tag), f"seed {seed}: {tag} at {phy} lost"
                assert (m.queue_id, m.queue_offset) == (qid, qoff), f"seed {seed}"
            store.wait_dispatched()
            for qid in (0, 1):           # queues are a dense, intact prefix of the log
                got = store.get_messages("Crash", qid, 0, 100_000)
                offsets = []
                while got.messages:
                    offsets += [m.queue_offset for m in got.messages]
                    assert all(m.crc_ok() for m in got.messages)
                    got = store.get_messages("Crash", qid, got.next_begin_offset, 100_000)
                assert offsets == list(range(len(offsets))), f"seed {seed}"
                assert len(offsets) >= sum(1 for a in acked if a[1] == qid), f"seed {seed}"
            for phy, _qid, _qoff, tag in acked[-20:]:      # keys of the last acknowledged ones are indexed
                found = store.query_by_key("Crash", "k" + tag[1:])
                assert [m.physical_offset for m in found] == [phy], f"seed {seed}: key of {tag}"
        report = verify_store(path)
        assert report.ok, f"seed {seed}: {report.problems[:5]}"
