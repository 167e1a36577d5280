"""``report.md`` (tables with min / median / max and rocketq / best peer) and PNG charts."""

from __future__ import annotations

from pathlib import Path

ROCKETQ = "rocketq (remoting)"
HIGHER_IS_BETTER = {"msgs/s", "MB/s"}
SCENARIOS = [("one", "produce, one message per round trip"), ("fast", "produce, best batching / pipelining"),
             ("consume", "consume a backlog with acks / offset commits"), ("e2e", "end-to-end latency at a fixed rate"),
             ("sync64", "sync durability (fsync before ack), 64 concurrent producers")]


def _fmt(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def write_report(results: dict, out: Path) -> None:
    rows: dict[tuple, dict[str, list[float]]] = {}
    for c in results["cells"]:
        if c["min_median_max"]:
            rows.setdefault((c["scenario"], c["size"], c["metric"]), {})[c["system"]] = c["min_median_max"]
    lines = ["# rocketq beside its peers", "",
             f"Machine: {results['machine']}. Each scenario ran {results['runs']} times per system, "
             "interleaved (A B C A B C ...); cells are min / median / max. The ratio is rocketq's median over "
             "the best peer's median (above 1 is better for throughput, below 1 for latency and cost).", "",
             "## Durability per system and mode", ""]
    for name, d in results["durability"].items():
        lines.append(f"- **{name}**: async mode - {d['async']}; sync mode - {d['sync'] or 'none (not in the sync scenario)'}")
    for name, why in results["skipped"].items():
        lines.append(f"- **{name}**: not run - {why}")
    lines += ["", f"Settings: {results['settings']}", ""]
    for scenario, title in SCENARIOS:
        keys = sorted(k for k in rows if k[0] == scenario)
        if not keys:
            continue
        systems = sorted({s for k in keys for s in rows[k]}, key=lambda s: (s != ROCKETQ, s))
        lines += [f"## {title}", "", "| size | metric | " + " | ".join(systems) + " | rocketq / best peer |",
                  "|---|---|" + "---|" * (len(systems) + 1)]
        for k in keys:
            vals = rows[k]
            cells = [" / ".join(_fmt(v) for v in vals[s]) if s in vals else "-" for s in systems]
            peers = [v[1] for s, v in vals.items() if s != ROCKETQ]
            ratio = "-"
            if ROCKETQ in vals and peers:
                best = max(peers) if k[2] in HIGHER_IS_BETTER else min(peers)
                ratio = f"{vals[ROCKETQ][1] / best:.2f}" if best else "-"
            lines.append(f"| {k[1]} B | {k[2]} | " + " | ".join(cells) + f" | {ratio} |")
        lines.append("")
    lines += ["Charts: `throughput.png` (batched produce and consume, medians), `latency_cdf.png` "
              "(one message per round trip, last run).", ""]
    (out / "report.md").write_text("\n".join(lines))
    _charts(rows, results.get("latency_samples_ms") or {}, out)


def _charts(rows: dict, samples: dict, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, scenario in zip(axes, ("fast", "consume")):
        keys = sorted(k for k in rows if k[0] == scenario and k[2] == "msgs/s")
        systems = sorted({s for k in keys for s in rows[k]})
        width = 0.8 / max(1, len(systems))
        for i, s in enumerate(systems):
            ax.bar([j + i * width for j in range(len(keys))], [rows[k].get(s, [0, 0, 0])[1] for k in keys],
                   width, label=s)
        ax.set_xticks([j + width * (len(systems) - 1) / 2 for j in range(len(keys))], [f"{k[1]} B" for k in keys])
        ax.set_title(dict(SCENARIOS)[scenario])
        ax.set_ylabel("messages/s (median)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "throughput.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 4))
    for label, lat in sorted(samples.items()):
        ax.plot(lat, [i / max(1, len(lat) - 1) for i in range(len(lat))], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("latency, ms (one message per round trip)")
    ax.set_ylabel("fraction of sends")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "latency_cdf.png", dpi=110)
    plt.close(fig)
