"""``rocketq store verify / dump / rebuild / repair`` against small real stores."""

import json

from conftest import MESSAGES, flip_byte, log_end

BODY_FIELD = 84 + 4          # the record's BODY starts after the fixed header and its int32 length


def test_verify_good_store(invoke, small_store):
    path, _ = small_store
    res = invoke("store", "verify", path)
    assert res.exit_code == 0, res.output
    assert "OK" in res.stdout and f"{MESSAGES:,}" in res.stdout and "problem" not in res.stdout


def test_verify_names_file_and_offset_of_a_flipped_body_byte(invoke, small_store):
    path, results = small_store
    victim = results[7].physical_offset
    segment = flip_byte(path, victim + BODY_FIELD + 2)
    res = invoke("store", "verify", path)
    assert res.exit_code == 1
    problems = [line for line in res.stdout.splitlines() if line.startswith("problem:")]
    assert len(problems) == 1
    assert segment in problems[0] and f"commitlog offset {victim}" in problems[0] and "CRC" in problems[0]
    assert f"--truncate-at {victim}" in res.stdout          # the repair it suggests


def test_verify_json_report(invoke, small_store):
    path, results = small_store
    flip_byte(path, results[3].physical_offset + BODY_FIELD)
    res = invoke("store", "verify", path, "--json")
    assert res.exit_code == 1
    report = json.loads(res.stdout)
    assert report["ok"] is False and report["path"] == str(path)
    assert f"commitlog offset {results[3].physical_offset}" in report["problems"][0]


def test_dump_prints_one_json_object_per_record(invoke, small_store):
    path, results = small_store
    res = invoke("store", "dump", path)
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["body"] for r in records] == ["body-%d" % i for i in range(MESSAGES)]
    assert records[3]["msg_id"] == results[3].msg_id and records[3]["properties"]["KEYS"] == "k3"


def test_dump_from_offset(invoke, small_store):
    path, results = small_store
    res = invoke("store", "dump", path, "--from-offset", results[25].physical_offset)
    assert res.exit_code == 0, res.output
    assert [json.loads(line)["queue_offset"] for line in res.stdout.splitlines()] == [25, 26, 27, 28, 29]


def test_rebuild(invoke, small_store):
    path, _ = small_store
    res = invoke("store", "rebuild", path)
    assert res.exit_code == 0, res.output
    assert f"from {MESSAGES} records" in res.stdout
    assert invoke("store", "verify", path).exit_code == 0


def test_repair_says_what_it_drops_and_changes_nothing_when_declined(invoke, small_store):
    path, results = small_store
    cut = results[7].physical_offset
    flip_byte(path, cut + BODY_FIELD)
    res = invoke("store", "repair", path, "--truncate-at", cut, input="n\n")
    assert res.exit_code == 1
    dropped = log_end(results) - cut
    assert f"{dropped:,} bytes ({MESSAGES - 7} records)" in res.stderr
    assert "nothing was changed" in res.stderr
    assert invoke("store", "verify", path).exit_code == 1          # still damaged


def test_repair_with_yes_cuts_and_rebuilds(invoke, small_store):
    path, results = small_store
    cut = results[7].physical_offset
    flip_byte(path, cut + BODY_FIELD)
    res = invoke("store", "repair", path, "--truncate-at", cut, "--yes")
    assert res.exit_code == 0, res.output
    assert f"dropped {log_end(results) - cut:,} bytes" in res.stdout and "from the 7 records kept" in res.stdout
    assert invoke("store", "verify", path).exit_code == 0
    dumped = invoke("store", "dump", path).stdout.splitlines()
    assert [json.loads(line)["body"] for line in dumped] == ["body-%d" % i for i in range(7)]


def test_repair_refuses_an_offset_inside_a_record(invoke, small_store):
    path, results = small_store
    inside = results[5].physical_offset + 10
    res = invoke("store", "repair", path, "--truncate-at", inside, "--yes")
    assert res.exit_code == 1
    assert f"inside the record at {results[5].physical_offset}" in res.stderr
    assert invoke("store", "verify", path).exit_code == 0           # untouched


def test_repair_at_the_end_of_the_log_drops_nothing(invoke, small_store):
    path, results = small_store
    res = invoke("store", "repair", path, "--truncate-at", log_end(results))
    assert res.exit_code == 0, res.output
    assert "nothing at or after" in res.stdout


def test_repair_past_a_damaged_header_counts_bytes_to_the_end_of_the_data(invoke, small_store):
    path, results = small_store
    cut = results[7].physical_offset
    flip_byte(path, cut + 5)                                        # the record's magic
    refused = invoke("store", "repair", path, "--truncate-at", results[9].physical_offset, "--yes")
    assert refused.exit_code == 1 and f"stops parsing at offset {cut}" in refused.stderr
    res = invoke("store", "repair", path, "--truncate-at", cut, "--yes")
    assert res.exit_code == 0, res.output
    assert f"dropped {log_end(results) - cut:,} bytes" in res.stdout and f"stops parsing at offset {cut}" in res.stdout
    assert invoke("store", "verify", path).exit_code == 0
