"""docs/grafana/rocketq-dashboard.json: valid JSON whose queries select only series the broker exports."""

import json
import re
from pathlib import Path

import rocketq.broker.metrics as metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "rocketq-dashboard.json"
SERIES = re.compile(r"\b(rocket(?:mq|q)_[a-z_]+)")
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


def test_every_series_the_dashboard_queries_is_exported():
    dash = json.loads(DASHBOARD.read_text())
    exported = set(SERIES.findall(Path(metrics.__file__).read_text()))
    queried = {SERIES.search(v).group(1) for p in dash["panels"] for t in p["targets"] for v in [t["expr"]]}
    queried |= {name for p in dash["panels"] for t in p["targets"] for name in SERIES.findall(t["expr"])}
    missing = {q for q in queried if q not in exported and not any(
        q.endswith(s) and q[: -len(s)] in exported for s in HISTOGRAM_SUFFIXES)}
    assert not missing, missing
    assert len(dash["panels"]) >= 15 and dash["uid"] == "rocketq-broker"
