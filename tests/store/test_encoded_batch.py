"""A batch handed over as it came off the wire (properties already encoded) is stored byte for byte
as the same messages put one by one through the general path, and bad ones are refused the same way."""

import pytest
from store_helpers import FakeClock

from rocketq.common.message import Message
from rocketq.common.msgid import HostAddress
from rocketq.store import MessageStore, StoreConfig
from rocketq.store.prepare import EncodedBatch
from rocketq.store.results import PutStatus

BORN = HostAddress.parse("10.1.2.3:5555")
TEXTS = ("TAGS\x01A\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01ID1\x02", "", "color\x01red\x02UNIQ_KEY\x01ID3\x02")


def _store(path):
    return MessageStore(StoreConfig(store_path=path, commitlog_file_size=1 << 20, consume_queue_entries=100,
                                    index_slots=101, index_max_entries=400), clock=FakeClock())


def _batch(**kw):
    args = dict(topic="T", queue_id=1, flags=(0, 7, 0), bodies=(b"one", b"two", b"three"), props_texts=TEXTS,
                born_timestamp=1_700_000_000_000, born_host=BORN)
    args.update(kw)
    return EncodedBatch(**args)


def test_encoded_batch_matches_the_general_path(tmp_path):
    eb = _batch()
    with _store(tmp_path / "a") as a, _store(tmp_path / "b") as b:
        ra = a.put_messages(eb)
        rb = b.put_messages(eb.to_messages())
        assert ra.ok and rb.ok and ra.msg_ids == rb.msg_ids
        a.wait_dispatched()
        b.wait_dispatched()
        got = a.get_messages("T", 1, 0, 10)
        assert [m.raw for m in got] == [m.raw for m in b.get_messages("T", 1, 0, 10)]
        assert [m.tags for m in got] == ["A", None, None] and got[0].keys == ["k1", "k2"]
        assert [m.uniq_key for m in a.query_by_key("T", "ID3")] == ["ID3"]
        assert [m.body for m in a.query_by_key("T", "k2")] == [b"one"]


@pytest.mark.parametrize("kw, status, words", [
    (dict(props_texts=("a\x01b", "", "")), PutStatus.MESSAGE_ILLEGAL, "k\\x01v\\x02"),
    (dict(props_texts=("a\x02", "", "")), PutStatus.MESSAGE_ILLEGAL, "k\\x01v\\x02"),
    (dict(topic="bad topic"), PutStatus.MESSAGE_ILLEGAL, "topic"),
    (dict(bodies=(b"x" * 2000, b"", b"")), PutStatus.MESSAGE_ILLEGAL, "maxMessageSize"),
    (dict(props_texts=("k\x01" + "v" * 40000 + "\x02", "", "")), PutStatus.PROPERTIES_SIZE_EXCEEDED, "properties"),
])
def test_bad_encoded_batches_are_refused_whole(tmp_path, kw, status, words):
    with MessageStore(StoreConfig(store_path=tmp_path, commitlog_file_size=1 << 20, max_message_size=1024,
                                  consume_queue_entries=100, index_slots=101, index_max_entries=400)) as s:
        r = s.put_messages(_batch(**kw))
        assert r.status == status and words in r.error
        assert s.commitlog.max_offset() == 0


def test_a_delay_property_takes_the_general_path(tmp_path):
    with _store(tmp_path) as s:
        r = s.put_messages(_batch(props_texts=("DELAY\x013\x02", "", "")))
        assert r.ok
        s.wait_dispatched()
        assert s.max_offset("SCHEDULE_TOPIC_XXXX", 2) == 1 and s.max_offset("T", 1) == 2
