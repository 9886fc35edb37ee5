"""`harken bench-model`: what one streaming `step` costs, per batch size and precision, beside
the floor the hardware allows (DS2 §7.1-7.2).

For each model variant, chunk length, precision and batch size B it times `streaming.step`
on B stacked streams in steady state (warm-up first, then the median of repeats) and reports
the latency of the chunk and the cost per stream (latency / B). Beside it, the floor:

- compute: the chunk's multiply-add FLOPs, counted analytically from the `ModelConfig`
  (`chunk_flops`; the same count as torch's FlopCounterMode, elementwise ops excluded),
  over the fp32 matrix-multiply rate measured with a large `torch.mm` in the same run;
- memory: the weight bytes, which every step must read at least once, over the memory
  bandwidth measured with a large tensor copy in the same run.

At batch 1 the memory floor dominates and per-stream cost is high; batching streams shares
each weight read among B streams, which is what Batch Dispatch gains. On CUDA the same grid
runs in fp16, and the recurrent step is compared with a plain cuBLAS matmul at batch 1-10,
as DS2 §7.2 (Figure 7) compares its deployment kernel with cuBLAS.

    harken bench-model --out bench-out/model
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from models import streaming
from models.config import ModelConfig
from models.ds2 import DS2
from server.precision import cpu_description

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}

# Deployment-shaped models scaled to a 2-core CPU: DS2's shape (conv front end, 3 unidirectional
# GRU layers, row convolution with tau = 10), with 512 units instead of 2560.
VARIANTS: dict[str, ModelConfig] = {
    "2d": ModelConfig(conv_type="2d", conv_layers=2, conv_channels=32, rnn_hidden=512),
    "1d": ModelConfig(conv_type="1d", conv_layers=2, conv_channels=256, rnn_hidden=512),
}


@dataclass(frozen=True)
class Timing:
    """Medians of one call over `repeats` timed calls after `warmup` untimed ones: wall-clock
    seconds, and seconds of CPU time of the calling thread. With one torch thread on the CPU
    all the work runs on that thread, and its CPU time is what the call costs even while other
    jobs share the cores (wall time then also counts the time the thread waited for a core)."""

    wall_s: float
    thread_cpu_s: float | None  # None where it does not measure the work (CUDA, >1 thread)
    repeats: int
    warmup: int

    @property
    def seconds(self) -> float:
        return self.wall_s if self.thread_cpu_s is None else self.thread_cpu_s


# -- the floor: FLOPs and bytes, counted from the config -------------------------------------


def chunk_flops(config: ModelConfig, frames: int, batch: int = 1) -> dict[str, int]:
    """FLOPs (2 per multiply-add) of one `step` over `frames` input frames for `batch` streams,
    per component. Each layer computes frames / time_stride positions per step."""
    t = frames // config.time_stride
    out: dict[str, int] = {"conv": 0}
    bins, ch = config.features.n_bins, 1
    for i, (kf, fpad) in enumerate(_conv_freq_kernels(config)):
        if config.conv_type == "2d":
            bins = (bins + 2 * fpad - kf) // config.conv_freq_stride + 1
            out["conv"] += t * bins * config.conv_channels * ch * kf * config.conv_time_kernel
        else:
            in_ch = config.features.n_bins if i == 0 else config.conv_channels
            out["conv"] += t * config.conv_channels * in_ch * config.conv_time_kernel
        ch = config.conv_channels
    rnn_in = ch * (bins if config.conv_type == "2d" else 1)
    gates = (3 if config.rnn_type == "gru" else 1) * config.rnn_hidden
    h = config.rnn_hidden
    out["rnn_input"] = t * (rnn_in + (config.rnn_layers - 1) * h) * gates
    out["rnn_recurrent"] = t * config.rnn_layers * h * gates
    out["row_conv"] = t * h * (config.row_conv_tau + 1)
    out["output"] = t * h * config.vocab_size
    return {k: 2 * v * batch for k, v in out.items()}


def _conv_freq_kernels(config: ModelConfig) -> list[tuple[int, int]]:
    """(kernel height, padding) over frequency per conv layer, as `models.ds2.ConvLayer` has."""
    kernels = [max(3, (config.conv_freq_kernel // 2**i) | 1) for i in range(config.conv_layers)]
    return [(k, (k - 1) // 2) for k in kernels]


def weight_bytes(model: DS2, dtype: torch.dtype) -> int:
    """Bytes of every parameter in `dtype`: what a step reads at least once."""
    size = torch.empty(0, dtype=dtype).element_size()
    return sum(p.numel() for p in model.parameters()) * size


# -- machine rates ------------------------------------------------------------------------------


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(
    fn: Callable[[], object], device: torch.device, target_s: float = 1.0, max_repeats: int = 50
) -> Timing:
    """Median time of fn(): one warm-up (three when fast), then as many repeats as fit in
    about `target_s` (at least 3, at most `max_repeats`)."""
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    first = time.perf_counter() - start
    warmup = 1 if first > 0.2 else 3
    for _ in range(warmup - 1):
        fn()
    repeats = max(3, min(max_repeats, math.ceil(target_s / max(first, 1e-6))))
    wall, cpu = [], []
    for _ in range(repeats):
        _sync(device)
        start, start_cpu = time.perf_counter(), time.thread_time()
        fn()
        _sync(device)
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
    one_thread = device.type == "cpu" and torch.get_num_threads() == 1
    median_cpu = statistics.median(cpu) if one_thread else None
    return Timing(statistics.median(wall), median_cpu, repeats, warmup)


def matmul_rate(dtype: torch.dtype, device: torch.device, n: int) -> float:
    """Measured FLOP/s of an n x n x n `torch.mm`."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    t = time_call(lambda: torch.mm(a, b), device, target_s=0.5, max_repeats=20)
    return 2 * n**3 / t.seconds


def memory_bandwidth(device: torch.device, megabytes: int = 256) -> float:
    """Measured bytes/s of a large tensor copy (read + write counted)."""
    src = torch.ones(megabytes * 2**20 // 4, device=device)
    dst = torch.empty_like(src)
    t = time_call(lambda: dst.copy_(src), device, target_s=0.5, max_repeats=20)
    return 2 * src.numel() * 4 / t.seconds


def machine_rates(device: torch.device, precisions: list[str]) -> dict[str, Any]:
    """Matmul FLOP/s per precision (small n where it is emulated) and memory bandwidth."""
    cuda = device.type == "cuda"
    rates = {}
    for p in precisions:
        n = 8192 if cuda else (2048 if p == "fp32" else 512)
        rates[p] = matmul_rate(DTYPES[p], device, n)
    return {"matmul_flops_per_s": rates, "bandwidth_bytes_per_s": memory_bandwidth(device)}


# -- the step ---------------------------------------------------------------------------------


def build_model(config: ModelConfig, dtype: torch.dtype, device: torch.device) -> DS2:
    """A deployment model (BatchNorm folded) with random weights, as a bundle loads it."""
    torch.manual_seed(0)
    return DS2(config, folded=True).to(device=device, dtype=dtype).eval()


def time_step(model: DS2, batch: int, frames: int, target_s: float) -> Timing:
    """Median latency of `streaming.step` on `batch` stacked streams of `frames` frames, in
    steady state (the streams are past their pre-roll before timing starts)."""
    p = next(model.parameters())
    gen = torch.Generator().manual_seed(batch * 1000 + frames)
    feats = torch.randn(batch, frames, model.config.features.n_bins, generator=gen).to(p.device)
    state = streaming.init_state(model, batch)
    pre_roll = -streaming.plan(model).row_first
    for _ in range(math.ceil(pre_roll / (frames // model.config.time_stride))):
        _, state = streaming.step(model, feats, state)

    def one() -> None:
        nonlocal state
        _, state = streaming.step(model, feats, state)

    return time_call(one, p.device, target_s=target_s)


def bench_grid(args: argparse.Namespace, device: torch.device) -> list[dict[str, Any]]:
    """Every (variant, precision, chunk, batch) cell, one row each."""
    rows = []
    for name in args.variants:
        cfg = VARIANTS[name]
        for prec in args.precisions:
            model = build_model(cfg, DTYPES[prec], device)
            for frames in args.chunks:
                for b in args.batches:
                    t = time_step(model, b, frames, args.target_s)
                    rows.append(
                        {
                            "variant": name,
                            "precision": prec,
                            "chunk_frames": frames,
                            "batch": b,
                            "latency_ms": t.seconds * 1e3,
                            "per_stream_ms": t.seconds * 1e3 / b,
                            "wall_ms": t.wall_s * 1e3,
                            "repeats": t.repeats,
                        }
                    )
                    print(_progress(rows[-1]), flush=True)
    return rows


def _progress(r: dict[str, Any]) -> str:
    return (
        f"{r['variant']} {r['precision']} chunk {r['chunk_frames']} B={r['batch']}: "
        f"{r['latency_ms']:.2f} ms ({r['per_stream_ms']:.2f} ms/stream, {r['repeats']} repeats)"
    )


def add_floor(rows: list[dict[str, Any]], rates: dict[str, Any], device: torch.device) -> None:
    """Attach the compute and memory floors (fp32 matmul rate, fp32 weight bytes) to each row."""
    models = {n: DS2(c, folded=True) for n, c in VARIANTS.items()}
    fp32_rate = rates["matmul_flops_per_s"]["fp32" if device.type == "cpu" else "fp16"]
    for r in rows:
        cfg = VARIANTS[r["variant"]]
        flops = sum(chunk_flops(cfg, r["chunk_frames"], r["batch"]).values())
        dtype = torch.float32 if device.type == "cpu" else DTYPES[r["precision"]]
        nbytes = weight_bytes(models[r["variant"]], dtype)
        r["flops"] = flops
        r["floor_compute_ms"] = flops / fp32_rate * 1e3
        r["floor_memory_ms"] = nbytes / rates["bandwidth_bytes_per_s"] * 1e3
        r["floor_ms"] = max(r["floor_compute_ms"], r["floor_memory_ms"])
        r["of_floor"] = r["latency_ms"] / r["floor_ms"]
        r["chunk_ms"] = r["chunk_frames"] * cfg.features.hop_ms
        r["streams_at_real_time"] = r["chunk_ms"] / r["per_stream_ms"]


def batching_gain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-stream cost at batch 1 over batch 8 and over batch 32, per variant/precision/chunk."""
    out = []
    keys = sorted({(r["variant"], r["precision"], r["chunk_frames"]) for r in rows})
    for key in keys:
        cost = {r["batch"]: r["per_stream_ms"] for r in rows if _key(r) == key}
        if 1 not in cost:
            continue
        out.append(
            {
                "variant": key[0],
                "precision": key[1],
                "chunk_frames": key[2],
                "b1_over_b8": cost[1] / cost[8] if 8 in cost else None,
                "b1_over_b32": cost[1] / cost[32] if 32 in cost else None,
            }
        )
    return out


def _key(r: dict[str, Any]) -> tuple[str, str, int]:
    return (r["variant"], r["precision"], r["chunk_frames"])


# -- DS2 §7.2: the recurrent step against a plain BLAS matmul -----------------------------------


def recurrent_vs_blas(
    device: torch.device, dtype: torch.dtype, hidden: list[int], batches: list[int]
) -> list[dict[str, Any]]:
    """Per hidden size H and batch N: a plain `torch.mm` of the recurrent weights [3H, H] by
    h [H, N] (cuBLAS on CUDA, the CPU BLAS otherwise), and one full GRU step of ours (the same
    product through `nn.Linear` plus the gates). Effective GFLOP/s count the product only."""
    out = []
    for h in hidden:
        cfg = ModelConfig(rnn_hidden=h, rnn_layers=1)
        layer = build_model(cfg, dtype, device).rnn_stack[0]
        w = layer.recurrent.weight.detach()
        for n in batches:
            x = torch.randn(n, h, device=device).to(dtype)
            u = torch.randn(n, 3 * h, device=device).to(dtype)
            flops = 2 * 3 * h * h * n
            with torch.no_grad():
                t_mm = time_call(_bind(torch.mm, w, x.t()), device, 0.3, 200)
                t_gru = time_call(_bind(layer._cell, u, x), device, 0.3, 200)
            out.append(
                {
                    "hidden": h,
                    "batch": n,
                    "blas_us": t_mm.seconds * 1e6,
                    "gru_step_us": t_gru.seconds * 1e6,
                    "blas_gflops": flops / t_mm.seconds / 1e9,
                    "gru_step_gflops": flops / t_gru.seconds / 1e9,
                    "weight_gb_per_s_blas": w.numel() * w.element_size() / t_mm.seconds / 1e9,
                }
            )
    return out


def _bind(fn: Callable[[Tensor, Tensor], Tensor], a: Tensor, b: Tensor) -> Callable[[], Tensor]:
    return lambda: fn(a, b)


# -- report -----------------------------------------------------------------------------------


def describe(c: ModelConfig) -> str:
    return (
        f"{c.conv_layers} x {c.conv_type} conv ({c.conv_channels} ch, time kernel "
        f"{c.conv_time_kernel}, stride {c.time_stride}), {c.rnn_layers} x {c.rnn_type.upper()} "
        f"{c.rnn_hidden}, row conv tau {c.row_conv_tau}"
    )


def markdown(result: dict[str, Any]) -> str:
    m = result["meta"]
    rates = m["matmul_flops_per_s"]
    lines = [
        f"# Streaming step cost on {m['device_name']}",
        "",
        f"torch {m['torch']}, {m['threads']} thread(s), CPU capability {m['cpu_capability']}; "
        f"load average before/after: {m['load_before']} / {m['load_after']}.",
        "Measured matmul rate: "
        + ", ".join(f"{p} {r / 1e9:.1f} GFLOP/s" for p, r in rates.items())
        + f"; copy bandwidth {m['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s.",
        "",
    ]
    for name, v in m["variants"].items():
        lines.append(
            f"- `{name}`: {v['describe']}; {v['parameters']:,} parameters, "
            f"{v['fp32_weight_mb']:.1f} MB in fp32"
        )
    lines += ["", *_notes(m), "", *_grid_table(result["rows"], m["precisions"])]
    lines += ["", *_gain_table(result["batching_gain"])]
    if result.get("recurrent_vs_blas"):
        lines += ["", *_blas_table(result["recurrent_vs_blas"], m)]
    return "\n".join(lines) + "\n"


def _notes(m: dict[str, Any]) -> list[str]:
    return [
        f"Latency is the median ({m['clock']}; wall-clock medians are in results.json) of "
        "repeats of one `streaming.step` on B stacked streams in steady state; per stream = latency / B. Floor = max(FLOPs / fp32 matmul rate, fp32 "
        "weight bytes / copy bandwidth), both measured above in this run"
        + (" (fp16 rate and fp16 bytes on CUDA)" if m["device"] == "cuda" else "")
        + "; `x floor` is fp32 latency over that floor; `streams` = how many streams one "
        "process keeps at real time in fp32 (chunk duration / per-stream cost).",
        *m.get("remarks", []),
    ]


def _grid_table(rows: list[dict[str, Any]], precisions: list[str]) -> list[str]:
    head = "| model | chunk | B | floor ms (compute / memory) |"
    head += "".join(f" {p} ms | {p} ms/stream |" for p in precisions)
    head += f" {precisions[0]} x floor | streams |"
    out = [head, "|" + " --- |" * (head.count("|") - 1)]
    cells: dict[tuple[str, int, int], dict[str, dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["variant"], r["chunk_frames"], r["batch"]), {})[r["precision"]] = r
    for (variant, chunk, b), by_prec in cells.items():
        any_r = next(iter(by_prec.values()))
        line = f"| {variant} | {chunk} ({any_r['chunk_ms']:.0f} ms) | {b} | "
        line += f"{any_r['floor_ms']:.2f} ({any_r['floor_compute_ms']:.2f} / {any_r['floor_memory_ms']:.2f}) |"
        for p in precisions:
            cell = by_prec.get(p)
            line += (
                f" {cell['latency_ms']:.1f} | {cell['per_stream_ms']:.2f} |" if cell else " - | - |"
            )
        first = by_prec.get(precisions[0])
        line += (
            f" {first['of_floor']:.1f} | {first['streams_at_real_time']:.0f} |" if first else " | |"
        )
        out.append(line)
    return out


def _gain_table(gains: list[dict[str, Any]]) -> list[str]:
    out = [
        "What Batch Dispatch can gain: per-stream cost at batch 1 over batch 8 and batch 32.",
        "",
        "| model | precision | chunk | B1 / B8 | B1 / B32 |",
        "| --- | --- | --- | --- | --- |",
    ]
    for g in gains:
        b8 = f"{g['b1_over_b8']:.1f}x" if g["b1_over_b8"] else "-"
        b32 = f"{g['b1_over_b32']:.1f}x" if g["b1_over_b32"] else "-"
        out.append(f"| {g['variant']} | {g['precision']} | {g['chunk_frames']} | {b8} | {b32} |")
    return out


def _blas_table(rows: list[dict[str, Any]], m: dict[str, Any]) -> list[str]:
    out = [
        f"Recurrent step vs a plain BLAS matmul (DS2 §7.2, Figure 7) in {m['blas_precision']}: "
        "y = U h with U [3H, H], h [H, N]; GFLOP/s count the product only.",
        "",
        "| H | N | BLAS us | BLAS GFLOP/s | BLAS weight GB/s | GRU step us | GRU step GFLOP/s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        out.append(
            f"| {r['hidden']} | {r['batch']} | {r['blas_us']:.1f} | {r['blas_gflops']:.1f} | "
            f"{r['weight_gb_per_s_blas']:.1f} | {r['gru_step_us']:.1f} | {r['gru_step_gflops']:.1f} |"
        )
    return out


# -- command line -----------------------------------------------------------------------------


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x]


def _names(s: str) -> list[str]:
    return [x for x in s.split(",") if x]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out",
        default="bench-out/model",
        help="directory for results.json/.md (`make bench-model` refreshes the shipped "
        "figures in results/)",
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument("--variants", type=_names, default=list(VARIANTS), help="of: 2d,1d")
    p.add_argument("--precisions", type=_names, help="default fp32,bf16,fp16 (CPU), fp16 (CUDA)")
    p.add_argument("--chunks", type=_ints, default=[16, 4], help="chunk lengths in frames")
    p.add_argument("--batches", type=_ints, default=[1, 2, 4, 8, 16, 32])
    p.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--target-s", type=float, default=1.0, help="timing budget per cell")
    p.add_argument("--blas-hidden", type=_ints, default=[512, 2560], help="H for the §7.2 table")
    p.add_argument("--remark", action="append", default=[], help="a note for results.md")


def run(args: argparse.Namespace) -> dict[str, Any]:
    device = torch.device(args.device)
    torch.set_num_threads(args.threads)
    precisions = args.precisions or (["fp16"] if device.type == "cuda" else list(DTYPES))
    args.precisions = precisions
    for name in args.variants:
        if name not in VARIANTS:
            raise SystemExit(f"unknown variant {name!r}; choose from {', '.join(VARIANTS)}")
    load_before = load_average()
    rates = machine_rates(device, sorted(set(precisions) | {"fp32"}))
    rows = bench_grid(args, device)
    add_floor(rows, rates, device)
    blas_dtype = DTYPES["fp16" if device.type == "cuda" else "fp32"]
    blas = recurrent_vs_blas(device, blas_dtype, args.blas_hidden, list(range(1, 11)))
    meta = _meta(args, device, rates, load_before)
    meta["blas_precision"] = "fp16" if device.type == "cuda" else "fp32"
    return {
        "meta": meta,
        "rows": rows,
        "batching_gain": batching_gain(rows),
        "recurrent_vs_blas": blas,
    }


def load_average() -> str:
    """The 1/5/15-minute load average, to say what else ran beside a benchmark."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _meta(
    args: argparse.Namespace, device: torch.device, rates: dict[str, Any], load_before: str
) -> dict[str, Any]:
    variants = {}
    for name in args.variants:
        model = DS2(VARIANTS[name], folded=True)
        variants[name] = {
            "describe": describe(VARIANTS[name]),
            "config": VARIANTS[name].to_dict(),
            "parameters": model.num_parameters(),
            "fp32_weight_mb": weight_bytes(model, torch.float32) / 1e6,
        }
    cuda = device.type == "cuda"
    return {
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if cuda else cpu_description(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "clock": "thread CPU time" if not cuda and torch.get_num_threads() == 1 else "wall clock",
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "load_before": load_before,
        "load_after": load_average(),
        "precisions": args.precisions,
        "variants": variants,
        "remarks": args.remark,
        **rates,
    }


def main(args: argparse.Namespace) -> int:
    result = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "" if result["meta"]["device"] == "cpu" else "_cuda"
    (out / f"results{suffix}.json").write_text(json.dumps(result, indent=1) + "\n")
    text = markdown(result)
    (out / f"results{suffix}.md").write_text(text)
    print(text)
    return 0
