"""The per-send cost tools against a real broker: ``batch_cpu --one`` (a ``rocketq serve`` and compare's
one-at-a-time sends, the broker's CPU per send), ``client_cpu`` (the same, the client's CPU per send) and
``send_handler_bench`` (frames through a broker in process)."""

import asyncio
import json

import pytest

from rocketq.bench import batch_cpu, client_cpu, send_handler_bench


def test_batch_cpu_one_row_reports_the_broker_cpu_per_send(capsys):
    batch_cpu.main(["--one", "--size", "128", "--messages", "200"])
    (row,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["row"] == "one" and row["msgs"] == 200 and row["msgs_per_s"] > 0
    assert 0 < row["p50_ms"] <= row["p99_ms"] and row["cpu_us_per_send"] > 0


def test_batch_cpu_sync_row_reports_both_sides_cpu_and_runs_against_async_flush_too(capsys):
    batch_cpu.main(["--sync", "--size", "128", "--messages", "256", "--threads"])
    batch_cpu.main(["--sync", "--async-flush", "--size", "128", "--messages", "256"])
    sync, no_wait = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sync["row"] == "sync64" and no_wait["row"] == "sync64-async-flush"
    for row in (sync, no_wait):
        assert row["msgs"] == 256 and row["broker_us_per_msg"] > 0 and row["client_us_per_msg"] > 0
    assert sync["fsyncs"] > 0 and sync["sends_per_fsync"] >= 1 and sync["thread_cpu_s"]
    assert "fsyncs" not in no_wait            # no group commit under ASYNC_FLUSH


def test_batch_cpu_refuses_two_rows_at_once(capsys):
    with pytest.raises(SystemExit) as exc:
        batch_cpu.main(["--one", "--sync"])
    assert exc.value.code == 2 and "pick one" in capsys.readouterr().err


def test_client_cpu_reports_the_client_cpu_per_send_alone_and_concurrent(capsys, tmp_path):
    import pstats
    profile = tmp_path / "client.prof"
    client_cpu.main(["--size", "128", "--messages", "200", "--concurrency", "1", "--concurrency", "8",
                     "--profile", str(profile)])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["concurrency"], r["msgs"], r["sync"]) for r in rows] == [(1, 200, False), (8, 200, False)]
    assert all(r["client_cpu_us_per_send"] > 0 and r["msgs_per_s"] > 0 for r in rows)
    assert any("send_request" in func for (_file, _line, func) in pstats.Stats(str(profile)).stats)


def test_send_handler_bench_reports_wall_and_cpu_per_request():
    result = asyncio.run(send_handler_bench.measure(300, 2, 128))
    assert result["rounds"] == 2 and result["body_bytes"] == 128
    assert 0 < result["best_us"] <= result["median_us"] and 0 <= result["best_cpu_us"] <= result["median_cpu_us"]


def test_compare_runs_only_the_rows_asked_for(tmp_path):
    """``bench compare --rows one``: a real rocketq serve per size, the one-per-round-trip row and nothing after it."""
    from rocketq.bench.compare.runner import run_compare
    results = run_compare(runs=1, out_dir=tmp_path, only=("rocketq (remoting)",), tools=False, rows=("one",),
                          one_n=50, verify_n=20)
    assert results["failures"] == []
    cells = [c for c in results["cells"] if c["system"] == "rocketq (remoting)"]
    assert {c["scenario"] for c in cells} == {"one"} and {c["size"] for c in cells} == {128, 1024}
    assert results["settings"]["rows"] == ["one"] or results["settings"]["rows"] == ("one",)
