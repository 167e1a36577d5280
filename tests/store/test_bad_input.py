"""Bad input and faults: typed results or clear errors naming what and where, nothing lost."""

import os
import struct
import subprocess
import sys

import pytest

from rocketq.common.msgid import HostAddress
from rocketq.store import GetStatus, Message, MessageStore, PutStatus, StoreConfig, StoreOpenError
from rocketq.store.config_files import read_json, write_json
from rocketq.store.tools import verify_store


def cfg(path, **kw):
    base = dict(store_path=path, commitlog_file_size=64 * 1024, consume_queue_entries=100, index_slots=101,
                index_max_entries=400, max_message_size=8192)
    base.update(kw)
    return StoreConfig(**base)


@pytest.fixture
def store(tmp_path):
    s = MessageStore(cfg(tmp_path)).start()
    yield s
    s.shutdown()


@pytest.mark.parametrize("topic, words", [("", "empty"), ("bad topic", "characters"), ("a/b", "characters"),
                                          ("x" * 128, "longer than 127")])
def test_illegal_topics(store, topic, words):
    r = store.put_message(Message(topic=topic, body=b"x"))
    assert r.status == PutStatus.MESSAGE_ILLEGAL and words in r.error


def test_size_limits_and_separators(store):
    r = store.put_message(Message(topic="T", body=b"x" * 8193))
    assert r.status == "MESSAGE_ILLEGAL" and "8193" in r.error and "maxMessageSize" in r.error
    r = store.put_message(Message(topic="T", body=b"x", properties={"big": "v" * 40000}))
    assert r.status == "PROPERTIES_SIZE_EXCEEDED" and "32767" in r.error
    r = store.put_message(Message(topic="T", body=b"x", properties={"k": "a\x01b"}))
    assert r.status == "MESSAGE_ILLEGAL" and "\\x01" in r.error
    r = store.put_message(Message(topic="T", body=b"x", queue_id=-1))
    assert r.status == "MESSAGE_ILLEGAL" and "queue id -1" in r.error
    assert store.commitlog.max_offset() == 0                       # nothing was written


def test_a_batch_with_one_bad_message_stores_nothing(store):
    msgs = [Message(topic="T", body=b"ok") for _ in range(5)] + [Message(topic="T", body=b"x" * 9000)]
    rs = store.put_messages(msgs)
    assert rs.status == "MESSAGE_ILLEGAL" and "message 5" in rs.error and len(rs) == 6
    assert all(r.status == "MESSAGE_ILLEGAL" for r in rs)
    assert store.commitlog.max_offset() == 0


def test_reads_of_unknown_things(store):
    assert store.get_messages("Nope", 0, 0, 10).status == GetStatus.NO_MATCHED_LOGIC_QUEUE
    with pytest.raises(ValueError, match="not hexadecimal"):
        store.view_by_id("zz-not-an-id")
    with pytest.raises(ValueError, match="has 3 bytes"):
        store.view_by_id("ABCDEF")
    assert store.view_by_id("7F00000100002A9F00000000FFFFFFFF") is None
    store.put_message(Message(topic="T", body=b"x"))
    store.wait_dispatched()
    assert store.get_messages("T", 0, 1, 10).status == GetStatus.OFFSET_OVERFLOW_ONE
    assert store.get_messages("T", 0, 7, 10).status == GetStatus.OFFSET_OVERFLOW_BADLY


def test_transaction_records_get_no_queue_entry(store):
    half = store.put_message(Message(topic="T", body=b"half", sys_flag=0x4))        # PREPARED
    back = store.put_message(Message(topic="T", body=b"gone", sys_flag=0xC))        # ROLLBACK
    done = store.put_message(Message(topic="T", body=b"commit", sys_flag=0x8))      # COMMIT
    store.wait_dispatched()
    assert (half.queue_offset, back.queue_offset, done.queue_offset) == (0, 0, 0)
    assert [m.body for m in store.get_messages("T", 0, 0, 10)] == [b"commit"]
    assert store.read_message(half.physical_offset).body == b"half"


def test_search_offset_by_time(tmp_path):
    now = {"t": 1_800_000_000.0}
    s = MessageStore(cfg(tmp_path), clock=lambda: now["t"]).start()
    try:
        for i in range(10):
            s.put_message(Message(topic="T", body=b"%d" % i))
            now["t"] += 1
        s.wait_dispatched()
        base = 1_800_000_000_000
        assert s.search_offset_by_time("T", 0, base + 3_000) == 3
        assert s.search_offset_by_time("T", 0, base + 3_500) == 4
        assert s.search_offset_by_time("T", 0, base + 3_500, upper=True) == 3
        assert s.search_offset_by_time("T", 0, base - 5) == 0
        assert s.search_offset_by_time("T", 0, base + 99_000) == 10
        assert s.earliest_store_time("T", 0) == base
    finally:
        s.shutdown()


def test_a_directory_that_is_not_a_store(tmp_path):
    (tmp_path / "notes.txt").write_text("my files")
    with pytest.raises(StoreOpenError, match="is not a store"):
        MessageStore(cfg(tmp_path)).start()
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StoreOpenError, match="is a file"):
        MessageStore(cfg(f)).start()


def test_second_process_gets_a_clear_error(tmp_path):
    s = MessageStore(cfg(tmp_path)).start()
    try:
        code = ("import sys\nfrom rocketq.store import MessageStore, StoreConfig\n"
                f"MessageStore(StoreConfig(store_path={str(tmp_path)!r})).start()\n")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
        assert out.returncode != 0
        assert f"in use by another process (pid {os.getpid()})" in out.stderr
    finally:
        s.shutdown()


def test_torn_tail_is_cut_and_writing_continues(tmp_path):
    c = cfg(tmp_path)
    with MessageStore(c) as s:
        rs = [s.put_message(Message(topic="T", body=b"m%d" % i, keys=["k%d" % i])) for i in range(20)]
    end = rs[-1].physical_offset + rs[-1].wrote_bytes
    seg = tmp_path / "commitlog" / "00000000000000000000"
    with open(seg, "r+b") as fh:                      # half a record after the last one, as a crash leaves it
        fh.seek(end)
        fh.write(struct.pack(">iI", 150, 0xDAA320A7) + b"\x00" * 20 + b"garbage")
    (tmp_path / "abort").write_bytes(b"1")
    with MessageStore(c) as s:
        assert s.recovery.abnormal and s.recovery.end_offset == end and s.recovery.truncated_bytes > 0
        assert [m.body for m in s.get_messages("T", 0, 0, 100)] == [b"m%d" % i for i in range(20)]
        r = s.put_message(Message(topic="T", body=b"next"))
        assert (r.physical_offset, r.queue_offset) == (end, 20)
    assert verify_store(tmp_path).ok


def test_ipv6_store_host_round_trip(tmp_path):
    with MessageStore(cfg(tmp_path, store_host="[::1]:10911")) as s:
        r = s.put_message(Message(topic="T", body=b"v6", born_host=HostAddress.parse("[fe80::2]:1")))
        s.wait_dispatched()
        m = s.get_messages("T", 0, 0, 1)[0]
        assert m.sys_flag & 0x30 == 0x30 and str(m.store_host) == "[::1]:10911" and m.body == b"v6"
        assert len(r.msg_id) == 56 and s.view_by_id(r.msg_id).body == b"v6"
    assert verify_store(tmp_path).ok


def test_config_files_are_atomic_and_lenient(tmp_path):
    p = tmp_path / "config" / "consumerOffset.json"
    write_json(p, {"offsetTable": {"T@G": {"0": 1}}})
    write_json(p, {"offsetTable": {"T@G": {"0": 2}}})
    assert read_json(p)["offsetTable"]["T@G"]["0"] == 2
    assert read_json(p.with_name("consumerOffset.json.bak"))["offsetTable"]["T@G"]["0"] == 1
    p.write_text('{"offsetTable":{"T@G":{0:12,1:5}}}')       # fastjson's unquoted integer keys
    assert read_json(p)["offsetTable"]["T@G"] == {"0": 12, "1": 5}
    p.write_text("{torn")                                     # unreadable: the backup is used
    assert read_json(p)["offsetTable"]["T@G"]["0"] == 1
