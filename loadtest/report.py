"""Summaries, `results.json`, a Markdown table, and plots in the form of DS2's Fig. 5 and 6.

One load level (a number of concurrent streams) summarises to exactly the keys of
`results.json`: latencies are end-of-utterance latencies of the utterances that got a
final, in ms; `batch_sizes` maps a batch size to the number of model steps of that size
the server ran under the load (from its /metrics). Whatever else is worth keeping (failure
reasons, partial gaps, every utterance) goes to `details.json`, so `results.json` stays
exactly the documented shape.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadtest.client import UtteranceResult
from loadtest.wer import wer

RESULT_KEYS = (
    "streams",
    "utterances",
    "p50_ms",
    "p90_ms",
    "p98_ms",
    "p99_ms",
    "max_ms",
    "first_partial_p50_ms",
    "wer",
    "failures",
    "batch_sizes",
)
FIG5, FIG6, COMPARE_FIG = "batch_sizes.png", "latency.png", "compare_latency.png"


@dataclass
class Level:
    """Everything measured at one concurrency."""

    streams: int
    utterances: list[UtteranceResult]
    batch_sizes: dict[str, int] | None  # None when /metrics could not be read
    wall_s: float  # how long the level ran
    notes: list[str] = field(default_factory=list)  # e.g. "/metrics unreachable"
    # the load generator's own process CPU time over the level: it shares the machine with
    # the server when both run on one host, so this says how much of the CPU it took
    loadgen_cpu_s: float | None = None
    # end-of-utterance latency percentiles from the server's histogram ("p50", "p98"), ms
    server_ms: dict[str, float | None] = field(default_factory=dict)

    @property
    def loadgen_cpu_share(self) -> float | None:
        """The load generator's CPU time as a share of all cores' time over the level."""
        if self.loadgen_cpu_s is None or self.wall_s <= 0:
            return None
        return self.loadgen_cpu_s / (self.wall_s * (os.cpu_count() or 1))


def percentile(values: Sequence[float], q: float) -> float | None:
    return float(np.percentile(values, q)) if values else None


def summarize(level: Level) -> dict[str, Any]:
    """One `results.json` entry."""
    ok = [u for u in level.utterances if u.ok]
    latencies = [u.eou_latency_ms for u in ok if u.eou_latency_ms is not None]
    first = [u.first_partial_ms for u in ok if u.first_partial_ms is not None]
    summary = {
        "streams": level.streams,
        "utterances": len(ok),
        "p50_ms": _round(percentile(latencies, 50)),
        "p90_ms": _round(percentile(latencies, 90)),
        "p98_ms": _round(percentile(latencies, 98)),
        "p99_ms": _round(percentile(latencies, 99)),
        "max_ms": _round(max(latencies) if latencies else None),
        "first_partial_p50_ms": _round(percentile(first, 50)),
        "wer": _round(wer((u.reference, u.hypothesis) for u in ok), 4),
        "failures": len(level.utterances) - len(ok),
        "batch_sizes": level.batch_sizes or {},
    }
    assert tuple(summary) == RESULT_KEYS
    return summary


def details(level: Level) -> dict[str, Any]:
    """What `results.json` leaves out: failure reasons, partial gaps, each utterance."""
    ok = [u for u in level.utterances if u.ok]
    gaps = [g for u in ok for g in u.partial_gaps_ms]
    first = [u.first_partial_ms for u in ok if u.first_partial_ms is not None]
    reasons = Counter(u.failure for u in level.utterances if u.failure)
    return {
        "streams": level.streams,
        "wall_s": round(level.wall_s, 2),
        "loadgen_cpu_s": _round(level.loadgen_cpu_s),
        "loadgen_cpu_share": _round(level.loadgen_cpu_share, 4),
        "server_p50_ms": _round(level.server_ms.get("p50")),
        "server_p98_ms": _round(level.server_ms.get("p98")),
        "audio_s": round(sum(u.audio_s for u in ok), 2),  # audio that reached a final
        "failure_reasons": dict(reasons.most_common()),
        "first_partial_p90_ms": _round(percentile(first, 90)),
        "partial_gap_p50_ms": _round(percentile(gaps, 50)),
        "partial_gap_p98_ms": _round(percentile(gaps, 98)),
        "notes": level.notes,
        "utterances": [_utterance(u) for u in level.utterances],
    }


def _utterance(u: UtteranceResult) -> dict[str, Any]:
    record = asdict(u)
    record.pop("partial_gaps_ms")
    record["partials"] = len(u.partial_gaps_ms) + (u.first_partial_ms is not None)
    for key in ("eou_latency_ms", "first_partial_ms", "started", "ended"):
        record[key] = _round(record[key], 3)
    return record


def _round(x: float | None, digits: int = 2) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, digits)


# -- files ----------------------------------------------------------------------------------


def write_report(out: Path, levels: Sequence[Level], meta: dict[str, Any]) -> list[dict[str, Any]]:
    """results.json, details.json, run.json, report.md and the two plots under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    results = [summarize(level) for level in levels]
    _dump(out / "results.json", {"results": results})
    _dump(out / "details.json", {"levels": [details(level) for level in levels]})
    _dump(out / "run.json", meta)
    if can_plot():
        plot_batch_sizes(results, out / FIG5)
        plot_latency({"": results}, out / FIG6)
    (out / "report.md").write_text(markdown(results, [details(lv) for lv in levels], meta))
    return results


def _dump(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n")


def load_results(out: Path) -> list[dict[str, Any]]:
    results = json.loads((out / "results.json").read_text())["results"]
    assert isinstance(results, list)
    return results


def mean_batch(batch_sizes: dict[str, int]) -> float | None:
    """The batch size the average chunk ran in (request-weighted, as in DS2 Fig. 5)."""
    requests = sum(int(b) * n for b, n in batch_sizes.items())
    return sum(int(b) ** 2 * n for b, n in batch_sizes.items()) / requests if requests else None


def markdown(
    results: Sequence[dict[str, Any]], levels: Sequence[dict[str, Any]], meta: dict[str, Any]
) -> str:
    """The report: what ran where, the table, failure reasons, the plots."""
    lines = ["# Load test", ""]
    lines += [f"- {key}: `{value}`" for key, value in meta.items() if not isinstance(value, dict)]
    for key, value in meta.items():
        if isinstance(value, dict):
            lines += [f"- {key}: " + ", ".join(f"{k} `{v}`" for k, v in value.items())]
    lines += ["", table(results), "", load_table(levels), ""]
    for d in levels:
        for reason, count in d["failure_reasons"].items():
            lines.append(f"- {d['streams']} streams: {count} x {reason}")
        lines += [f"- {d['streams']} streams: {note}" for note in d["notes"]]
    lines += ["", *figures(("batch sizes", FIG5), ("latency", FIG6)), ""]
    return "\n".join(lines)


def table(results: Sequence[dict[str, Any]]) -> str:
    head = (
        "| streams | utterances | failures | p50 ms | p90 ms | p98 ms | p99 ms | max ms "
        "| first partial p50 ms | WER | mean batch |"
    )
    rows = [head, "|" + "---:|" * 11]
    for r in results:
        cells = [r["streams"], r["utterances"], r["failures"]]
        cells += [_ms(r[k]) for k in ("p50_ms", "p90_ms", "p98_ms", "p99_ms", "max_ms")]
        cells += [_ms(r["first_partial_p50_ms"])]
        cells += ["-" if r["wer"] is None else f"{100 * r['wer']:.1f}%"]
        batch = mean_batch(r["batch_sizes"])
        cells += ["-" if batch is None else f"{batch:.2f}"]
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(rows)


def load_table(levels: Sequence[dict[str, Any]]) -> str:
    """Per level (from `details`): the load generator's share of the machine's CPU, and the
    server's own latency percentiles next to the clients' (the gap is network and client
    scheduling; on one host it grows as the load generator competes for the cores)."""
    head = "| streams | load generator CPU (share of all cores) | server p50 ms | server p98 ms |"
    rows = [head, "|---:|---:|---:|---:|"]
    for d in levels:
        share = d.get("loadgen_cpu_share")
        cells = [d["streams"], "-" if share is None else f"{100 * share:.1f}%"]
        cells += [_ms(d.get("server_p50_ms")), _ms(d.get("server_p98_ms"))]
        rows.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(rows)


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


# -- plots ----------------------------------------------------------------------------------


def can_plot() -> bool:
    """Whether matplotlib (the `plot` extra) is installed: without it every report is written,
    only without its figures."""
    return importlib.util.find_spec("matplotlib") is not None


def figures(*images: tuple[str, str]) -> list[str]:
    """A report's Markdown lines for its (caption, file) figures, or a line saying why it has
    none."""
    if not can_plot():
        return ["(no figures: matplotlib is not installed; pip install 'harken[plot]')"]
    lines: list[str] = []
    for caption, name in images:
        lines += [f"![{caption}]({name})", ""]
    return lines[:-1]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    return plt


def plot_batch_sizes(results: Sequence[dict[str, Any]], path: Path) -> None:
    """DS2 Fig. 5: probability that a request (one stream's chunk) is processed in a batch
    of each size, one line per load. A step of size b serves b requests."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for r in results:
        sizes = sorted((int(b), n) for b, n in r["batch_sizes"].items())
        requests = sum(b * n for b, n in sizes)
        if requests:
            x = [b for b, _ in sizes]
            ax.plot(x, [b * n / requests for b, n in sizes], marker="o", label=f"{r['streams']}")
    ax.set_xlabel("batch size")
    ax.set_ylabel("probability")
    ax.set_title("Probability that a request is processed in a batch of given size")
    ax.xaxis.get_major_locator().set_params(integer=True)
    if ax.lines:
        ax.legend(title="concurrent streams")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_latency(
    runs: Mapping[str, Sequence[dict[str, Any]]], path: Path, bound_ms: float | None = None
) -> None:
    """DS2 Fig. 6: median and 98th-percentile end-of-utterance latency against concurrent
    streams; one pair of lines per run (policy), labelled by its key."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    for i, (name, results) in enumerate(runs.items()):
        done = [r for r in results if r["p50_ms"] is not None]
        x = [r["streams"] for r in done]
        prefix = f"{name} " if name else ""
        color = f"C{i}"
        ax.plot(x, [r["p50_ms"] for r in done], "o-", color=color, label=f"{prefix}median")
        ax.plot(x, [r["p98_ms"] for r in done], "s--", color=color, label=f"{prefix}98%ile")
    if bound_ms is not None:
        ax.axhline(bound_ms, color="gray", linestyle=":", label=f"bound {bound_ms:g} ms")
    ax.set_xlabel("number of concurrent streams")
    ax.set_ylabel("latency (ms)")
    ax.set_title("Latency against server load")
    ax.set_ylim(bottom=0)
    ax.xaxis.get_major_locator().set_params(integer=True)
    if ax.lines:
        ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# -- policy comparison ----------------------------------------------------------------------


def sustained(results: Sequence[dict[str, Any]], bound_ms: float) -> int:
    """The most concurrent streams with p98 within the bound and no failures (0 if none)."""
    best = 0
    for r in results:
        if r["p98_ms"] is not None and r["p98_ms"] <= bound_ms and r["failures"] == 0:
            best = max(best, r["streams"])
    return best


def write_comparison(
    out: Path,
    runs: Mapping[str, Sequence[dict[str, Any]]],
    bounds_ms: float | Sequence[float],
    meta: dict[str, Any],
    levels: Mapping[str, Sequence[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """compare.json, compare.md and one latency plot with every run. With several bounds, the
    top-level `sustained_streams` and `ratios` are at the largest; `by_bound` has each.
    `levels` (each run's `details`) adds the load generator's CPU and the server's view."""
    out.mkdir(parents=True, exist_ok=True)
    bounds = sorted([bounds_ms] if isinstance(bounds_ms, int | float) else bounds_ms)
    by_bound = {f"{b:g}": _sustained_and_ratios(runs, b) for b in bounds}
    comparison = {"bound_ms": bounds[-1], **by_bound[f"{bounds[-1]:g}"], "by_bound": by_bound}
    _dump(out / "compare.json", {**comparison, "runs": runs, "levels": levels, "meta": meta})
    if can_plot():
        plot_latency(runs, out / COMPARE_FIG, bounds[-1])
    lines = ["# Batch Dispatch policies", ""]
    lines += [f"- {key}: `{value}`" for key, value in meta.items() if not isinstance(value, dict)]
    for key, value in meta.items():
        if isinstance(value, dict):
            lines += [f"- {key}: " + ", ".join(f"{k} `{v}`" for k, v in value.items())]
    lines += ["", "Most concurrent streams with p98 end-of-utterance latency within each bound"]
    lines += ["and no failures:", ""]
    lines += ["| run | " + " | ".join(f"p98 <= {b} ms" for b in by_bound) + " |"]
    lines += ["|---|" + "---:|" * len(by_bound)]
    for name in runs:
        cells = [str(v["sustained_streams"][name]) for v in by_bound.values()]
        lines += [f"| {name} | " + " | ".join(cells) + " |"]
    ratio_names = list(next(iter(by_bound.values()))["ratios"])
    lines += ["", "| ratio | " + " | ".join(f"p98 <= {b} ms" for b in by_bound) + " |"]
    lines += ["|---|" + "---:|" * len(by_bound)]
    for ratio in ratio_names:
        cells = [_ratio(v["ratios"][ratio]) for v in by_bound.values()]
        lines += [f"| {ratio} | " + " | ".join(cells) + " |"]
    for name, results in runs.items():
        lines += ["", f"## {name}", "", table(results)]
        if levels and name in levels:
            lines += ["", load_table(levels[name])]
    lines += ["", *figures(("latency", COMPARE_FIG)), ""]
    (out / "compare.md").write_text("\n".join(lines))
    return comparison


def _sustained_and_ratios(
    runs: Mapping[str, Sequence[dict[str, Any]]], bound_ms: float
) -> dict[str, Any]:
    best = {name: sustained(results, bound_ms) for name, results in runs.items()}
    ratios = {
        f"{a}/{b}": (round(best[a] / best[b], 2) if best[b] else None)
        for a in best
        for b in best
        if a != b
    }
    return {"sustained_streams": best, "ratios": ratios}


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"
