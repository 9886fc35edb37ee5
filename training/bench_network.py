"""Network shapes compared for training on this machine (issue 17: spend DS2 §3.6's cheaper
input on depth and width, DS2 §3.5): per variant, the training throughput the real trainer
reaches (audio seconds per second, data loading and augmentation included), its parameters,
and, when the budget allows it, the dev CER after the same wall-clock budget.

    python -m training.bench_network --train T.jsonl --dev D.jsonl --budget-s 120 \
        --out bench-out/network

Each variant trains from scratch with the same data, batch, precision and schedule, one after
another under the same background load, so the ratios between rows are what to read; a
short budget measures speed only (CER from scratch needs far longer than a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import torch

from models.config import FeatureConfig, ModelConfig
from models.manifest import Utterance, read_manifest
from models.precision import cpu_description
from training.batching import BatchConfig
from training.bench_batching import budgeted_run, save_report, subset

_LIFTERED = FeatureConfig(cepstral_lifter=48)
_MEL = FeatureConfig(cepstral_lifter=48, n_mels=80)


def _net(features: FeatureConfig, stride: int, layers: int, hidden: int) -> ModelConfig:
    """The default model's front end (2 x 1D conv of 256, time kernel 11, row conv tau 10)
    with this input, stride and recurrent stack."""
    return ModelConfig(
        features=features,
        conv_type="1d",
        conv_layers=2,
        conv_channels=256,
        time_stride=stride,
        rnn_layers=layers,
        rnn_hidden=hidden,
        row_conv_tau=10,
    )


# The shipped default's shape first; then 80 log-mel bins and stride 3 paying for more layers
# and units. Stride 3 leaves 33 outputs a second, still twice English's character rate.
VARIANTS: dict[str, ModelConfig] = {
    "shipped 161 lin s2 3x384": _net(_LIFTERED, 2, 3, 384),
    "mel80 s2 3x384": _net(_MEL, 2, 3, 384),
    "mel80 s3 3x512": _net(_MEL, 3, 3, 512),
    "mel80 s3 5x512": _net(_MEL, 3, 5, 512),
    "mel80 s3 3x768": _net(_MEL, 3, 3, 768),
}


def run_variant(
    name: str, train: list[Utterance], dev: list[Utterance], args: argparse.Namespace
) -> dict[str, Any]:
    """Train one variant for the budget; its speed, size and (optionally) dev CER."""
    model_cfg = VARIANTS[name]
    batch_cfg = BatchConfig("alternated", args.batch_size, 16, sortagrad=False, seed=0)
    trainer, progress, wall, scores = budgeted_run(
        model_cfg, batch_cfg, train, dev, args.lr, 100, args.budget_s, args.precision, args.score
    )
    return {
        "variant": name,
        "parameters": trainer.model.num_parameters(),
        "output_frames_per_s": round(1 / model_cfg.frame_seconds, 1),
        "audio_s_per_s": round(progress.audio_seconds / max(progress.train_seconds, 1e-9), 2),
        "steps": progress.step,
        "train_seconds": round(progress.train_seconds, 1),
        "wall_seconds": round(wall, 1),
        "dev_cer": round(scores["cer"], 4) if "cer" in scores else None,
        "config": model_cfg.to_dict() | {"alphabet": None},
    }


def markdown(results: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    base = results[0]["audio_s_per_s"]
    lines = [
        "# Network shapes: training throughput on this machine",
        "",
        f"CPU: {meta['cpu']}; torch {meta['torch']}, {meta['threads']} threads, "
        f"{meta['precision']}; batch {meta['batch_size']}, {meta['budget_s']:g} s of training "
        f"per variant from scratch on {meta['train_hours']} h of the training set, one "
        "DataLoader worker (featurising and augmenting on the fly). Load average before / "
        f"after (1, 5, 15 min): {meta['load_average_before_after']}.",
        "",
        "| variant | parameters | outputs/s | audio s/s | vs first | steps | dev CER |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        cer = "-" if r["dev_cer"] is None else f"{r['dev_cer']:.3f}"
        lines.append(
            f"| {r['variant']} | {r['parameters']:,} | {r['output_frames_per_s']:g} | "
            f"{r['audio_s_per_s']:.1f} | {r['audio_s_per_s'] / base:.2f}x | {r['steps']} | "
            f"{cer} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train", required=True)
    p.add_argument("--dev", required=True)
    p.add_argument("--out", default="bench-out/network")  # outside the packages
    p.add_argument("--hours", type=float, default=1.0, help="training subset size")
    p.add_argument("--dev-utterances", type=int, default=100)
    p.add_argument("--budget-s", type=float, default=120.0, help="training time per variant")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=1.5e-3)
    p.add_argument("--precision", choices=("bf16", "fp32"), default="bf16")
    p.add_argument("--score", action="store_true", help="also score dev CER after the budget")
    p.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names")
    args = p.parse_args(argv)
    names = args.variants.split(",")
    if unknown := [n for n in names if n not in VARIANTS]:
        p.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    load_before = os.getloadavg()
    train = subset(read_manifest(args.train, check_audio=True), args.hours, seed=0)
    dev = read_manifest(args.dev, check_audio=True)[: args.dev_utterances]
    results = []
    for name in names:
        results.append(run_variant(name, train, dev, args))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "config"}), flush=True)
    meta = {
        "cpu": cpu_description(),  # throughput differs most between CPU kinds
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "precision": args.precision,
        "batch_size": args.batch_size,
        "budget_s": args.budget_s,
        "train_hours": round(sum(u.duration or 0.0 for u in train) / 3600, 2),
        "load_average_before_after": [round(x, 2) for x in (*load_before, *os.getloadavg())],
    }
    save_report(Path(args.out), "network", meta, results, markdown(results, meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
