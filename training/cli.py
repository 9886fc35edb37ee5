"""`harken train`'s command line: every TrainConfig field as a flag, the model's
architecture flags, the batch strategy, and the run's bundles (training/export.py)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from models.bundle import BundleError
from models.config import INFERENCE_ONLY, ModelConfig, parse_bool
from models.manifest import Utterance, read_manifest
from training.batching import STRATEGIES, BatchConfig, padding_ratio
from training.export import dev_cer_of, export, export_checkpoint
from training.train import TrainConfig, Trainer

# each architecture flag's line in `harken train --help` (the ModelConfig field comments say why)
MODEL_HELP = {
    "conv_type": "2d: convolutions over frequency and time; 1d: over time only",
    "conv_layers": "convolution layers, 1 to 3",
    "conv_channels": "channels of each 2D convolution, or width of each 1D one",
    "conv_time_kernel": "convolution context in frames, odd (its right half is look-ahead)",
    "conv_freq_kernel": "2D only: the first convolution's height over frequency",
    "conv_freq_stride": "2D only: frequency stride of each convolution",
    "time_stride": "stride in time of the first convolution (output frames per input frame)",
    "rnn_type": "recurrent cell: gru or rnn (plain, clipped ReLU)",
    "rnn_layers": "unidirectional recurrent layers",
    "rnn_hidden": "units of each recurrent layer",
    "row_conv_tau": "future output frames the row convolution sees (its look-ahead)",
    "rnn_residual_layers": "top recurrent layers that add their input to their output; 0: none",
    "clip": "ceiling of the clipped ReLU",
}
# each TrainConfig flag's line in `harken train --help`: what it does, what 0 or '' means
TRAIN_HELP = {
    "optimizer": "adamw, or sgd (with Nesterov momentum)",
    "lr": "peak learning rate, reached at the end of the warm-up",
    "min_lr_ratio": "the cosine decay ends at --lr times this",
    "warmup_steps": "steps of linear warm-up from 0 to --lr",
    "weight_decay": "AdamW's decoupled weight decay, or SGD's L2 penalty",
    "momentum": "SGD's momentum (AdamW ignores it)",
    "grad_clip": "largest global gradient norm; a larger gradient is scaled down to it",
    "epochs": "passes over the training manifests",
    "max_steps": "stop after this many optimiser steps; 0: no limit",
    "time_budget_s": "stop after this many seconds of training; 0: no limit",
    "precision": "autocast precision (fp16 on CUDA only); auto: bf16 where the hardware has "
    "it, else fp32 on a CPU and fp16 on CUDA",
    "checkpoint_every": "optimiser steps between checkpoints in --out",
    "workers": "DataLoader processes that featurise and augment",
    "augment": "on-the-fly augmentation (noise, speed, gain, rooms, warps, masks); false: none",
    "augment_preset": "which augmentation: full, light (noise and rooms a quarter as often) or "
    "formant (light, with per-region warps)",
    "p_lowpass": "probability per training example of a random low-pass at 3.4-7 kHz (a "
    "band-limited recording); 0: never",
    "p_telephone": "probability per training example of the telephone channel (300-3,400 Hz "
    "at 8 kHz through mu-law); 0: never",
    "p_8bit": "probability per training example of 8-bit quantisation; 0: never",
    "norm_utterances": "training utterances measured for the input normalisation statistics",
    "dev_limit": "dev utterances scored per epoch; 0: all",
    "dev_every": "also score dev every this many steps, into the log; 0: at epoch ends only",
    "init_from": "a bundle to fine-tune (its LM and search settings go into the exported "
    "bundles too); '': start from scratch",
    "calibration_utterances": "training utterances that re-derive a fine-tuned bundle's "
    "BatchNorm statistics",
    "ema_decay": "score and export a moving average of the weights with this decay; 0: the "
    "weights as trained",
    "teacher": "a `harken teacher` targets directory, distilled into the hidden state (with "
    "--distill-weight); '': none",
    "distill_weight": "weight of the distillation loss beside CTC's (with --teacher); 0: none",
    "seed": "random seed of the initial weights, the batch order and the augmentation",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--train",
        required=True,
        nargs="+",
        metavar="MANIFEST[*N]",
        help="training manifests (JSON Lines), joined; '*N' repeats one N times per epoch, "
        "so a small corpus (real speech beside hours of TTS) gets a share worth learning from",
    )
    p.add_argument("--dev", help="dev manifest for per-epoch greedy WER/CER")
    p.add_argument(
        "--out",
        required=True,
        help="run directory: checkpoint.pt, log.jsonl, bundle/ (the latest model) and, with "
        "--dev, best/ (the weights of the lowest dev CER so far)",
    )
    p.add_argument("--export", help="bundle directory to write at the end (default OUT/bundle)")
    p.add_argument(
        "--export-only",
        type=_bool,
        default=False,
        help="write the bundle from OUT's checkpoint and stop, without training: a run killed "
        "mid-epoch has its latest weights (the average, with --ema-decay) only there",
    )
    device = "cuda" if torch.cuda.is_available() else "cpu"
    p.add_argument(
        "--device", default=device, help=f"where to train: cpu or cuda (default {device})"
    )
    p.add_argument(
        "--model-config",
        help="JSON file of ModelConfig fields; the flags below override it, and a field in "
        "neither keeps its default",
    )
    for f in dataclasses.fields(ModelConfig):
        if f.name not in ("features", "alphabet", *INFERENCE_ONLY):
            p.add_argument(
                f"--{f.name.replace('_', '-')}",
                type=type(f.default) if f.default is not None else str,
                help=f"{MODEL_HELP[f.name]} (default: --model-config's, else {f.default})",
            )
    for f in dataclasses.fields(TrainConfig):
        kind: Any = _bool if isinstance(f.default, bool) else type(f.default)
        p.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=kind,
            default=f.default,
            help=f"{TRAIN_HELP[f.name]} (default {f.default!r})",
        )
    p.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="alternated",
        help="how utterances are grouped into batches: random, sorted by length, bucketing "
        "(random within length buckets) or alternated (length bins sorted in alternating "
        "directions) (default alternated)",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        default=32,
        help="utterances per global batch, summed over data-parallel ranks (default 32)",
    )
    p.add_argument(
        "--bins",
        type=int,
        default=64,
        help="length bins of --strategy alternated, or buckets of bucketing (default 64)",
    )
    p.add_argument(
        "--sortagrad",
        type=_bool,
        default=True,
        help="the first epoch in increasing length order (SortaGrad) (default true)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch threads per process (0: the cores, shared among torchrun's ranks); set 1 "
        "each when two runs share a machine, since oversubscribed threads wait on each other",
    )


def read_training_manifests(specs: Sequence[str]) -> list[Utterance]:
    """Every `MANIFEST[*N]` read (audio checked) and joined, each repeated N times."""
    out: list[Utterance] = []
    for spec in specs:
        path, star, times = spec.rpartition("*") if "*" in spec else (spec, "", "1")
        if not times.isdigit() or int(times) < 1:
            raise ValueError(f"--train {spec!r}: the repeat count after '*' must be 1 or more")
        out += read_manifest(path, check_audio=True) * int(times)
    return out


def _bool(v: str) -> bool:
    """argparse's type for true/false flags: parse_bool, with argparse's own error."""
    try:
        return parse_bool(v)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def model_config_from_args(args: argparse.Namespace) -> ModelConfig:
    base: dict[str, Any] = (
        json.loads(Path(args.model_config).read_text()) if args.model_config else {}
    )
    for f in dataclasses.fields(ModelConfig):
        v = getattr(args, f.name, None)
        if v is not None and f.name not in ("features", "alphabet", *INFERENCE_ONLY):
            base[f.name] = v
    return ModelConfig.from_dict(base)


def main(args: argparse.Namespace) -> int:
    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = True  # fp32 training at TF32 matmul speed
        torch.backends.cudnn.allow_tf32 = True
    cores = len(os.sched_getaffinity(0))
    torch.set_num_threads(args.threads or max(1, cores // int(os.environ.get("WORLD_SIZE", "1"))))
    try:  # flags first, so a bad one is named before any data is read
        cfg = TrainConfig(
            **{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)}
        )
        batch_cfg = BatchConfig(args.strategy, args.batch_size, args.bins, args.sortagrad, cfg.seed)
        model_cfg = model_config_from_args(args)
        train = read_training_manifests(args.train)
        dev = read_manifest(args.dev, check_audio=True) if args.dev else []
        trainer = Trainer(model_cfg, cfg, batch_cfg, train, dev, Path(args.out), args.device)
    except ValueError as e:  # a bad flag, or a broken (its line named) or empty manifest
        print(f"harken train: error: {e}", file=sys.stderr)
        return 2
    if trainer.dist.main:
        pad = padding_ratio(trainer.sampler.global_batches(), trainer.train_set.durations())
        print(
            f"{len(train)} utterances, {trainer.steps_per_epoch} steps/epoch, padding ratio {pad:.3f}, "
            f"{trainer.model.num_parameters():,} parameters, {trainer.cfg.precision}"
        )
        if trainer.teacher is not None:
            have = trainer.teacher.covers(train)
            print(
                f"teacher targets for {have} of {len(train)} training utterances ({args.teacher})"
            )
    bundle = Path(args.export or Path(args.out) / "bundle")
    manifests = " ".join(args.train)
    if args.export_only:
        return export_checkpoint(trainer, bundle, manifests)
    best = Path(args.out) / "best"
    resuming = (Path(args.out) / "checkpoint.pt").exists()

    def keep_best(t: Trainer) -> None:
        # a resumed run may meet scores between its checkpoint's best and the bundle kept
        # after that checkpoint, so only a lower one replaces it; a fresh run owns best/
        held = dev_cer_of(best) if resuming else None
        if held is None or (t.progress.best_dev_cer or 0.0) < held:
            where = export(t, best, manifests)
            print(f"best dev CER so far ({t.progress.best_dev_cer:.3f}): bundle written to {where}")

    try:
        trainer.fit(
            on_epoch=lambda t: print(f"bundle written to {export(t, bundle, manifests)}"),
            on_best=keep_best,
        )
    except BundleError as e:  # --init-from's bundle does not fit the run's flags
        print(f"harken train: error: {e}", file=sys.stderr)
        return 2
    if trainer.dist.world > 1:
        dist.barrier()  # every rank done with the group before any tears it down
        dist.destroy_process_group()
    return 0
