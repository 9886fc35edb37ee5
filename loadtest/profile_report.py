"""`--profile`'s numbers and report: per stage samples, CPU ms per audio second, shares.

Units: a sample is one thread's stack seen at one tick of py-spy's clock, so samples / rate
is CPU seconds (of threads the OS had running or ready to run). "Per audio second" divides
by the seconds of audio the clients streamed over the window (the sum of their utterances'
durations), so a stage's `ms_per_audio_s` is what one second of one stream costs in it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.report import Level, percentile
from loadtest.stages import IDLE, STAGES, Stack, by_role, tally, top_frames


@dataclass(frozen=True)
class Window:
    """What one profiled load level measured."""

    level: Level  # the clients' results and the server's batch sizes (/metrics)
    stacks: list[Stack]  # py-spy's samples
    rate: int  # py-spy samples per second
    server_cpu_s: float  # user + system time of the server's processes (/proc), same window
    loadgen_cpu_s: float  # this process (the clients) over the level
    profiler_cpu_s: float  # py-spy's own CPU time
    py_spy_samples: int | None  # as py-spy reports them (None: not reported)
    py_spy_errors: int | None  # samples py-spy failed to take


def summarize(window: Window, meta: dict[str, Any]) -> dict[str, Any]:
    """profile.json: meta, the load, sampling and CPU totals, stages, workers, top frames."""
    level, rate = window.level, window.rate
    counts = tally(window.stacks)
    cpu_samples = sum(n for stage, n in counts.items() if stage != IDLE)
    audio_s = sum(u.audio_s for u in level.utterances)
    stages = [_stage(s, n, rate, audio_s, cpu_samples) for s, n in counts.items() if s != IDLE]
    total_ms = cpu_samples / rate * 1000 / audio_s if audio_s else None
    cores = meta.get("cores", 1)
    return {
        "meta": meta,
        "load": _load(level, audio_s),
        "sampling": {
            "rate_hz": rate,
            "cpu_samples": cpu_samples,
            "idle_samples": counts[IDLE],
            "py_spy_samples": window.py_spy_samples,
            "py_spy_errors": window.py_spy_errors,
            "sampled_cpu_s": round(cpu_samples / rate, 3),
            "server_cpu_s": round(window.server_cpu_s, 3),
            "loadgen_cpu_s": round(window.loadgen_cpu_s, 3),
            "profiler_cpu_s": round(window.profiler_cpu_s, 3),
        },
        "stages": stages,
        "total_ms_per_audio_s": _r(total_ms),
        "streams_for_cores": _r(cores * 1000 / total_ms if total_ms else None, 1),
        "workers": {
            name: {"samples": n, "cores": _r(n / rate / level.wall_s if level.wall_s else None)}
            for name, n in by_role(window.stacks).items()
        },
        "top_frames": top_frames(window.stacks),
        "idle_means": STAGES[IDLE],
    }


def _stage(stage: str, n: int, rate: int, audio_s: float, cpu_samples: int) -> dict[str, Any]:
    cpu_ms = n / rate * 1000
    return {
        "stage": stage,
        "what": STAGES[stage],
        "samples": n,
        "cpu_ms": round(cpu_ms, 1),
        "ms_per_audio_s": _r(cpu_ms / audio_s if audio_s else None),
        "share": _r(n / cpu_samples if cpu_samples else None, 4),
    }


def _load(level: Level, audio_s: float) -> dict[str, Any]:
    ok = [u for u in level.utterances if u.ok]
    latencies = [u.eou_latency_ms for u in ok if u.eou_latency_ms is not None]
    sizes = {int(b): n for b, n in (level.batch_sizes or {}).items()}
    steps = sum(sizes.values())
    return {
        "streams": level.streams,
        "wall_s": round(level.wall_s, 2),
        "audio_s": round(audio_s, 2),
        "utterances": len(ok),
        "failures": len(level.utterances) - len(ok),
        "p50_ms": _r(percentile(latencies, 50), 1),
        "p98_ms": _r(percentile(latencies, 98), 1),
        "batch_sizes": level.batch_sizes,
        "mean_batch": _r(sum(b * n for b, n in sizes.items()) / steps if steps else None, 2),
        "notes": level.notes,
    }


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def write_profile(out: Path, summary: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "profile.md").write_text(markdown(summary))


def markdown(s: dict[str, Any]) -> str:
    meta, load, samp = s["meta"], s["load"], s["sampling"]
    server = "started here" if meta["server_started_here"] else "given"
    lines = [
        f"# Server CPU per stage: {load['streams']} real-time streams",
        "",
        f"`{meta['command']}` ({meta['date']}); server pid {meta['server_pid']} ({server}, "
        f"{meta['url']}), {meta['machine']['cpu']}, {meta['cores']} cores.",
        f"Load: {load['wall_s']} s, {load['audio_s']} s of audio streamed, "
        f"{load['utterances']} finals, {load['failures']} failures, end-of-utterance p50 "
        f"{load['p50_ms']} ms, p98 {load['p98_ms']} ms; batch sizes {load['batch_sizes']} "
        f"(mean {load['mean_batch']}).",
        "",
        "| stage | what | samples | CPU ms | ms per audio s | share |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in s["stages"]:
        share = "-" if r["share"] is None else f"{100 * r['share']:.1f}%"
        lines.append(
            f"| {r['stage']} | {r['what']} | {r['samples']} | {r['cpu_ms']:.0f} | "
            f"{_f(r['ms_per_audio_s'])} | {share} |"
        )
    lines.append(
        f"| **total** | idle excluded | {samp['cpu_samples']} | "
        f"{samp['sampled_cpu_s'] * 1000:.0f} | {_f(s['total_ms_per_audio_s'])} | 100% |"
    )
    return "\n".join(lines + ["", *_notes(s), "", *_workers(s), "", *_top(s)]) + "\n"


def _notes(s: dict[str, Any]) -> list[str]:
    samp, meta = s["sampling"], s["meta"]
    return [
        f"py-spy at {samp['rate_hz']} Hz (`--nonblocking`): {samp['cpu_samples']} samples "
        f"counted, {samp['idle_samples']} idle ones left out ({s['idle_means']}), "
        f"{samp['py_spy_errors']} failed. Sampled CPU {samp['sampled_cpu_s']} s; the kernel "
        f"counted {samp['server_cpu_s']} s for the server's processes over the same window "
        "(sampling counts a thread that is ready but waiting for a core too, so on busy cores "
        f"it can exceed the kernel's count). The clients used {samp['loadgen_cpu_s']} s and "
        f"py-spy {samp['profiler_cpu_s']} s of the same {meta['cores']} cores.",
        "",
        f"At {_f(s['total_ms_per_audio_s'])} ms of server CPU per second of audio, "
        f"{meta['cores']} cores would hold about {s['streams_for_cores']} streams if the server "
        "had them to itself and its work spread over them (the event loop and the model "
        "step each run on one thread; see the workers below).",
    ]


def _workers(s: dict[str, Any]) -> list[str]:
    lines = ["| worker | samples | cores busy (samples / rate / wall) |", "| --- | ---: | ---: |"]
    for name, w in s["workers"].items():
        lines.append(f"| {name} | {w['samples']} | {_f(w['cores'])} |")
    return lines


def _top(s: dict[str, Any]) -> list[str]:
    lines = ["Innermost frames with the most samples, per stage:", ""]
    for stage, frames in s["top_frames"].items():
        listed = "; ".join(f"`{name}` {n}" for name, n in frames)
        lines.append(f"- {stage}: {listed}")
    return lines


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
