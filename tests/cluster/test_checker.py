"""The run checker finds each kind of problem it claims to, and passes a clean run with redeliveries."""

import pytest

from checker import Ledger, Place


def _run() -> Ledger:
    led = Ledger("unit", seed=7)
    for i in range(4):
        led.attempt(f"k{i}", f"body{i}".encode(), shard="s")
        led.acked(f"k{i}", Place("T", "broker-a", 0, i))
    return led


def test_clean_run_with_redelivery_passes():
    led = _run()
    for i in (0, 1, 2, 1, 2, 3):                     # a consumer restarted from offset 1
        led.consumed(f"k{i}", f"body{i}".encode(), Place("T", "broker-a", 0, i))
    led.attempt("failed", b"x")                      # failed send, consumed anyway: allowed
    led.consumed("failed", b"x", Place("T", "broker-b", 1, 0))
    led.assert_ok(orderly={"T"})
    assert not led.missing()


def test_lost_invented_misplaced_and_disorder_are_reported(tmp_path):
    led = _run()
    log = tmp_path / "broker.log"
    log.write_text("the broker said something\n")
    led.log_file(log)
    led.note("SIGKILL broker-a")
    led.consumed("k0", b"body0", Place("T", "broker-a", 0, 0))
    led.consumed("k2", b"body2", Place("T", "broker-a", 0, 2))
    led.consumed("k1", b"body1", Place("T", "broker-a", 0, 1))       # first delivery of 1 after 2
    led.consumed("ghost", b"boo", Place("T", "broker-a", 0, 9))       # never sent
    led.consumed("k0", b"other", Place("T", "broker-a", 0, 0))        # same key, other body
    led.consumed("k2", b"body2", Place("T", "broker-b", 0, 2))        # sent once, found elsewhere
    problems = led.problems(orderly={"T"})
    assert set(problems) == {"lost", "invented", "misplaced", "out of order"}
    assert problems["lost"] == ["k3 acked at T@broker-a#0:3"]
    assert len(problems["invented"]) == 2
    with pytest.raises(AssertionError) as info:
        led.assert_ok(orderly={"T"})
    text = str(info.value)
    assert "seed 7" in text and "SIGKILL broker-a" in text and "the broker said something" in text
    assert "out of order" not in "\n".join(f"{k}" for k in led.problems())   # only for orderly topics


def test_acks_stored_out_of_send_order_are_reported():
    led = Ledger()
    for key, offset in (("a", 5), ("b", 4)):
        led.attempt(key, key.encode(), shard="order-1")
        led.acked(key, Place("T", "broker-a", 0, offset))
        led.consumed(key, key.encode(), Place("T", "broker-a", 0, offset))
    assert any("sent after a" in p for p in led.problems(orderly={"T"})["out of order"])


def test_same_key_with_another_body_is_a_test_bug():
    led = Ledger()
    led.attempt("k", b"1")
    with pytest.raises(ValueError, match="unique keys"):
        led.attempt("k", b"2")
