"""Golden bytes: the record, consume-queue unit, checkpoint and message id exactly as RocketMQ lays them out."""

import struct

from rocketq.common.msgid import HostAddress, decode_offset_msg_id
from rocketq.store import Message, MessageStore, StoreConfig
from rocketq.store.checkpoint import Checkpoint

STORE_TS_MS = 1_700_000_000_123


def open_store(tmp_path, **kw):
    cfg = StoreConfig(store_path=tmp_path, commitlog_file_size=4096, consume_queue_entries=10,
                      message_index_enable=False, store_host="10.0.0.7:10911", **kw)
    return MessageStore(cfg, clock=lambda: STORE_TS_MS / 1000).start()


def expected_record(*, body, topic, props, queue_id, queue_offset, phys, born_ts, born_host, sys_flag=0,
                    flag=0, reconsume=0, prepared=0):
    crc = __import__("zlib").crc32(body) & 0x7FFFFFFF
    born_ip, born_port = born_host
    born = born_ip + struct.pack(">i", born_port)
    store = bytes([10, 0, 0, 7]) + struct.pack(">i", 10911)
    fixed = (struct.pack(">I", 0xDAA320A7) + struct.pack(">i", crc) + struct.pack(">i", queue_id)
             + struct.pack(">i", flag) + struct.pack(">q", queue_offset) + struct.pack(">q", phys)
             + struct.pack(">i", sys_flag) + struct.pack(">q", born_ts) + born
             + struct.pack(">q", STORE_TS_MS) + store + struct.pack(">i", reconsume) + struct.pack(">q", prepared)
             + struct.pack(">i", len(body)) + body + bytes([len(topic)]) + topic
             + struct.pack(">h", len(props)) + props)
    return struct.pack(">i", 4 + len(fixed)) + fixed


def test_record_bytes_ipv4(tmp_path):
    store = open_store(tmp_path)
    m = Message(topic="TopicTest", body=b"Hello RocketMQ", queue_id=2, tags="TagA", keys=["k1", "k2"],
                properties={"UNIQ_KEY": "ABC"}, flag=7, born_timestamp=1_699_999_999_000,
                born_host=HostAddress.parse("192.168.1.9:55000"))
    r = store.put_message(m)
    store.shutdown()
    raw = (tmp_path / "commitlog" / "00000000000000000000").read_bytes()[:r.wrote_bytes]
    want = expected_record(body=b"Hello RocketMQ", topic=b"TopicTest",
                           props=b"UNIQ_KEY\x01ABC\x02TAGS\x01TagA\x02KEYS\x01k1 k2\x02", queue_id=2, queue_offset=0,
                           phys=0, born_ts=1_699_999_999_000, born_host=(bytes([192, 168, 1, 9]), 55000), flag=7)
    assert raw == want
    assert r.msg_id == "0A00000700002A9F0000000000000000"          # ip | port | offset, upper-case hex
    assert decode_offset_msg_id(r.msg_id) == (HostAddress(bytes([10, 0, 0, 7]), 10911), 0)


def test_record_bytes_ipv6_born_host(tmp_path):
    store = open_store(tmp_path)
    r = store.put_message(Message(topic="T", body=b"x", born_timestamp=5, born_host=HostAddress.parse("[::1]:7")))
    store.shutdown()
    raw = (tmp_path / "commitlog" / "00000000000000000000").read_bytes()[:r.wrote_bytes]
    assert struct.unpack_from(">i", raw, 36)[0] == 0x10                 # BORNHOST_V6
    assert raw[48:68] == bytes(15) + b"\x01" + struct.pack(">i", 7)      # 16-byte address + port
    assert struct.unpack_from(">q", raw, 68)[0] == STORE_TS_MS          # everything after shifts by 12
    assert len(raw) == 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 20 + 8 + 8 + 4 + 8 + 4 + 1 + 1 + 1 + 2 + 0


def test_blank_record_closes_a_segment(tmp_path):
    store = open_store(tmp_path)
    first = store.put_message(Message(topic="T", body=b"a" * 3000))
    second = store.put_message(Message(topic="T", body=b"b" * 3000))      # does not fit in 4096 - 3100
    store.shutdown()
    seg0 = (tmp_path / "commitlog" / "00000000000000000000").read_bytes()
    remaining = 4096 - first.wrote_bytes
    assert seg0[first.wrote_bytes:first.wrote_bytes + 8] == struct.pack(">iI", remaining, 0xCBD43194)
    assert second.physical_offset == 4096 and (tmp_path / "commitlog" / "00000000000000004096").exists()


def test_consume_queue_unit_bytes(tmp_path):
    store = open_store(tmp_path)
    rs = [store.put_message(Message(topic="T", body=b"x" * 10, tags="TagA")) for _ in range(2)]
    store.shutdown()
    cq = (tmp_path / "consumequeue" / "T" / "0" / "00000000000000000000").read_bytes()
    assert len(cq) == 10 * 20
    for i, r in enumerate(rs):   # offset 8 | size 4 | Java "TagA".hashCode() 8
        assert cq[i * 20:(i + 1) * 20] == struct.pack(">qiq", r.physical_offset, r.wrote_bytes, 2598919)
    assert cq[40:60] == bytes(20)


def test_checkpoint_page_layout():
    cp = Checkpoint(1, 2, 3, 4, 5, 6, 7).encode()
    assert len(cp) == 4096
    assert cp[:56] == struct.pack(">7q", 1, 2, 3, 4, 5, 6, 7) and cp[56:] == bytes(4040)
    assert Checkpoint.decode(cp) == Checkpoint(1, 2, 3, 4, 5, 6, 7)
