"""`rocketq bench compare --quick`: runs rocketq and whichever peers are installed, writes the report."""

import json


def test_compare_quick_writes_report_json_and_charts(invoke, tmp_path):
    out = tmp_path / "cmp"
    res = invoke("bench", "compare", "--quick", "--runs", "1", "--out", out)
    assert res.exit_code == 0, res.output
    results = json.loads((out / "results.json").read_text())
    systems = {c["system"] for c in results["cells"]}
    assert "rocketq (remoting)" in systems
    report = (out / "report.md").read_text()
    assert "rocketq / best peer" in report and "Durability per system" in report
    assert (out / "throughput.png").stat().st_size > 1000 and (out / "latency_cdf.png").stat().st_size > 1000
