"""`harken floor`: the compute floor of one real-time stream on this CPU, and how many
streams the model alone could hold (issue 19: the ceiling of concurrent streams).

    harken floor --bundle models/default --out experiments/loadtest/floor
    python -m evaluation.floor --bundle models/default --out DIR

What it measures, into floor.json and floor.md:

1. FLOPs per second of one stream's audio, counted from the bundle's `ModelConfig`
   (evaluation/flops.py), and torch's count of one second of features through one
   steady-state `streaming.step` beside it (FlopCounterMode for the matrix products, a tally
   of pointwise ops for the rest).
2. The GEMM rate this CPU reaches at the shapes a streaming step runs, as `F.linear` (what
   `nn.Linear` calls): the recurrent product [B, H] x [H, G*H] once per output position, and
   an input projection [B*T', H] x [H, G*H] over a chunk's T' positions (G = 3 for a GRU).
   Also one 1024^3 product on one thread, the rate large matrices reach.
3. `streaming.step` on B streams of the bundle's model in steady state, per chunk length,
   precision and torch threads; and the server's own path, `ModelRunner.run_sync` (stacking
   and unstacking the streams' states too), at the precision `--dtype auto` picks and one
   thread, as the server runs it (speaker adaptation off: each stream one row).
4. Capacity of the model alone: a batch of B costs step_s x threads core-seconds per chunk,
   so one stream's second of audio costs c(B) = step_s x threads x chunks_per_s / B
   core-seconds and `cores` cores hold cores / c(B) streams (with one thread: the cores x
   1 s / (step time x chunks per second / B) of the issue); the server's one model thread
   holds 1 / c(B). The floor: cores x the best one-thread GEMM rate / FLOPs per audio second.

Timings with one torch thread are that thread's CPU time (`bench_model.time_call`), so other
work on the machine moves them little; with two threads they are wall-clock and want idle
cores (the load average before and after is saved). bf16 is measured where the CPU has
native bf16 units (server/precision.py), fp32 and int8 (int8 recurrent layers,
models/quantize.py) always; GEMM rates are fp32's and bf16's (int8 has no `F.linear`).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from evaluation import bench_model as bench
from evaluation.flops import ELEMENTWISE_ALLOWANCE, analytic_flops, counted_flops
from evaluation.flops import flops_per_audio_second as per_second
from models import DEFAULT_BUNDLE
from models.bundle import DTYPES, load_bundle
from models.config import ModelConfig
from models.ds2 import DS2
from models.ensemble import member_specs
from server.dispatch import Work
from server.engine import frames as chunk_frames
from server.precision import BF16_FLAGS, bf16_units, cpu_description, cpu_flags, resolve_dtype
from server.runner import Chunk, ModelRunner

CPU = torch.device("cpu")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.formatter_class = argparse.ArgumentDefaultsHelpFormatter
    p.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE, help="model bundle dir")
    p.add_argument("--out", type=Path, default=Path("experiments/loadtest/floor"), help="directory")
    p.add_argument("--chunk-ms", type=_ints, default=[100, 160], help="audio per step, ms")
    p.add_argument("--batches", type=_ints, default=[1, 2, 4, 8, 16, 32], help="streams per step")
    p.add_argument(
        "--threads", type=_ints, default=sorted({1, min(2, os.cpu_count() or 1)}), help="torch's"
    )
    p.add_argument("--precisions", type=_names, help="default fp32, int8, and bf16 where native")
    p.add_argument("--target-s", type=float, default=0.25, help="timing budget per cell")


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def _names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def main(args: argparse.Namespace) -> int:
    try:
        precisions = _precisions(args.precisions)
        result = run(args, precisions)
    except ValueError as e:
        print(f"harken floor: {e}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "floor.json").write_text(json.dumps(result, indent=1) + "\n")
    text = markdown(result)
    (args.out / "floor.md").write_text(text)
    print(text)
    return 0


def _precisions(asked: list[str] | None) -> list[str]:
    native = bool(bf16_units())
    precisions = asked or (["fp32", "bf16", "int8"] if native else ["fp32", "int8"])
    unknown = set(precisions) - {"fp32", "bf16", "int8"}
    if unknown:
        raise ValueError(f"--precisions takes fp32, bf16 and int8 (CPU), got {sorted(unknown)}")
    return precisions


def run(args: argparse.Namespace, precisions: list[str]) -> dict[str, Any]:
    """Every measurement of the module docstring, as floor.json holds them."""
    if not args.bundle.is_dir():
        raise ValueError(f"--bundle {args.bundle} is not a bundle directory")
    members = len(member_specs(args.bundle))
    if members > 1:  # models/ensemble.py: each member steps every stream too
        print(
            f"note: {args.bundle} hears with {members} networks; this measures its own only, "
            "and each member adds its own step's cost (`harken loadtest` measures the whole)",
            file=sys.stderr,
        )
    load_before = bench.load_average()
    models = {p: load_bundle(args.bundle, "cpu", p) for p in precisions}
    matmuls = [p for p in precisions if p in DTYPES]  # int8 has no GEMM of its own to time
    config = models[precisions[0]].config
    chunks = {ms: chunk_frames(config, ms) for ms in args.chunk_ms}
    server_dtype, why = resolve_dtype("auto", "cpu")
    return {
        "meta": _meta(args, config, models[precisions[0]], load_before, server_dtype, why),
        "flops": _flops(models.get("fp32") or load_bundle(args.bundle)),  # counted in fp32
        "gemm": _gemm_grid(config, chunks, args, matmuls),
        "peak_gflops": _peak(matmuls),
        "steps": _step_grid(models, chunks, args),
        "runner": _runner_grid(args.bundle, server_dtype, chunks, args),
        "load_after": bench.load_average(),
    }


# -- 1. FLOPs -----------------------------------------------------------------------------


def _flops(model: DS2) -> dict[str, Any]:
    """The analytic count per audio second, and torch's count of about one second."""
    config = model.config
    components = per_second(config)
    frames = int(1000 / config.features.hop_ms) // config.time_stride * config.time_stride
    analytic = analytic_flops(config, frames)
    flop_counter, pointwise = counted_flops(model, frames)
    matmul = sum(v for k, v in analytic.items() if k != "elementwise")
    return {
        "per_audio_s": components,
        "total_per_audio_s": sum(components.values()),
        "check_frames": frames,
        "analytic_matmul": matmul,
        "flop_counter": flop_counter,
        "analytic_elementwise": analytic["elementwise"],
        "pointwise_tally": pointwise,
        "elementwise_allowance": ELEMENTWISE_ALLOWANCE,
    }


# -- 2. GEMM rates ------------------------------------------------------------------------


def gemm_shapes(config: ModelConfig, positions: int, batch: int) -> dict[str, tuple[int, ...]]:
    """(m, k, n) of the recurrent product and of an input projection over `positions`."""
    h = config.rnn_hidden
    gates = (3 if config.rnn_type == "gru" else 1) * h
    return {"recurrent": (batch, h, gates), "input": (batch * positions, h, gates)}


def gemm_rate(m: int, k: int, n: int, dtype: torch.dtype, target_s: float) -> float:
    """FLOP/s of `F.linear(x [m, k], w [n, k], b [n])`, timed in loops of calls long enough
    that the clock's resolution does not matter."""
    g = torch.Generator().manual_seed(m * 7 + k)
    x, w = torch.randn(m, k, generator=g).to(dtype), torch.randn(n, k, generator=g).to(dtype)
    b = torch.randn(n, generator=g).to(dtype)
    inner = max(1, math.ceil(2e7 / (2 * m * k * n)))

    def calls() -> None:
        for _ in range(inner):
            F.linear(x, w, b)

    with torch.inference_mode():
        t = bench.time_call(calls, CPU, target_s=target_s, max_repeats=50)
    return 2 * m * k * n * inner / t.seconds


def _gemm_grid(
    config: ModelConfig, chunks: dict[int, int], args: argparse.Namespace, precisions: list[str]
) -> list[dict[str, Any]]:
    rows = []
    shapes: dict[tuple[str, int, int], tuple[int, ...]] = {}
    for ms, frames in chunks.items():
        for b in args.batches:
            for name, mkn in gemm_shapes(config, frames // config.time_stride, b).items():
                shapes.setdefault((name, b, ms if name == "input" else 0), mkn)
    for p in precisions:
        for threads in args.threads:
            torch.set_num_threads(threads)
            for (name, b, ms), (m, k, n) in shapes.items():
                rate = gemm_rate(m, k, n, DTYPES[p], args.target_s / 2)
                rows.append(
                    {"shape": name, "chunk_ms": ms or None, "batch": b, "m": m, "k": k, "n": n}
                    | {"precision": p, "threads": threads, "gflops": rate / 1e9}
                )
    return rows


def _peak(precisions: list[str]) -> dict[str, float]:
    """GFLOP/s of a 1024^3 product on one thread: what large matrices reach."""
    torch.set_num_threads(1)
    return {p: bench.matmul_rate(DTYPES[p], CPU, 1024) / 1e9 for p in precisions}


# -- 3. step and runner times, 4. capacity ------------------------------------------------


def capacity(
    step_s: float, threads: int, chunk_s: float, batch: int, cores: int
) -> dict[str, float]:
    """Core-ms one stream's audio second costs at this step time, and the streams that
    `cores` cores (and one model thread) hold at that cost."""
    core_s = step_s * threads / chunk_s / batch
    out = {"core_ms_per_audio_s": core_s * 1000, "streams_on_cores": cores / core_s}
    if threads == 1:
        out["streams_one_thread"] = 1 / core_s
    return out


def _step_grid(
    models: dict[str, DS2], chunks: dict[int, int], args: argparse.Namespace
) -> list[dict[str, Any]]:
    rows = []
    for p, model in models.items():
        for threads in args.threads:
            torch.set_num_threads(threads)
            for ms, frames in chunks.items():
                for b in args.batches:
                    t = bench.time_step(model, b, frames, args.target_s)
                    chunk_s = frames * model.config.features.hop_ms / 1000
                    rows.append(
                        {"precision": p, "threads": threads, "chunk_ms": ms, "batch": b}
                        | {"step_ms": t.seconds * 1000, "repeats": t.repeats}
                        | capacity(t.seconds, threads, chunk_s, b, os.cpu_count() or 1)
                    )
                    print(_progress(rows[-1]), file=sys.stderr, flush=True)
    return rows


def _runner_grid(
    bundle: Path, dtype: str, chunks: dict[int, int], args: argparse.Namespace
) -> list[dict[str, Any]]:
    """`ModelRunner.run_sync` as the server calls it, one thread, adaptation off."""
    torch.set_num_threads(1)
    runner = ModelRunner.from_bundle(str(bundle), "cpu", dtype, speaker_adaptation=False)
    rows = []
    try:
        hop_ms = runner.model.config.features.hop_ms
        for ms, frames in chunks.items():
            for b in args.batches:
                t = bench.time_call(_runner_call(runner, b, frames), CPU, args.target_s)
                rows.append(
                    {"precision": dtype, "threads": 1, "chunk_ms": ms, "batch": b}
                    | {"step_ms": t.seconds * 1000, "repeats": t.repeats}
                    | capacity(t.seconds, 1, frames * hop_ms / 1000, b, os.cpu_count() or 1)
                )
    finally:
        runner.close()
    return rows


def _runner_call(runner: ModelRunner, batch: int, frames: int) -> Callable[[], object]:
    """A batch of `batch` fresh streams, run past their pre-roll, as a timed call."""
    n_bins = runner.model.config.features.n_bins
    rng = np.random.default_rng(batch * 1000 + frames)
    base = 1_000_000 * batch + 1000 * frames  # stream ids unique to this cell
    work = [
        Work(base + i, Chunk(rng.normal(-8.0, 3.0, (frames, n_bins)).astype(np.float32)))
        for i in range(batch)
    ]
    for _ in range(4):  # past the pre-roll, so every step runs the whole recurrence
        runner.run_sync(work)
    return lambda: runner.run_sync(work)


def _progress(r: dict[str, Any]) -> str:
    return (
        f"{r['precision']} {r['threads']} thread(s) chunk {r['chunk_ms']} ms B={r['batch']}: "
        f"{r['step_ms']:.2f} ms, {r['streams_on_cores']:.0f} streams on the cores"
    )


# -- meta ---------------------------------------------------------------------------------


def _meta(
    args: argparse.Namespace,
    config: ModelConfig,
    model: DS2,
    load_before: str,
    server_dtype: str,
    why: str,
) -> dict[str, Any]:
    argv = ["harken", "floor", *sys.argv[2:]] if sys.argv[1:2] == ["floor"] else sys.argv
    return {
        "command": shlex.join(argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "bundle": str(args.bundle),
        "model": bench.describe(config),
        "config": dataclasses.replace(config, alphabet=()).to_dict(),
        "parameters": model.num_parameters(),
        "cpu": cpu_description(),
        "cores": os.cpu_count() or 1,
        "cpu_flags": sorted(cpu_flags() & {"avx2", "avx512f", *BF16_FLAGS}),
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "server_dtype": server_dtype,
        "server_dtype_why": why,
        "load_before": load_before,
    }


# -- report -------------------------------------------------------------------------------


def markdown(result: dict[str, Any]) -> str:
    m = result["meta"]
    lines = [
        f"# Compute floor of one stream: `{m['bundle']}`",
        "",
        f"{m['cpu']}, flags {', '.join(m['cpu_flags']) or 'none of note'}; torch {m['torch']} "
        f"({m['cpu_capability']}); load average {m['load_before']} before, "
        f"{result['load_after']} after. `{m['command']}`, {m['date']}.",
        f"Model: {m['model']}, {m['parameters']:,} parameters. The server's `--dtype auto` "
        f"runs it in {m['server_dtype']} here ({m['server_dtype_why']}).",
        "",
        *_flops_md(result["flops"]),
        "",
        *_gemm_md(result["gemm"], result["peak_gflops"]),
        "",
        *_steps_md(result["steps"], result["runner"], m["cores"]),
        "",
        *_floor_md(result),
    ]
    return "\n".join(lines) + "\n"


def _flops_md(f: dict[str, Any]) -> list[str]:
    total = f["total_per_audio_s"]
    lines = [
        "## FLOPs per second of one stream's audio",
        "",
        "| component | MFLOP per audio s | share |",
        "| --- | ---: | ---: |",
    ]
    for name, v in f["per_audio_s"].items():
        lines.append(f"| {name} | {v / 1e6:.2f} | {100 * v / total:.2f}% |")
    lines.append(f"| **total** | {total / 1e6:.2f} | 100% |")
    same = "equal" if f["analytic_matmul"] == f["flop_counter"] else "NOT equal"
    gap = (f["analytic_elementwise"] - f["pointwise_tally"]) / max(f["pointwise_tally"], 1)
    lines += [
        "",
        f"Cross-check on one step of {f['check_frames']} frames: the matrix products "
        f"{f['analytic_matmul']:,} FLOPs, torch's FlopCounterMode {f['flop_counter']:,} "
        f"({same}); elementwise estimate {f['analytic_elementwise']:,} against torch's tally "
        f"of pointwise outputs {f['pointwise_tally']:,} ({100 * gap:+.2f}%; allowed "
        f"{100 * f['elementwise_allowance']:.0f}%: the tally also sees the step's mask and "
        "counter bookkeeping). FlopCounterMode counts no elementwise op, and a multiply-add "
        "is 2 FLOPs in both counts.",
    ]
    return lines


def _gemm_md(rows: list[dict[str, Any]], peak: dict[str, float]) -> list[str]:
    cols = sorted({(r["precision"], r["threads"]) for r in rows})
    head = "| product | chunk | B | m x k x n |" + "".join(f" {p} {t}T |" for p, t in cols)
    lines = [
        "## GEMM rate at the step's shapes, GFLOP/s (`F.linear`; T = torch threads)",
        "",
        head,
        "|" + " --- |" * (4 + len(cols)),
    ]
    cells: dict[tuple[Any, ...], dict[tuple[str, int], float]] = {}
    for r in rows:
        key = (r["shape"], r["chunk_ms"], r["batch"], f"{r['m']} x {r['k']} x {r['n']}")
        cells.setdefault(key, {})[(r["precision"], r["threads"])] = r["gflops"]
    for (shape, ms, b, mkn), by in cells.items():
        chunk = f"{ms} ms" if ms else "-"
        values = "".join(f" {by[c]:.1f} |" if c in by else " - |" for c in cols)
        lines.append(f"| {shape} | {chunk} | {b} | {mkn} |{values}")
    peaks = ", ".join(f"{p} {v:.1f}" for p, v in peak.items())
    return [*lines, "", f"A 1024 x 1024 x 1024 product on one thread, for scale: {peaks} GFLOP/s."]


def _steps_md(steps: list[dict[str, Any]], runner: list[dict[str, Any]], cores: int) -> list[str]:
    lines = [
        "## Model step per chunk, and the streams the model alone holds",
        "",
        f"`streams` = {cores} cores / core-seconds per stream-second (step time x threads x "
        "chunks per second / B); `1 thread` = what one model thread holds (the server runs "
        "one). Runner: `ModelRunner.run_sync`, the server's path (states stacked and "
        "unstacked around the step). One-thread times are the thread's CPU time; two-thread "
        "times are wall-clock, far slower than on idle cores while other work holds them "
        "(the load average is above).",
        "",
        "| what | precision | threads | chunk | B | ms per step | core-ms per audio s | "
        "streams | 1 thread |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for what, rows in (("step", steps), ("runner", runner)):
        for r in rows:
            one = r.get("streams_one_thread")
            lines.append(
                f"| {what} | {r['precision']} | {r['threads']} | {r['chunk_ms']} ms | "
                f"{r['batch']} | {r['step_ms']:.2f} | {r['core_ms_per_audio_s']:.1f} | "
                f"{r['streams_on_cores']:.0f} | {'-' if one is None else f'{one:.0f}'} |"
            )
    return lines


def _floor_md(result: dict[str, Any]) -> list[str]:
    flops, cores = result["flops"]["total_per_audio_s"], result["meta"]["cores"]
    lines = ["## The floor", ""]
    for p in sorted({r["precision"] for r in result["gemm"]}):
        rates = [r["gflops"] for r in result["gemm"] if r["precision"] == p and r["threads"] == 1]
        steps = [r["streams_on_cores"] for r in result["steps"] if r["precision"] == p]
        if not rates or not steps:
            continue  # measured with more threads only: no one-core rate to scale
        best = max(rates)
        lines.append(
            f"- {p}: at the best one-thread GEMM rate measured at the step's shapes "
            f"({best:.1f} GFLOP/s), {cores} cores would run {cores * best * 1e9 / flops:.0f} "
            f"streams of {flops / 1e6:.1f} MFLOP per audio second; the measured steps "
            f"reach {max(steps):.0f} at best."
        )
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m evaluation.floor", description=__doc__)
    add_arguments(parser)
    raise SystemExit(main(parser.parse_args()))
