"""``report.md`` (tables with min / median / max and rocketq / best peer) and PNG charts.

Rows are (scenario, size, metric); columns are the systems, rocketq's protocols first.  rocketq has
a column per protocol; the ratio column takes, on each row, rocketq's best protocol over the best
peer, and names the protocol it took.
"""

from __future__ import annotations

import math
from pathlib import Path

from rocketq.bench.compare.fsync_check import SYNC_CALLS, SYNCS_PER_ACK_FOR_SYNC

HIGHER_IS_BETTER = {"msgs/s", "MB/s"}
CHART_PANELS = {"fast": "produce, best batching / pipelining (Python clients)",
                "consume": "consume a backlog with acks / offset commits (Python clients)",
                "rmq_producer": "RocketMQ benchmark Producer, 64 threads x 1 message",
                "rmq_batch": "RocketMQ benchmark BatchProducer, 64 threads x 16 messages"}
COUNT_DEPENDENT = {"peak RSS MB"}        # grows with the messages written: a capped system is not comparable


def scenarios(settings: dict) -> list[tuple[str, str]]:
    e2e_low = settings.get("e2e_low_rate") or 0
    return [("one", "produce, one message per round trip"), ("fast", "produce, best batching / pipelining"),
            ("consume", "consume a backlog with acks / offset commits"),
            ("e2e", f"end-to-end latency at {settings.get('e2e_rate', 0):,} msgs/s"),
            ("e2e_low", f"end-to-end latency at {e2e_low:,} msgs/s"),
            ("sync64", "sync durability (modes that sync before every ack, see above), 64 concurrent producers"),
            *TOOL_SCENARIOS]


# the field's own load tools (rmq_tools, kafka_tools); a row holds only the systems that speak the tool's protocol
_RMQ = "RocketMQ's benchmark workload (rocketq.bench.RmqBenchmark, rocketmq-client 5.3.3, remoting)"
TOOL_SCENARIOS = [
    ("rmq_producer", f"{_RMQ}: Producer, 64 threads, one message per sync send (producer.sh's default)"),
    ("rmq_producer_keys", f"{_RMQ}: Producer with keys on (-k true: the broker indexes every message)"),
    ("rmq_batch", f"{_RMQ}: BatchProducer, 64 threads, 16 messages per send (latency per send)"),
    ("rmq_consumer", f"{_RMQ}: Consumer, push, 20 threads, reading what the two producers stored"),
    ("rmq_producer_sync", f"{_RMQ}: Producer under sync durability (SYNC_FLUSH)"),
    ("rmq_batch_sync", f"{_RMQ}: BatchProducer under sync durability (SYNC_FLUSH)"),
    ("kafka_producer_perf", "kafka-producer-perf-test (ProducerPerformance 4.4.0, acks=all, --throughput -1)"),
    ("kafka_consumer_perf", "kafka-consumer-perf-test (ConsumerPerformance 4.4.0, fetch.nMsg.sec)"),
    ("kafka_producer_perf_sync", "kafka-producer-perf-test under flush.messages=1"),
]


def is_rocketq(system: str) -> bool:
    return system.startswith("rocketq")


def protocol(system: str) -> str:
    """``rocketq (gRPC)`` -> ``gRPC``."""
    return system[system.find("(") + 1:system.rfind(")")] if "(" in system else system


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def ratio_cell(vals: dict[str, list[float]], metric: str, *, capped: frozenset[str] = frozenset()) -> str:
    """rocketq's best protocol's median over the best peer's median, and which protocol.  On a
    count-dependent metric, systems that ran a *capped* count of messages do not take part."""
    vals = {s: v for s, v in vals.items() if metric not in COUNT_DEPENDENT or s not in capped}
    ours = {s: v[1] for s, v in vals.items() if is_rocketq(s)}
    peers = [v[1] for s, v in vals.items() if not is_rocketq(s)]
    if not ours or not peers:
        return "-"
    pick = max if metric in HIGHER_IS_BETTER else min
    best_ours, best_peer = pick(ours, key=ours.get), pick(peers)
    return f"{ours[best_ours] / best_peer:.2f} ({protocol(best_ours)})" if best_peer else "-"


def _measured(check: dict | None) -> str:
    if not check:
        return "not measured"
    if "not_measured" in check:
        return f"not measured: {check['not_measured']}"
    calls = ", ".join(f"{check['calls'][c]:,} {c}" for c in SYNC_CALLS if check["calls"].get(c))
    return f"**{check['syncs_per_ack']:.3g}** ({calls or 'no sync calls'} / {check['acks']:,} acks)"


def _joined(in_sync: bool, check: dict | None) -> str:
    if not in_sync:
        return "no"
    return "yes" if check and "not_measured" not in check else "yes (as documented; not measured)"


def durability_lines(results: dict) -> list[str]:
    checks, in_sync = results.get("durability_check", {}), set(results.get("sync_scenario", []))
    n = results.get("settings", {}).get("verify_n")
    sends = f"{n:,}" if n else "?"                  # results written before verify_n was a setting lack it
    lines = ["## Durability per system and mode", "",
             f"Checked, untimed, before the runs: a fresh server per system and mode, warmed, then "
             f"`strace -f -c -e trace={','.join(SYNC_CALLS)}` attached to all its processes and threads while "
             f"{sends} messages were sent one at a time, each waiting for its acknowledgement. With one "
             "message in flight, a server that syncs before acknowledging makes at least one sync call per "
             f"ack; at or above {SYNCS_PER_ACK_FOR_SYNC} a mode counts as syncing before every ack (the count "
             "cannot show whether the sync came before or after the reply).", "",
             "| system | mode | an acknowledgement means (documented) | sync calls per ack (measured) | "
             "in the sync scenario |", "|---|---|---|---|---|"]
    for name, doc in results["durability"].items():
        for mode in ("async", "sync"):
            if not doc.get(mode):
                continue
            check = checks.get(name, {}).get(mode)
            joined = "-" if mode == "async" else _joined(name in in_sync, check)
            lines.append(f"| {name} | {mode} | {doc[mode]} | {_measured(check)} | {joined} |")
        if not doc.get("sync"):
            lines.append(f"| {name} | sync | none (no mode syncs before the ack) | - | no |")
    for name, why in results["skipped"].items():
        lines.append(f"| {name} | - | not run: {why} | - | - |")
    return lines + [""]


def write_report(results: dict, out: Path) -> None:
    rows: dict[tuple, dict[str, list[float]]] = {}
    for c in results["cells"]:
        if c["min_median_max"]:
            rows.setdefault((c["scenario"], c["size"], c["metric"]), {})[c["system"]] = c["min_median_max"]
    order = results.get("systems") or sorted({c["system"] for c in results["cells"]},
                                              key=lambda s: (not is_rocketq(s), s))
    lines = ["# rocketq beside its peers", "",
             f"Machine: {results['machine']}. Each scenario ran {results['runs']} times per system, "
             "interleaved (A B C A B C ...); cells are min / median / max. The ratio is the median of rocketq's "
             "best protocol on that row (named) over the best peer's median (above 1 is better for throughput, "
             "below 1 for latency and cost).", ""]
    lines += durability_lines(results)
    if results.get("versions"):
        lines += ["Versions: " + "; ".join(f"{name} {v}" for name, v in results["versions"].items()) + ".", ""]
    if results.get("failures"):
        lines += ["## Runs that failed (their cells are missing)", ""]
        lines += [f"- {e}" for e in results["failures"]] + [""]
    if results.get("notes"):
        lines += ["## How each system is driven, where it differs", ""]
        lines += [f"- **{name}**: {note}." for name, note in results["notes"].items()] + [""]
    lines += [f"Settings: {results['settings']}", ""]
    if results.get("security"):
        lines += [f"Security: {results['security']}", ""]
    for scenario, title in scenarios(results["settings"]):
        keys = sorted(k for k in rows if k[0] == scenario)
        if not keys:
            continue
        systems = [s for s in order if any(s in rows[k] for k in keys)]
        lines += [f"## {title}", "", "| size | metric | " + " | ".join(systems) + " | rocketq / best peer |",
                  "|---|---|" + "---|" * (len(systems) + 1)]
        for k in keys:
            vals = rows[k]
            cells = [" / ".join(_fmt(v) for v in vals[s]) if s in vals else "-" for s in systems]
            capped = frozenset(s for s, caps in results.get("caps", {}).items() if scenario in caps)
            lines.append(f"| {k[1]} B | {k[2]} | " + " | ".join(cells) + f" | {ratio_cell(vals, k[2], capped=capped)} |")
        lines.append("")
    lines += ["Charts: `throughput.png` (batched produce, backlog consume and the RocketMQ benchmark producers, medians, "
              "log scale), `latency_cdf.png` "
              "(one message per round trip, last run).", ""]
    (out / "report.md").write_text("\n".join(lines))
    _charts(rows, order, results.get("latency_samples_ms") or {}, out)


def _charts(rows: dict, order: list[str], samples: dict, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, grid = plt.subplots(2, 2, figsize=(11, 8.4))
    axes = grid.flatten()
    for ax, scenario in zip(axes, CHART_PANELS):
        keys = sorted(k for k in rows if k[0] == scenario and k[2] == "msgs/s")
        systems = [s for s in order if any(s in rows[k] for k in keys)]
        width = 0.8 / max(1, len(systems))
        for i, s in enumerate(systems):
            ax.bar([j + i * width for j in range(len(keys))], [rows[k].get(s, [0, 0, 0])[1] for k in keys],
                   width, label=s)
        ax.set_xticks([j + width * (len(systems) - 1) / 2 for j in range(len(keys))], [f"{k[1]} B" for k in keys])
        ax.set_title(CHART_PANELS[scenario], fontsize=9)
        ax.set_yscale("log")
        lowest = min((rows[k][s][1] for k in keys for s in systems if s in rows[k] and rows[k][s][1] > 0), default=1)
        ax.set_ylim(bottom=10 ** math.floor(math.log10(lowest)))       # every bar starts from the same decade
        ax.set_ylabel("messages/s (median, log scale)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=max(1, min(4, len(labels))), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, lat in sorted(samples.items()):
        ax.plot(lat, [i / max(1, len(lat) - 1) for i in range(len(lat))], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("latency, ms (one message per round trip)")
    ax.set_ylabel("fraction of sends")
    if samples:                       # a run without the one-per-round-trip row has no curve to name
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "latency_cdf.png", dpi=110)
    plt.close(fig)
