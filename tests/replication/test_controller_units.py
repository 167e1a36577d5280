"""The controller's election and the epoch arithmetic, without processes."""

import pytest

from rocketq.broker.epochs import EpochFile, consistent_end
from rocketq.namesrv.controller import Controller


def _beat(c, bid, now, *, epoch=0, end=0, start=None, name="broker-a"):
    req = {"cluster": "C", "brokerName": name, "brokerId": bid, "addr": f"h:{bid}", "haAddr": f"h:{bid}1",
           "epoch": epoch, "maxPhyOffset": end}
    if start is not None:
        req["startOffset"] = start
    return c.heartbeat(req, now)


def test_consistent_end_cuts_the_old_masters_divergent_tail():
    history = [(1, 0), (2, 5000)]
    assert consistent_end([(1, 0)], 7000, history) == 5000          # old master of epoch 1 wrote past 5000
    assert consistent_end([(1, 0)], 4000, history) == 4000          # a lagging slave: a prefix, nothing cut
    assert consistent_end([(1, 0), (2, 5000)], 9000, history) == 9000   # follows the current epoch
    assert consistent_end([], 0, history) == 0                      # a new, empty broker
    assert consistent_end([], 800, history) == 0                    # data of no known term: before epoch 1 only
    # an unconfirmed takeover (epoch 2 at 6000 never made it into the history): divergent from 6000 on,
    # and the history's epoch 3 started at 5500
    assert consistent_end([(1, 0), (2, 6000)], 6500, [(1, 0), (3, 5500)]) == 5500
    assert consistent_end([(1, 0), (2, 6000)], 6500, [(1, 0), (3, 7000)]) == 6000


def test_epoch_file_is_atomic_json_and_ascending(tmp_path):
    f = EpochFile(tmp_path).load()
    assert f.last_epoch == 0
    f.append(1, 0)
    f.append(2, 100)
    assert EpochFile(tmp_path).load().entries == [(1, 0), (2, 100)]
    with pytest.raises(ValueError):
        f.append(3, 50)
    f.adopt([(1, 0), (2, 100), (4, 300)])
    assert EpochFile(tmp_path).load().last_epoch == 4


def test_first_broker_is_master_and_the_most_up_to_date_slave_is_elected(tmp_path):
    c = Controller(tmp_path / "controller.json", master_timeout_ms=1000)
    info = _beat(c, 1, 0, end=0)
    assert info["masterId"] == 1 and info["epoch"] == 1 and info["pending"]
    info = _beat(c, 1, 10, epoch=1, end=0, start=0)                 # the takeover is confirmed
    assert not info["pending"] and info["history"] == [[1, 0]]
    for t in range(100, 1000, 100):                                 # slaves follow epoch 1
        _beat(c, 1, t, epoch=1, end=t * 10)
        _beat(c, 2, t, epoch=1, end=t * 9)
        _beat(c, 3, t, epoch=1, end=t * 8)
    _beat(c, 2, 2000, epoch=1, end=8100)
    info = _beat(c, 3, 2500, epoch=1, end=7300)                     # master silent for 1.6 s
    assert info["masterId"] != 1 and info["epoch"] == 2 and info["pending"]
    assert info["masterId"] == 2                                    # broker 2 reported the higher end
    info = _beat(c, 2, 2600, epoch=2, end=8100, start=8100)
    assert info["history"] == [[1, 0], [2, 8100]] and not info["pending"]
    # the snapshot keeps epochs across a restart, and everybody gets a full timeout again
    c2 = Controller(tmp_path / "controller.json", master_timeout_ms=1000)
    c2.load(now_ms=50_000)
    info = _beat(c2, 3, 50_100, epoch=2, end=8100)
    assert info["masterId"] == 2 and info["epoch"] == 2 and info["history"] == [[1, 0], [2, 8100]]


def test_no_election_of_a_slave_known_to_be_behind():
    c = Controller(None, master_timeout_ms=1000)
    _beat(c, 1, 0)
    _beat(c, 1, 1, epoch=1, start=0)
    _beat(c, 2, 100, epoch=1, end=5000)          # broker 2 had everything up to 5000
    _beat(c, 3, 100, epoch=1, end=3000)
    _beat(c, 1, 500, epoch=1, end=5000)
    info = _beat(c, 3, 2000, epoch=1, end=3000)  # master and broker 2 silent: 3 is behind what 2 had
    assert info["masterId"] == 1 and info["epoch"] == 1
    info = _beat(c, 3, 2100, epoch=0, end=9000)  # a broker not following the current epoch is not eligible
    assert info["masterId"] == 1
    unclean = Controller(None, master_timeout_ms=1000, elect_unclean=True)
    unclean.sets = c.sets
    info = _beat(unclean, 3, 2200, epoch=1, end=3000)
    assert info["masterId"] == 3 and info["epoch"] == 2


def test_an_unconfirmed_takeover_is_replaced_and_never_enters_the_history():
    c = Controller(None, master_timeout_ms=1000)
    _beat(c, 1, 0)
    _beat(c, 1, 1, epoch=1, start=0)
    _beat(c, 2, 10, epoch=1, end=100)
    _beat(c, 3, 10, epoch=1, end=100)
    _beat(c, 2, 1400, epoch=1, end=100)
    info = _beat(c, 3, 1500, epoch=1, end=100)   # master 1 silent: 2 elected (lower id on a tie)
    assert info["masterId"] == 2 and info["pending"]
    _beat(c, 3, 2000, epoch=1, end=100)
    info = _beat(c, 3, 2600, epoch=1, end=100)   # 2 never confirmed: 3 takes epoch 3
    assert info["masterId"] == 3 and info["epoch"] == 3 and info["pending"]
    info = _beat(c, 3, 2700, epoch=3, end=100, start=100)
    assert info["history"] == [[1, 0], [3, 100]]


def test_ha_chunks_end_on_record_boundaries(tmp_path):
    """A slave's log must always end between records: a new master's epoch starts there."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent.parent / "client"))
    from cluster import small_store

    from rocketq.broker.ha import MAX_CHUNK, _whole_records
    from rocketq.common.message import Message
    from rocketq.store import MessageStore

    with MessageStore(small_store(tmp_path / "s")) as store:
        ends = set()
        for i in range(3000):
            r = store.put_message(Message(topic="T", body=b"x" * (300 + i % 97), queue_id=0))
            ends.add(r.physical_offset + r.wrote_bytes)
        big = store.put_message(Message(topic="T", body=b"y" * (MAX_CHUNK + 10), queue_id=0))
        cl, end = store.commitlog, store.max_physical_offset()
        assert end > MAX_CHUNK
        size = _whole_records(cl, 0, MAX_CHUNK, end)
        assert 0 < size <= MAX_CHUNK and size in ends
        size = _whole_records(cl, big.physical_offset, MAX_CHUNK, end - big.physical_offset)
        assert size == big.wrote_bytes                           # one record larger than a chunk goes whole


def test_no_election_on_a_slave_report_older_than_the_masters_death():
    """A slave's report from before the master died may be behind what it received since: the election
    waits until every live follower reported after the master's last possible write (its last heartbeat
    plus one heartbeat interval), so the follower that really has the most is picked."""
    c = Controller(None, master_timeout_ms=1500)
    _beat(c, 1, 0)                                            # master of epoch 1
    _beat(c, 1, 100, epoch=1, end=0, start=0)
    _beat(c, 2, 200, epoch=1, end=500)
    _beat(c, 3, 300, epoch=1, end=500)
    _beat(c, 1, 1000, epoch=1, end=1020)                      # the master's last heartbeat
    _beat(c, 2, 1100, epoch=1, end=1000)                      # 2's last report is from before more arrived
    _beat(c, 3, 1900, epoch=1, end=1010)
    # the master died before 2000; at 2580 it is overdue, but neither slave has reported since 2000
    s = c.sets[("C", "broker-a")]
    assert not c.check(s, 2580) and s.master_id == 1
    _beat(c, 3, 2585, epoch=1, end=1010)
    assert s.master_id == 1                                   # still waiting for 2 (alive until 2600)
    _beat(c, 2, 2590, epoch=1, end=1020)                      # 2 has everything the master acknowledged
    assert s.master_id == 2 and s.epoch == 2
