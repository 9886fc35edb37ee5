"""A soak's judgement and report: `soak.json`, `soak.md` and `soak.png`.

Targets (each "held", "not held" or "not measured" when the run is too short for it):
- no unexpected failures: every load stream got its final, except those a fault explains
  (a failure in its window, of the kind it causes: decoder_error near the kill, overloaded
  near the burst);
- memory: the process tree's RSS in the last 3 minutes is within 5% of its mean over
  minutes 2-5 (after warm-up); needs a run of at least 8 minutes;
- latency: per protocol, p50 and p98 over the last 5 minutes are at most the first 5
  minutes' x (1 + margin) + margin ms (half the run each when it is shorter than 10
  minutes), counting only streams outside every fault's window;
- every fault injected held its own check (loadtest/faults.py).

The "usual text" of an utterance is the text most of its finals had on that protocol in the
run; finals that differ are counted and shown, not failed (batches of different sizes may
round differently, and a beam search can break a near tie the other way).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from loadtest.faults import BATCH_FAULT
from loadtest.records import PROTOCOLS, FaultEvent, Record
from loadtest.report import can_plot, figures
from loadtest.wer import wer

WARM_S = (120.0, 300.0)  # RSS baseline: minutes 2-5
TAIL_S = 180.0  # RSS at the end: the last 3 minutes
RSS_LIMIT = 0.05  # growth allowed after warm-up
EDGE_S = 300.0  # latency: the first and the last 5 minutes
MIN_LATENCIES = 10  # fewer in either edge: the drift is not measured
PLOT, STREAMS = "soak.png", "streams.jsonl"


@dataclass
class SoakRun:
    """Everything a soak measured."""

    duration_s: float  # the planned load time
    records: list[Record]
    samples: list[dict[str, Any]]
    faults: list[FaultEvent]
    window_s: float  # latency percentiles per window of this length
    fault_window_s: float  # seconds either side of a fault that count as near it
    margin: tuple[float, float]  # (fraction, ms) the late percentiles may exceed the early
    notes: list[str] = field(default_factory=list)


def percentile(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def load(records: Iterable[Record]) -> list[Record]:
    return [r for r in records if r.tag == "load"]


# -- judging --------------------------------------------------------------------------------


def attribute(records: Sequence[Record], faults: Sequence[FaultEvent], window_s: float) -> None:
    """Mark each failed load stream that a fault explains with that fault's name."""
    for record in load(records):
        record.fault = next((f.name for f in faults if f.explains(record, window_s)), None)


def usual_texts(records: Iterable[Record]) -> dict[tuple[str, str], str]:
    """(utterance, protocol) -> the text most of its finals had."""
    texts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for r in load(records):
        if r.ok:
            texts[(r.utterance, r.protocol)][r.text] += 1
    return {key: counts.most_common(1)[0][0] for key, counts in texts.items()}


def near(record: Record, fault: FaultEvent, window_s: float) -> bool:
    return record.end_s >= fault.start_s - window_s and record.start_s <= fault.end_s + window_s


def rss_growth(samples: Sequence[dict[str, Any]], duration_s: float) -> dict[str, Any]:
    """The tree's mean RSS over minutes 2-5 against the last 3 minutes."""
    if duration_s - TAIL_S < WARM_S[1]:
        return {"growth": None, "why": "the run is shorter than 8 minutes"}
    warm = [s["rss_kb"] for s in samples if "rss_kb" in s and WARM_S[0] <= s["t_s"] < WARM_S[1]]
    tail = [s["rss_kb"] for s in samples if "rss_kb" in s and s["t_s"] >= duration_s - TAIL_S]
    if not warm or not tail:
        return {"growth": None, "why": "no process samples in one of the two spans"}
    before, after = float(np.mean(warm)), float(np.mean(tail))
    return {
        "growth": round(after / before - 1, 4),
        "warm_kb": round(before),
        "tail_kb": round(after),
    }


def drift(run: SoakRun) -> dict[str, dict[str, Any]]:
    """Per protocol: p50/p98 of the first and the last EDGE_S (or half the run), streams
    near a fault left out, and whether the late ones are within the margin."""
    edge = min(EDGE_S, run.duration_s / 2)
    calm = [
        r
        for r in load(run.records)
        if r.ok and not any(near(r, f, run.fault_window_s) for f in run.faults if not f.skipped)
    ]
    result = {}
    for protocol in sorted({r.protocol for r in load(run.records)}):
        mine = [r for r in calm if r.protocol == protocol]
        early = [r.latency_ms for r in mine if r.start_s < edge and r.latency_ms is not None]
        late = [
            r.latency_ms
            for r in mine
            if r.start_s >= run.duration_s - edge and r.latency_ms is not None
        ]
        result[protocol] = _compare(early, late, run.margin, edge)
    return result


def _compare(
    early: list[float], late: list[float], margin: tuple[float, float], edge: float
) -> dict[str, Any]:
    row: dict[str, Any] = {"edge_s": edge, "early_n": len(early), "late_n": len(late)}
    for q in (50, 98):
        row[f"early_p{q}_ms"], row[f"late_p{q}_ms"] = percentile(early, q), percentile(late, q)
    if min(len(early), len(late)) < MIN_LATENCIES:
        row["held"] = None
        return row
    fraction, ms = margin
    row["held"] = all(
        row[f"late_p{q}_ms"] <= row[f"early_p{q}_ms"] * (1 + fraction) + ms for q in (50, 98)
    )
    return row


def windows(records: Sequence[Record], window_s: float, duration_s: float) -> list[dict[str, Any]]:
    """Latency percentiles and failures per window and protocol, by when each stream ended."""
    ends = [r.end_s for r in load(records)]
    count = max(1, math.ceil(max([duration_s, *ends]) / window_s))
    result = []
    for i in range(count):
        lo, hi = i * window_s, (i + 1) * window_s
        inside = [
            r for r in load(records) if lo <= r.end_s < hi or (i == count - 1 and r.end_s >= hi)
        ]
        row: dict[str, Any] = {"start_s": lo, "end_s": hi}
        for protocol in PROTOCOLS:
            mine = [r for r in inside if r.protocol == protocol]
            if mine:
                row[protocol] = _window_stats(mine)
        result.append(row)
    return result


def _window_stats(records: list[Record]) -> dict[str, Any]:
    latencies = [r.latency_ms for r in records if r.ok and r.latency_ms is not None]
    return {
        "finals": len(latencies),
        "failures": sum(not r.ok for r in records),
        "p50_ms": percentile(latencies, 50),
        "p98_ms": percentile(latencies, 98),
    }


def fault_line(
    fault: FaultEvent, records: Sequence[Record], usual: dict[tuple[str, str], str], window_s: float
) -> dict[str, Any]:
    """One fault's judgement: its own check, the streams it explains, the others near it."""
    if fault.skipped:
        return {"name": fault.name, "held": None, "line": f"{fault.name}: {fault.action}"}
    touched = [r for r in load(records) if r.fault == fault.name]
    others = [r for r in load(records) if near(r, fault, window_s) and r.fault is None]
    failed = [r for r in others if not r.ok]
    differ = [r for r in others if r.ok and usual.get((r.utterance, r.protocol)) != r.text]
    in_flight = _in_flight(fault, records) if fault.name == "term" else None
    held = fault.held and not failed and (in_flight is None or in_flight["held"])
    lo, hi = max(0.0, fault.start_s - window_s), fault.end_s + window_s
    parts = [f"{fault.name} at {fault.start_s:.1f} s: {fault.action}; {fault.outcome}"]
    if in_flight is not None:
        parts.append(in_flight["text"])
    if fault.expected is not None:
        reasons = Counter(r.failure for r in touched).most_common(2)
        shown = "; ".join(f"{n} x {why}" for why, n in reasons)
        parts.append(
            f"streams it failed as expected: {len(touched)}{' (' + shown + ')' if shown else ''}"
        )
    parts.append(
        f"other streams in {lo:.0f}-{hi:.0f} s: {len(others)}, {len(failed)} failed, "
        f"{len(differ)} final(s) unlike their utterance's usual text"
    )
    parts.append(f"/readyz after: {fault.readyz}")
    line = "; ".join(parts) + (". Held." if held else ". NOT held.")
    return {
        "name": fault.name,
        "held": held,
        "touched": len(touched),
        "others": len(others),
        "others_failed": len(failed),
        "others_differ": len(differ),
        "line": line,
    }


def _in_flight(fault: FaultEvent, records: Sequence[Record]) -> dict[str, Any]:
    """The load streams open when SIGTERM came: all must get their finals within the grace."""
    grace = float(fault.details.get("grace_s", math.inf))
    flight = [r for r in load(records) if r.start_s < fault.start_s < r.end_s]
    late = [r for r in flight if r.ok and r.end_s - fault.start_s > grace]
    failed = [r for r in flight if not r.ok]
    last = max((r.end_s - fault.start_s for r in flight), default=0.0)
    text = (
        f"in flight: {len(flight)}, {len(flight) - len(failed)} got their finals (the last "
        f"{last:.1f} s after the signal; grace {grace:g} s), {len(failed)} failed"
    )
    return {"held": not failed and not late, "text": text}


# -- the whole run --------------------------------------------------------------------------


def summarize(run: SoakRun) -> dict[str, Any]:
    attribute(run.records, run.faults, run.fault_window_s)
    usual = usual_texts(run.records)
    lines = [fault_line(f, run.records, usual, run.fault_window_s) for f in run.faults]
    streams = _per_protocol(run.records, usual)
    failures = _failures(run.records)
    growth = rss_growth(run.samples, run.duration_s)
    drifted = drift(run)
    targets = _targets(failures, growth, drifted, lines)
    return {
        "passed": all(t["held"] is not False for t in targets),
        "targets": targets,
        "protocols": streams,
        "failures": failures,
        "rss": growth,
        "drift": drifted,
        "faults": lines,
        "tree": _first_last(run.samples),
        "cpu": _cpu(run.samples),
        "notes": [*run.notes, BATCH_FAULT],
    }


def _per_protocol(records: Sequence[Record], usual: dict[tuple[str, str], str]) -> dict[str, Any]:
    result = {}
    for protocol in sorted({r.protocol for r in load(records)}):
        mine = [r for r in load(records) if r.protocol == protocol]
        ok = [r for r in mine if r.ok]
        latencies = [r.latency_ms for r in ok if r.latency_ms is not None]
        result[protocol] = {
            "streams": len(mine),
            "finals": len(ok),
            "failures": len(mine) - len(ok),
            "p50_ms": percentile(latencies, 50),
            "p98_ms": percentile(latencies, 98),
            "wer": None if not ok else round(wer((r.reference, r.text) for r in ok) or 0.0, 4),
            "unusual_text": sum(usual.get((r.utterance, r.protocol)) != r.text for r in ok),
        }
    return result


def _failures(records: Sequence[Record]) -> dict[str, Any]:
    failed = [r for r in load(records) if not r.ok]
    expected = Counter(f"{r.fault}: {r.failure}" for r in failed if r.fault)
    unexpected = Counter(f"{r.protocol}: {r.failure}" for r in failed if not r.fault)
    return {
        "streams": len(load(records)),
        "expected": sum(expected.values()),
        "unexpected": sum(unexpected.values()),
        "expected_reasons": dict(expected.most_common()),
        "unexpected_reasons": dict(unexpected.most_common()),
    }


def _targets(
    failures: dict[str, Any],
    growth: dict[str, Any],
    drifted: dict[str, dict[str, Any]],
    lines: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    targets = [
        {
            "target": "no unexpected failures",
            "held": failures["unexpected"] == 0,
            "result": f"{failures['unexpected']} of {failures['streams']} load streams",
        },
        _rss_target(growth),
    ]
    for protocol, row in drifted.items():
        targets.append(_drift_target(protocol, row))
    injected = [line for line in lines if line["held"] is not None]
    held = sum(line["held"] for line in injected)
    targets.append(
        {
            "target": "every fault held",
            "held": held == len(injected) if injected else None,
            "result": f"{held} of {len(injected)} injected",
        }
    )
    return targets


def _rss_target(growth: dict[str, Any]) -> dict[str, Any]:
    target = f"RSS growth after warm-up < {RSS_LIMIT:.0%}"
    if growth["growth"] is None:
        return {"target": target, "held": None, "result": f"not measured: {growth['why']}"}
    result = (
        f"{growth['growth']:+.1%} (minutes 2-5: {growth['warm_kb'] / 1024:.0f} MiB, "
        f"last 3 minutes: {growth['tail_kb'] / 1024:.0f} MiB)"
    )
    return {"target": target, "held": growth["growth"] < RSS_LIMIT, "result": result}


def _drift_target(protocol: str, row: dict[str, Any]) -> dict[str, Any]:
    target = f"{protocol}: last {row['edge_s'] / 60:g} min p50/p98 within the margin of the first"
    if row["held"] is None:
        result = f"not measured: {row['early_n']} and {row['late_n']} finals away from faults"
    else:
        result = (
            f"p50 {row['early_p50_ms']:.1f} -> {row['late_p50_ms']:.1f} ms, "
            f"p98 {row['early_p98_ms']:.1f} -> {row['late_p98_ms']:.1f} ms"
        )
    return {"target": target, "held": row["held"], "result": result}


def _first_last(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    local = [s for s in samples if "rss_kb" in s]
    keys = ("rss_kb", "server_rss_kb", "children_rss_kb", "fds", "threads", "children", "decoders")
    if not local:
        return {}
    first, last = local[0], local[-1]
    return {k: {"first": first[k], "last": last[k]} for k in keys if k in first and k in last}


def _cpu(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """CPU seconds used over the run, and as a share of one core."""
    if len(samples) < 2:
        return {}
    first, last = samples[0], samples[-1]
    wall = last["t_s"] - first["t_s"]
    result = {"wall_s": round(wall, 1)}
    for key in ("server_cpu_s", "loadgen_cpu_s"):
        if key in first and key in last and wall > 0:
            used = last[key] - first[key]
            result[key] = round(used, 1)
            result[key.replace("_s", "_cores")] = round(used / wall, 3)
    return result


# -- files ----------------------------------------------------------------------------------


def write_soak_report(out: Path, run: SoakRun, meta: dict[str, Any]) -> dict[str, Any]:
    """soak.json, soak.md, soak.png and streams.jsonl (every stream and upload, one a line:
    thousands in a long soak) under `out`; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(run)
    per_window = windows(run.records, run.window_s, run.duration_s)
    data = {
        "meta": meta,
        "summary": summary,
        "windows": per_window,
        "samples": run.samples,
        "faults": [asdict(f) for f in run.faults],
        "failures": [asdict(r) for r in run.records if not r.ok and r.tag == "load"],
    }
    (out / "soak.json").write_text(json.dumps(data, indent=1) + "\n")
    lines = (json.dumps(asdict(r)) + "\n" for r in run.records)
    (out / STREAMS).write_text("".join(lines))
    (out / "soak.md").write_text(markdown(summary, meta, run))
    if can_plot():
        plot(run, per_window, out / PLOT)
    return summary


def markdown(summary: dict[str, Any], meta: dict[str, Any], run: SoakRun) -> str:
    verdict = "held" if summary["passed"] else "NOT held"
    lines = [f"# Soak: {meta.get('streams')} streams for {run.duration_s / 60:g} minutes", ""]
    lines += [f"- {k}: `{v}`" for k, v in meta.items() if not isinstance(v, dict)]
    machine = meta.get("machine") or {}
    lines += ["- machine: " + ", ".join(f"{k} `{v}`" for k, v in machine.items()), ""]
    lines += [f"## Targets: {verdict}", "", "| target | result | held |", "|---|---|---|"]
    for t in summary["targets"]:
        held = {True: "yes", False: "**no**", None: "not measured"}[t["held"]]
        lines.append(f"| {t['target']} | {t['result']} | {held} |")
    margin_pct, margin_ms = run.margin
    lines += ["", f"Latency margin (noise): late <= early x {1 + margin_pct:g} + {margin_ms:g} ms."]
    lines += ["", "## Streams", "", *_protocol_table(summary["protocols"], summary["drift"])]
    lines += ["", "## Server process tree, first and last sample", "", *_tree_table(summary)]
    lines += ["", "## Failures", "", *_failure_lines(summary["failures"])]
    lines += ["", "## Faults", "", *[f"- {f['line']}" for f in summary["faults"]]]
    lines += ["", *[f"- {note}" for note in summary["notes"]]]
    lines += [f"- every stream and upload: `{STREAMS}`", "", *figures(("soak", PLOT)), ""]
    return "\n".join(lines)


def _protocol_table(protocols: dict[str, Any], drifted: dict[str, Any]) -> list[str]:
    rows = [
        "| protocol | streams | finals | failures | p50 ms | p98 ms | first p50/p98 | last p50/p98 "
        "| WER | unlike usual text |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, p in protocols.items():
        d = drifted.get(name, {})
        first = f"{_ms(d.get('early_p50_ms'))} / {_ms(d.get('early_p98_ms'))}"
        last = f"{_ms(d.get('late_p50_ms'))} / {_ms(d.get('late_p98_ms'))}"
        wer_text = "-" if p["wer"] is None else f"{100 * p['wer']:.1f}%"
        rows.append(
            f"| {name} | {p['streams']} | {p['finals']} | {p['failures']} | {_ms(p['p50_ms'])} "
            f"| {_ms(p['p98_ms'])} | {first} | {last} | {wer_text} | {p['unusual_text']} |"
        )
    rows += [
        "",
        "First and last: the first and last 5 minutes (or halves of a shorter run), "
        "streams near a fault left out. Latency: end of audio to final; REST: request "
        "to response.",
    ]
    return rows


def _tree_table(summary: dict[str, Any]) -> list[str]:
    tree, cpu = summary["tree"], summary["cpu"]
    if not tree:
        return ["Not sampled: the server's pid is not known (give --server-pid with --url)."]
    rows = ["| | first | last |", "|---|---:|---:|"]
    for key, v in tree.items():
        if key.endswith("_kb"):
            rows.append(f"| {key[:-3]} MiB | {v['first'] / 1024:.1f} | {v['last'] / 1024:.1f} |")
        else:
            rows.append(f"| {key} | {v['first']} | {v['last']} |")
    if "server_cpu_s" in cpu:
        rows += [
            "",
            f"CPU over {cpu['wall_s']} s: server tree {cpu['server_cpu_s']} s "
            f"({cpu['server_cpu_cores']} cores), load generator {cpu['loadgen_cpu_s']} s "
            f"({cpu['loadgen_cpu_cores']} cores).",
        ]
    return rows


def _failure_lines(failures: dict[str, Any]) -> list[str]:
    lines = [
        f"{failures['unexpected']} unexpected and {failures['expected']} expected (caused by "
        f"a fault) of {failures['streams']} load streams.",
        "",
    ]
    lines += [f"- unexpected: {n} x {why}" for why, n in failures["unexpected_reasons"].items()]
    lines += [f"- expected, {why}: {n}" for why, n in failures["expected_reasons"].items()]
    return lines


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


# -- plot -----------------------------------------------------------------------------------


def plot(run: SoakRun, per_window: list[dict[str, Any]], path: Path) -> None:
    """Top: the tree's RSS, descriptors and threads against time; bottom: p50 and p98 per
    window and protocol. Faults are marked on both."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    fig, (mem, counts, lat) = plt.subplots(3, 1, figsize=(8, 9), sharex=True)
    local = [s for s in run.samples if "rss_kb" in s]
    minutes = [s["t_s"] / 60 for s in local]
    for key, label in (
        ("rss_kb", "tree"),
        ("server_rss_kb", "server"),
        ("children_rss_kb", "children"),
    ):
        mem.plot(minutes, [s[key] / 1024 for s in local], label=label)
    for key in ("fds", "threads", "children"):
        counts.plot(minutes, [s[key] for s in local], label=key)
    _latency_lines(lat, per_window)
    for ax in (mem, counts, lat):
        for f in run.faults:
            if not f.skipped:
                ax.axvline(f.start_s / 60, color="gray", linestyle=":", linewidth=1)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    mem.set_ylabel("RSS (MiB)")
    counts.set_ylabel("count")
    lat.set_ylabel("latency (ms)")
    lat.set_xlabel("minutes (dotted: faults)")
    mem.set_title("Server process tree" if local else "Server process tree (not sampled)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _latency_lines(ax: Any, per_window: list[dict[str, Any]]) -> None:
    for i, protocol in enumerate(PROTOCOLS):
        rows = [w for w in per_window if protocol in w and w[protocol]["p50_ms"] is not None]
        x = [(w["start_s"] + w["end_s"]) / 2 / 60 for w in rows]
        color = f"C{i}"
        ax.plot(
            x, [w[protocol]["p50_ms"] for w in rows], "o-", color=color, label=f"{protocol} p50"
        )
        ax.plot(
            x, [w[protocol]["p98_ms"] for w in rows], "s--", color=color, label=f"{protocol} p98"
        )
    ax.set_ylim(bottom=0)
