"""Bad input and operating faults: a typed status or a clear error naming what and where, and
nothing half-written or lost."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import threading

import pytest
from store_helpers import read_queue, small_config, subprocess_env

from rocketq.store import GetStatus, Message, MessageStore, PutStatus, StoreOpenError
from rocketq.store.config_files import read_json, write_json

MAX_BODY = 8192


@pytest.fixture
def store(tmp_path):
    s = MessageStore(small_config(tmp_path, max_message_size=MAX_BODY)).start()
    yield s
    s.shutdown()


def assert_nothing_written(store):
    assert store.commitlog.max_offset() == 0
    assert store.wait_dispatched() and store.topics() == {}


def put_both_ways(store, msg):
    """The single path and the batch path (which has its own fast validation) must agree."""
    single = store.put_message(msg)
    batch = store.put_messages([msg])
    return single, batch


# ---- topics -------------------------------------------------------------------------------------

@pytest.mark.parametrize("topic, words", [
    ("", "empty"),
    ("bad topic", "characters"),
    ("a/b", "characters"),
    ("../etc", "characters"),
    ("主题", "characters"),
    ("T\t", "characters"),
    ("T\n", "characters"),           # a trailing newline is not a legal topic character either
    ("x" * 128, "longer than 127"),
])
def test_illegal_topics_are_refused_by_both_paths(store, topic, words):
    single, batch = put_both_ways(store, Message(topic=topic, body=b"x"))
    for r in (single, batch):
        assert r.status == PutStatus.MESSAGE_ILLEGAL, (topic, r.status)
        assert words in r.error
    assert_nothing_written(store)


def test_legal_topic_edge_cases(store):
    for topic in ("x" * 127, "%RETRY%group", "a|b", "A-b_9"):
        single, batch = put_both_ways(store, Message(topic=topic, body=b"x"))
        assert single.status == batch.status == PutStatus.PUT_OK, topic


# ---- sizes --------------------------------------------------------------------------------------

def test_body_limit_is_max_message_size(store):
    single, batch = put_both_ways(store, Message(topic="T", body=b"x" * (MAX_BODY + 1)))
    for r in (single, batch):
        assert r.status == PutStatus.MESSAGE_ILLEGAL
        assert str(MAX_BODY + 1) in r.error and "maxMessageSize" in r.error
    assert_nothing_written(store)
    single, batch = put_both_ways(store, Message(topic="T", body=b"x" * MAX_BODY))
    assert single.status == batch.status == PutStatus.PUT_OK


def _props_message(total_bytes: int, how: str) -> Message:
    """A message whose on-disk properties string is exactly *total_bytes* long."""
    if how == "properties":
        return Message(topic="T", body=b"x", properties={"big": "v" * (total_bytes - len("big\x01\x02"))})
    if how == "keys":
        return Message(topic="T", body=b"x", keys=["k" * (total_bytes - len("KEYS\x01\x02"))])
    return Message(topic="T", body=b"x", tags="t" * (total_bytes - len("TAGS\x01\x02")))


@pytest.mark.parametrize("size", [32768, 70000])
@pytest.mark.parametrize("how", ["properties", "keys", "tags"])
def test_properties_over_32767_bytes_are_refused(tmp_path, how, size):
    # a 1 MiB segment, so that only the properties limit can refuse these
    with MessageStore(small_config(tmp_path, commitlog_file_size=1 << 20)) as store:
        single, batch = put_both_ways(store, _props_message(size, how))
        assert single.status == PutStatus.PROPERTIES_SIZE_EXCEEDED, (how, size, "single")
        assert batch.status == PutStatus.PROPERTIES_SIZE_EXCEEDED, (how, size, "batch", batch.error)
        assert "32767" in single.error and "32767" in batch.error
        assert_nothing_written(store)


@pytest.mark.parametrize("how", ["properties", "keys", "tags"])
def test_properties_of_exactly_32767_bytes_are_accepted(tmp_path, how):
    with MessageStore(small_config(tmp_path, commitlog_file_size=1 << 20)) as store:
        single, batch = put_both_ways(store, _props_message(32767, how))
        assert single.status == batch.status == PutStatus.PUT_OK, how
        store.wait_dispatched()
        got = read_queue(store, "T", 0)
        assert len(got) == 2 and all(len(m.properties_string.encode()) == 32767 for m in got)


@pytest.mark.parametrize("msg", [
    Message(topic="T", body=b"x", properties={"k": "a\x01b"}),
    Message(topic="T", body=b"x", properties={"k": "a\x02b"}),
    Message(topic="T", body=b"x", properties={"k\x01": "v"}),
    Message(topic="T", body=b"x", tags="a\x02b"),
    Message(topic="T", body=b"x", keys=["ok", "bad\x01key"]),
    Message(topic="T", body=b"x", keys="bad\x02"),
], ids=["value-x01", "value-x02", "name-x01", "tags-x02", "keys-x01", "keys-x02"])
def test_separator_characters_are_refused(store, msg):
    single, batch = put_both_ways(store, msg)
    for r in (single, batch):
        assert r.status == PutStatus.MESSAGE_ILLEGAL and ("\\x01" in r.error or "\\x02" in r.error)
    assert_nothing_written(store)


@pytest.mark.parametrize("qid", [-1, -(1 << 31), 1 << 31])
def test_queue_id_out_of_range(store, qid):
    single, batch = put_both_ways(store, Message(topic="T", body=b"x", queue_id=qid))
    for r in (single, batch):
        assert r.status == PutStatus.MESSAGE_ILLEGAL and f"queue id {qid}" in r.error
    assert_nothing_written(store)


@pytest.mark.parametrize("field, value", [
    ("flag", 1 << 31), ("flag", -(1 << 31) - 1), ("sys_flag", 1 << 31), ("reconsume_times", 1 << 31),
    ("born_timestamp", 1 << 63), ("prepared_transaction_offset", 1 << 63),
])
def test_numeric_fields_that_do_not_fit_their_width_are_refused_cleanly(store, field, value):
    """FLAG/SYSFLAG/RECONSUMETIMES are int32 and the timestamps int64 on disk: a value that does not
    fit is the caller's error - a typed status, nothing written, and no queue offset used up."""
    for path in ("single", "batch"):
        msg = Message(topic="T", body=b"x", **{field: value})
        try:
            r = store.put_message(msg) if path == "single" else store.put_messages([msg])
        except Exception as exc:                      # noqa: BLE001 - the point is that nothing escapes
            pytest.fail(f"{path} put with {field}={value} raised {type(exc).__name__}: {exc}")
        assert r.status == PutStatus.MESSAGE_ILLEGAL and field in r.error, (path, r.status, r.error)
    ok = store.put_message(Message(topic="T", body=b"ok"))
    assert (ok.physical_offset, ok.queue_offset) == (0, 0), "a refused message used up a queue offset"
    store.wait_dispatched()
    assert store.get_messages("T", 0, 0, 10).status == GetStatus.FOUND


@pytest.mark.parametrize("bad", [
    Message(topic="bad topic", body=b"x"),
    Message(topic="T", body=b"x" * (MAX_BODY + 1)),
    Message(topic="T", body=b"x", queue_id=-1),
    Message(topic="T", body=b"x", properties={"k": "\x01"}),
    Message(topic="T", body=b"x", keys=["k" * 40000]),
    Message(topic="T", body=b"x", properties={"p": "v" * 40000}),
], ids=["topic", "body", "queue", "separator", "keys-size", "props-size"])
@pytest.mark.parametrize("where", [0, 7])
def test_a_batch_with_one_bad_message_stores_nothing(tmp_path, bad, where):
    with MessageStore(small_config(tmp_path, max_message_size=MAX_BODY, commitlog_file_size=1 << 20)) as store:
        store.put_message(Message(topic="T", body=b"before"))
        end = store.commitlog.max_offset()
        msgs = [Message(topic="T", body=b"ok%d" % i) for i in range(8)]
        msgs[where] = bad
        rs = store.put_messages(msgs)
        assert rs.status != PutStatus.PUT_OK and rs.error, rs.status
        assert len(rs) == 8 and all(r.status == rs.status and r.physical_offset == -1 for r in rs)
        assert store.commitlog.max_offset() == end
        after = store.put_message(Message(topic="T", body=b"after"))
        assert (after.physical_offset, after.queue_offset) == (end, 1)     # no queue offset was used up
        store.wait_dispatched()
        assert [m.body for m in read_queue(store, "T", 0)] == [b"before", b"after"]


def test_records_and_batches_bigger_than_a_segment_are_refused(tmp_path):
    with MessageStore(small_config(tmp_path, commitlog_file_size=16 * 1024)) as store:
        one = store.put_message(Message(topic="T", body=b"x" * (16 * 1024)))
        assert one.status == PutStatus.MESSAGE_ILLEGAL and "16384-byte commitlog segment" in one.error
        many = store.put_messages([Message(topic="T", body=b"y" * 1000) for _ in range(20)])
        assert many.status == PutStatus.MESSAGE_ILLEGAL and "does not fit" in many.error
        assert_nothing_written(store)
        fits = store.put_messages([Message(topic="T", body=b"y" * 1000) for _ in range(14)])   # 14 x 1092 + 8
        assert fits.ok and fits[0].physical_offset == 0


# ---- reads of things that are not there ---------------------------------------------------------

def test_reads_of_unknown_queues(store):
    store.put_message(Message(topic="Known", body=b"x", queue_id=1))
    store.wait_dispatched()
    for topic, qid in (("Unknown", 0), ("Known", 0), ("Known", 2)):
        got = store.get_messages(topic, qid, 0, 10)
        assert (got.status, got.messages, got.next_begin_offset) == (GetStatus.NO_MATCHED_LOGIC_QUEUE, [], 0)
        assert store.max_offset(topic, qid) == store.min_offset(topic, qid) == 0
        assert store.search_offset_by_time(topic, qid, 0) == 0
    assert store.get_messages("Known", 1, 0, 10).status == GetStatus.FOUND


@pytest.mark.parametrize("garbage, words", [
    ("", "has 0 bytes"),
    ("ABCDEF", "has 3 bytes"),
    ("zz-not-an-id", "not hexadecimal"),
    ("0" * 31, "not hexadecimal"),
    ("0A00000700002A9F000000000000000000", "has 17 bytes"),
])
def test_view_by_id_with_a_garbage_id_names_the_id(store, garbage, words):
    with pytest.raises(ValueError, match=words) as info:
        store.view_by_id(garbage)
    assert repr(garbage) in str(info.value)


def test_view_by_id_with_a_well_formed_id_that_is_no_record(store):
    # the body holds bytes that look like a small record size, as any user payload may
    body = (20).to_bytes(4, "big") + bytes(16) + (120).to_bytes(4, "big") + b"z" * 200
    r = store.put_message(Message(topic="T", body=body))
    assert store.view_by_id(store.msg_id(r.physical_offset + r.wrote_bytes + 100)) is None   # past the end
    assert store.view_by_id(store.msg_id(1 << 40)) is None
    for inside in (1, 40, 88, 108):                   # offsets inside the record, not where one starts
        bogus = store.msg_id(r.physical_offset + inside)
        try:
            found = store.view_by_id(bogus)
        except ValueError as exc:
            assert bogus in str(exc)
            continue
        assert found is None, f"offset {inside} inside a record was returned as a message"


# ---- directories that are not (this) store ------------------------------------------------------

def test_a_file_is_not_a_store(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(StoreOpenError, match="is a file"):
        MessageStore(small_config(f)).start()
    assert f.read_text() == "x"


def test_a_directory_with_foreign_files_is_not_a_store(tmp_path):
    (tmp_path / "notes.txt").write_text("my files")
    (tmp_path / "photos").mkdir()
    with pytest.raises(StoreOpenError, match="is not a store") as info:
        MessageStore(small_config(tmp_path)).start()
    assert "notes.txt" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "photos"]      # untouched


def test_commitlog_that_is_a_file(tmp_path):
    (tmp_path / "commitlog").write_text("x")
    with pytest.raises(StoreOpenError, match="commitlog"):
        MessageStore(small_config(tmp_path)).start()


def test_stray_file_among_segments_is_refused_with_its_name(tmp_path):
    with MessageStore(small_config(tmp_path)) as s:
        s.put_message(Message(topic="T", body=b"x"))
    (tmp_path / "commitlog" / "README").write_text("hi")
    with pytest.raises(StoreOpenError, match="README"):
        MessageStore(small_config(tmp_path)).start()


def test_reopening_with_another_segment_size_is_refused(tmp_path):
    with MessageStore(small_config(tmp_path)) as s:
        s.put_message(Message(topic="T", body=b"x"))
    with pytest.raises(StoreOpenError, match="65536"):
        MessageStore(small_config(tmp_path, commitlog_file_size=128 * 1024)).start()
    with MessageStore(small_config(tmp_path)) as s:            # and the right size still opens it
        assert s.max_offset("T", 0) == 1


def test_a_second_store_on_the_same_path_names_the_pid(tmp_path):
    first = MessageStore(small_config(tmp_path)).start()
    try:
        with pytest.raises(StoreOpenError, match=f"in use by another process \\(pid {os.getpid()}\\)"):
            MessageStore(small_config(tmp_path)).start()
        assert first.put_message(Message(topic="T", body=b"still mine")).status == PutStatus.PUT_OK
        code = ("from rocketq.store import MessageStore, StoreConfig\n"
                f"MessageStore(StoreConfig(store_path={str(tmp_path)!r})).start()\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=subprocess_env(),
                             timeout=60, check=False)
        assert out.returncode != 0 and f"(pid {os.getpid()})" in out.stderr
        assert "StoreOpenError" in out.stderr
    finally:
        first.shutdown()
    with MessageStore(small_config(tmp_path)) as again:     # released on shutdown
        assert again.max_offset("T", 0) == 1


# ---- a full disk --------------------------------------------------------------------------------

class Disk:
    """A ``reserve`` that has room only for the segments in *room*, until ``free()`` is called."""

    def __init__(self, *room: str):
        self.room = set(room)
        self.full = True
        self.refused: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, fd: int, size: int) -> None:
        name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}")).removesuffix(".tmp")
        with self._lock:
            if self.full and name not in self.room:
                self.refused.append(name)
                raise OSError(errno.ENOSPC, "No space left on device")
        os.posix_fallocate(fd, 0, size)

    def free(self) -> None:
        with self._lock:
            self.full = False


def test_full_disk_refuses_the_next_segment_and_loses_nothing_acknowledged(tmp_path):
    disk = Disk("00000000000000000000")
    cfg = small_config(tmp_path)
    acked = []
    with MessageStore(cfg, reserve=disk) as store:
        statuses = []
        for i in range(300):                  # ~46 KiB, then batches: more than one 64 KiB segment
            body = b"%04d" % i * 40
            r = store.put_message(Message(topic="T", body=body, queue_id=i % 2))
            statuses.append(r.status)
            if r.ok:
                acked.append((r, body))
        for i in range(60):
            bodies = [b"b%03d-%d" % (i, j) * 30 for j in range(4)]
            rs = store.put_messages([Message(topic="T", body=b, queue_id=0) for b in bodies])
            statuses.append(rs.status)
            if rs.ok:
                acked += list(zip(rs, bodies))
        assert PutStatus.CREATE_MAPPED_FILE_FAILED in statuses
        assert set(statuses) == {PutStatus.PUT_OK, PutStatus.CREATE_MAPPED_FILE_FAILED}
        failed = store.put_message(Message(topic="T", body=b"late"))
        assert failed.status == PutStatus.CREATE_MAPPED_FILE_FAILED and "segment" in failed.error
        assert "00000000000000065536" in disk.refused
        assert [os.path.basename(p) for p in os.listdir(tmp_path / "commitlog")] == ["00000000000000000000"]
        # the acknowledged ones are readable now, and their queue offsets are dense
        store.wait_dispatched()
        for qid in (0, 1):
            mine = [r.queue_offset for r, _ in acked if r.queue_id == qid]
            assert mine == list(range(len(mine)))
            assert store.max_offset("T", qid) == len(mine)
    with MessageStore(cfg) as store:          # room again, after a restart
        for r, body in acked:
            assert store.read_message(r.physical_offset).body == body
        for qid in (0, 1):
            assert [m.body for m in read_queue(store, "T", qid)] == [b for r, b in acked if r.queue_id == qid]
        n0 = store.max_offset("T", 0)
        r = store.put_message(Message(topic="T", body=b"after"))
        assert r.ok and r.queue_offset == n0 and r.physical_offset == 65536


def test_full_disk_recovers_without_a_restart_when_space_returns(tmp_path):
    disk = Disk("00000000000000000000")
    with MessageStore(small_config(tmp_path), reserve=disk) as store:
        acked = []
        r = None
        for i in range(400):
            r = store.put_message(Message(topic="T", body=b"%04d" % i * 50))
            if not r.ok:
                break
            acked.append(r)
        assert r.status == PutStatus.CREATE_MAPPED_FILE_FAILED
        disk.free()
        again = store.put_message(Message(topic="T", body=b"again"))
        assert again.ok and again.queue_offset == len(acked) and again.physical_offset == 65536
        store.wait_dispatched()
        assert [m.queue_offset for m in read_queue(store, "T", 0)] == list(range(len(acked) + 1))


# ---- config files -------------------------------------------------------------------------------

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
    assert read_json(tmp_path / "config" / "missing.json") is None
