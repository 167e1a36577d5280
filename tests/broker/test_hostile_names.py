"""Every request that names a topic or a group, through the wire, with hostile names: refused with
INVALID_PARAMETER naming the rule, and nothing created or deleted inside or outside the store."""

import asyncio
import hashlib
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from broker_helpers import store_config  # noqa: E402
from request_templates import TEMPLATES, build  # noqa: E402

from rocketq.acl.requests import TABLE, needs_of  # noqa: E402
from rocketq.broker.broker import Broker, BrokerSettings  # noqa: E402
from rocketq.remoting import RemotingClient, RequestCode, ResponseCode  # noqa: E402
from rocketq.store import MessageStore  # noqa: E402
from rocketq.store.consume_queue import ConsumeQueue  # noqa: E402

HOSTILE = {"dotdot": "../../x", "slash": "a/b", "nul": "a\x00b", "long": "t" * 10_000, "empty": "",
           "absolute": None}          # None: the absolute path of a directory outside the store


def _tree(root: Path) -> dict[str, str]:
    """Every path under *root* with a digest of its content (directories: "dir")."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            out[os.path.relpath(os.path.join(dirpath, d), root)] = "dir"
        for f in filenames:
            p = os.path.join(dirpath, f)
            if f.startswith("checkpoint"):   # the flusher and the timer stamp these on their own schedule
                continue
            out[os.path.relpath(p, root)] = hashlib.sha1(Path(p).read_bytes()).hexdigest()
    return out


def _named_slots():
    return [(code, slot, kind, optional) for code, (_, slots) in sorted(TEMPLATES.items())
            for slot, kind, optional in slots]


def test_every_code_in_the_table_has_a_template_with_all_its_names():
    """A code added to the broker's table must get a template here (and so these tests)."""
    assert set(TABLE) <= set(TEMPLATES)       # the rest are admin requests that name nothing
    for code, (_, slots) in TEMPLATES.items():
        assert len(needs_of(build(code)).named) == len(slots), code


@pytest.mark.parametrize("code", sorted({code for code, _, _, _ in _named_slots()}), ids=lambda c: str(int(c)))
def test_hostile_names_are_refused_and_touch_nothing(tmp_path, code):
    store = tmp_path / "store"
    outside = tmp_path / "x"                      # where consumequeue/../../x points
    outside.mkdir()
    (tmp_path / "abs").mkdir()
    hostile = dict(HOSTILE, absolute=str(tmp_path / "abs"))

    async def scenario():
        broker = await Broker(BrokerSettings(port=0), store_config(store)).start()
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            before = _tree(tmp_path)
            for slot, kind, optional in TEMPLATES[code][1]:
                for label, name in hostile.items():
                    if optional and name == "":
                        continue              # an optional slot left empty names nothing
                    r = await client.invoke(build(code, **{slot: name}), timeout_s=10)
                    where = f"code {code} slot {slot} name {label}"
                    assert r.code == ResponseCode.INVALID_PARAMETER, f"{where}: {r.code} {r.remark}"
                    assert f"a {kind} name is 1 to" in r.remark and "^[%|a-zA-Z0-9_-]+$" in r.remark, where
                    assert len(r.remark) < 400, where          # a 10,000-character name is not echoed whole
            await asyncio.to_thread(broker.offsets.persist)
            assert _tree(tmp_path) == before
        finally:
            await client.close()
            await broker.close()
    asyncio.run(scenario())
    assert outside.is_dir() and (tmp_path / "abs").is_dir()


def test_delete_topic_with_a_path_leaves_the_directory_outside_the_store(tmp_path):
    """The issue's reproduction: DELETE_TOPIC_IN_BROKER topic=../../x removed <store>/../x."""
    victim = tmp_path / "x"
    victim.mkdir()

    async def scenario():
        broker = await Broker(BrokerSettings(port=0), store_config(tmp_path / "store")).start()
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            r = await client.invoke(build(RequestCode.DELETE_TOPIC_IN_BROKER, topic="../../x"), timeout_s=10)
            assert r.code == ResponseCode.INVALID_PARAMETER and "'../../x'" in r.remark
        finally:
            await client.close()
            await broker.close()
    asyncio.run(scenario())
    assert victim.is_dir()


def test_system_topics_cannot_be_created_deleted_or_sent_to(tmp_path):
    async def scenario():
        broker = await Broker(BrokerSettings(port=0), store_config(tmp_path / "store")).start()
        client = RemotingClient("127.0.0.1", broker.server.port)
        try:
            for code in (RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.DELETE_TOPIC_IN_BROKER):
                for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "rmq_sys_anything"):
                    r = await client.invoke(build(code, topic=topic), timeout_s=10)
                    assert r.code == ResponseCode.INVALID_PARAMETER and "conflict with system topic" in r.remark
            assert broker.topics.get("SCHEDULE_TOPIC_XXXX") is not None
            r = await client.invoke(build(RequestCode.SEND_MESSAGE_V2, topic="RMQ_SYS_TRANS_HALF_TOPIC"), timeout_s=10)
            assert r.code == ResponseCode.NO_PERMISSION and "forbidden" in r.remark
        finally:
            await client.close()
            await broker.close()
    asyncio.run(scenario())


@pytest.mark.parametrize("name", ["../x", "a/b", "", ".", "..", "a\x00b", "/abs"])
def test_the_store_keeps_its_files_inside_whatever_it_is_given(tmp_path, name):
    """Defence in depth below the broker: no consume queue and no deletion outside consumequeue/."""
    (tmp_path / "x").mkdir()
    store = MessageStore(store_config(tmp_path / "store"))
    store.start()
    try:
        with pytest.raises(ValueError, match="not deleted"):
            store.delete_topic(name if name != "/abs" else str(tmp_path / "x"))
        with pytest.raises(ValueError, match="no consume queue"):
            ConsumeQueue(tmp_path / "store" / "consumequeue", name, 0, 1000)
    finally:
        store.shutdown()
    assert (tmp_path / "x").is_dir()
