"""Batch construction strategies compared as seeds/003 Table 2 does: for each strategy, the
padding ratio of its batches, the training throughput it allows, and the dev CER that the
same model reaches after the same wall-clock budget, all measured side by side in one run.

    python -m training.bench_batching --train T.jsonl --dev D.jsonl --budget-s 480 --out bench-out/batching

A fixed time budget (rather than a fixed number of steps) is the fair comparison here: a
strategy that pads less gets through more audio in the same time, and one that batches
similar lengths together sees less varied batches; the CER after the budget weighs both.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch

from models.config import ModelConfig
from models.manifest import Utterance, read_manifest
from training.batching import STRATEGIES, BatchConfig, epoch_batches, padding_ratio
from training.train import Progress, TrainConfig, Trainer

# Small enough that each strategy gets several epochs of a subset inside a few minutes on
# two CPU cores, large enough to learn something that CER can rank.
BENCH_MODEL = ModelConfig(conv_channels=8, conv_time_kernel=5, rnn_layers=2, rnn_hidden=192)


def subset(utts: list[Utterance], hours: float, seed: int) -> list[Utterance]:
    """A random subset of about `hours` of audio (all of it when there is less)."""
    order = np.random.default_rng(seed).permutation(len(utts))
    out, total = [], 0.0
    for i in order:
        if total >= hours * 3600:
            break
        out.append(utts[int(i)])
        total += utts[int(i)].duration or 0.0
    return out


def run_strategy(
    strategy: str, train: list[Utterance], dev: list[Utterance], args: argparse.Namespace
) -> dict[str, Any]:
    """Train the bench model for the budget with one strategy; its padding, speed and CER."""
    batch_cfg = BatchConfig(strategy, args.batch_size, args.bins, sortagrad=False, seed=0)
    trainer, progress, wall, scores = budgeted_run(
        BENCH_MODEL, batch_cfg, train, dev, args.lr, 50, args.budget_s, "fp32", score=True
    )
    lengths = trainer.train_set.durations()
    pads = [padding_ratio(epoch_batches(lengths, batch_cfg, e), lengths) for e in range(3)]
    return {
        "strategy": strategy,
        "padding_ratio": round(float(np.mean(pads)), 4),
        "audio_s_per_s": round(progress.audio_seconds / max(progress.train_seconds, 1e-9), 2),
        "steps": progress.step,
        "epochs": round(progress.step / max(trainer.steps_per_epoch, 1), 2),
        "train_seconds": round(progress.train_seconds, 1),
        "wall_seconds": round(wall, 1),
        "dev_cer": round(scores.get("cer", float("nan")), 4),
        "dev_wer": round(scores.get("wer", float("nan")), 4),
    }


def budgeted_run(
    model_cfg: ModelConfig,
    batch_cfg: BatchConfig,
    train: list[Utterance],
    dev: list[Utterance],
    lr: float,
    warmup_steps: int,
    budget_s: float,
    precision: Literal["bf16", "fp16", "fp32"],
    score: bool,
) -> tuple[Trainer, Progress, float, dict[str, float]]:
    """Train `model_cfg` from scratch for `budget_s` of training time in a throwaway run
    directory: the trainer, its progress, the wall-clock seconds, and dev scores if asked."""
    cfg = TrainConfig(
        lr=lr,
        warmup_steps=warmup_steps,
        epochs=1000,
        time_budget_s=budget_s,
        precision=precision,
        checkpoint_every=10**9,
        workers=1,
        norm_utterances=200,
    )
    with tempfile.TemporaryDirectory() as out:
        trainer = Trainer(model_cfg, cfg, batch_cfg, train, [], Path(out))
        started = time.perf_counter()
        progress = trainer.fit()
        wall = time.perf_counter() - started
        scores: dict[str, float] = {}
        if score:
            trainer.dev = dev
            scores = trainer.evaluate()
    return trainer, progress, wall, scores


def describe(m: ModelConfig) -> str:
    return (
        f"{m.conv_layers} x {m.conv_type} conv ({m.conv_channels} ch, time kernel "
        f"{m.conv_time_kernel}), {m.rnn_layers} x {m.rnn_type.upper()} {m.rnn_hidden}, "
        f"row conv tau {m.row_conv_tau}"
    )


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# Batch construction strategies (seeds/003 Table 2, on this machine)",
        "",
        f"Model: {meta['model']}; {meta['train_utterances']} training utterances "
        f"({meta['train_hours']} h), {meta['dev_utterances']} dev utterances (held-out voices); "
        f"batch {meta['batch_size']}, {meta['budget_s']} s of training each, fp32 on "
        f"{meta['threads']} CPU threads. No SortaGrad, so that only the strategy differs. "
        f"Load average before / after (1, 5, 15 min): {meta.get('load_average_before_after')}; "
        "every strategy ran under the same background load, one after another.",
        "",
        "| strategy | padding ratio | audio s/s | steps | epochs | dev CER | dev WER |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        lines.append(
            f"| {r['strategy']} | {r['padding_ratio']:.3f} | {r['audio_s_per_s']:.1f} | "
            f"{r['steps']} | {r['epochs']:.2f} | {r['dev_cer']:.3f} | {r['dev_wer']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", required=True)
    p.add_argument("--dev", required=True)
    p.add_argument("--out", default="bench-out/batching")  # outside the packages
    p.add_argument("--hours", type=float, default=1.0, help="training subset size")
    p.add_argument("--dev-utterances", type=int, default=100)
    p.add_argument("--budget-s", type=float, default=480.0, help="training time per strategy")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--bins", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    train = subset(read_manifest(args.train, check_audio=True), args.hours, seed=0)
    dev = read_manifest(args.dev, check_audio=True)[: args.dev_utterances]
    results = []
    for s in args.strategies.split(","):
        results.append(run_strategy(s, train, dev, args))
        print(json.dumps(results[-1]), flush=True)
    meta = {
        "model": describe(BENCH_MODEL),
        "train_utterances": len(train),
        "train_hours": round(sum(u.duration or 0.0 for u in train) / 3600, 2),
        "dev_utterances": len(dev),
        "batch_size": args.batch_size,
        "budget_s": args.budget_s,
        "threads": torch.get_num_threads(),
        "load_average_before_after": [round(x, 2) for x in (*load_before, *os.getloadavg())],
    }
    save_report(Path(args.out), "batching", meta, results, markdown(results, meta))
    return 0


def save_report(
    out: Path, stem: str, meta: dict[str, Any], results: list[dict[str, Any]], table: str
) -> None:
    """`stem`.json (meta and rows) and `stem`.md (the table) in `out`; the table printed."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    (out / f"{stem}.md").write_text(table)
    print(table)


if __name__ == "__main__":
    raise SystemExit(main())
