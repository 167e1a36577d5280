"""The compare report: the ratio takes rocketq's best protocol per row and names it; the durability
section shows the measured sync calls next to the documented mode."""

from rocketq.bench.compare.report import ratio_cell, write_report


def test_ratio_takes_rocketqs_best_protocol_for_throughput_and_names_it():
    vals = {"rocketq (remoting)": [1, 4000, 5000], "rocketq (gRPC)": [1, 800, 900],
            "Redis Streams": [1, 8000, 9000], "NATS JetStream": [1, 7000, 7500]}
    assert ratio_cell(vals, "msgs/s") == "0.50 (remoting)"


def test_ratio_takes_the_lowest_latency_and_cost():
    vals = {"rocketq (remoting)": [0, 3.0, 4], "rocketq (gRPC)": [0, 2.0, 3], "Redis Streams": [0, 0.5, 1],
            "NATS JetStream": [0, 1.0, 1]}
    assert ratio_cell(vals, "p99") == "4.00 (gRPC)"
    assert ratio_cell(vals, "cpu s / M msgs") == "4.00 (gRPC)"


def test_a_capped_protocol_takes_no_part_in_count_dependent_ratios():
    vals = {"rocketq (remoting)": [0, 300, 0], "rocketq (gRPC)": [0, 100, 0], "Redis Streams": [0, 50, 0]}
    assert ratio_cell(vals, "peak RSS MB", capped=frozenset({"rocketq (gRPC)"})) == "6.00 (remoting)"
    assert ratio_cell(vals, "cpu s / M msgs", capped=frozenset({"rocketq (gRPC)"})) == "2.00 (gRPC)"


def test_no_ratio_without_a_peer_or_without_rocketq():
    assert ratio_cell({"rocketq (remoting)": [1, 2, 3]}, "msgs/s") == "-"
    assert ratio_cell({"Redis Streams": [1, 2, 3]}, "msgs/s") == "-"


def _results():
    mmm = [1.0, 2.0, 3.0]
    cells = [{"system": s, "size": 128, "scenario": sc, "metric": m, "min_median_max": mmm}
             for s in ("rocketq (remoting)", "rocketq (gRPC)", "Redis Streams")
             for sc, m in (("one", "msgs/s"), ("fast", "msgs/s"), ("consume", "msgs/s"), ("sync64", "p99"))]
    return {
        "machine": {"cpus": 2}, "runs": 1, "skipped": {"NATS JetStream": "nats-server is not installed"},
        "systems": ["rocketq (remoting)", "rocketq (gRPC)", "Redis Streams"],
        "durability": {"rocketq (remoting)": {"async": "ASYNC_FLUSH", "sync": "SYNC_FLUSH"},
                       "rocketq (gRPC)": {"async": "ASYNC_FLUSH", "sync": "SYNC_FLUSH"},
                       "Redis Streams": {"async": "everysec", "sync": None}},
        "durability_check": {
            "rocketq (remoting)": {"async": {"acks": 2000, "calls": {"fdatasync": 9}, "syncs": 9,
                                             "syncs_per_ack": 0.0045, "syncs_every_ack": False},
                                   "sync": {"acks": 2000, "calls": {"fdatasync": 2004}, "syncs": 2004,
                                            "syncs_per_ack": 1.002, "syncs_every_ack": True}},
            "rocketq (gRPC)": {"async": {"not_measured": "strace is not installed"},
                               "sync": {"not_measured": "strace is not installed"}},
            "Redis Streams": {"async": {"acks": 2000, "calls": {}, "syncs": 0, "syncs_per_ack": 0.0,
                                        "syncs_every_ack": False}}},
        "sync_scenario": ["rocketq (remoting)", "rocketq (gRPC)"],
        "notes": {"rocketq (gRPC)": "the official client, no batch send"},
        "settings": {"e2e_rate": 5000, "e2e_low_rate": 500, "verify_n": 2000},
        "cells": cells, "latency_samples_ms": {"rocketq (remoting) 128 B": [0.1, 0.2, 0.3]},
    }


def test_report_shows_measured_syncs_beside_the_documented_mode(tmp_path):
    write_report(_results(), tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "| rocketq (remoting) | sync | SYNC_FLUSH | **1** (2,004 fdatasync / 2,000 acks) | yes |" in report
    assert "| rocketq (remoting) | async | ASYNC_FLUSH | **0.0045** (9 fdatasync / 2,000 acks) | - |" in report
    assert "| rocketq (gRPC) | sync | SYNC_FLUSH | not measured: strace is not installed | yes (as documented; not measured) |" in report
    assert "| Redis Streams | sync | none (no mode syncs before the ack) | - | no |" in report
    assert "| NATS JetStream | - | not run: nats-server is not installed | - | - |" in report
    assert "- **rocketq (gRPC)**: the official client, no batch send." in report
    assert "| size | metric | rocketq (remoting) | rocketq (gRPC) | Redis Streams | rocketq / best peer |" in report
    assert (tmp_path / "throughput.png").stat().st_size > 1000


def test_a_report_without_the_durability_checks_send_count_still_writes(tmp_path):
    # results.json from before verify_n was a setting (or written by hand) lack it: the report says so
    results = _results()
    del results["settings"]["verify_n"]
    write_report(results, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "while ? messages were sent one at a time" in report
    write_report(_results(), tmp_path)
    assert "while 2,000 messages were sent one at a time" in (tmp_path / "report.md").read_text()
