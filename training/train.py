"""`harken train`: CTC training of a DS2 model from manifests, resumable, data-parallel.

CTC loss, AdamW or SGD with Nesterov momentum, gradient clipping, bf16 autocast where the
hardware runs it natively (fp32 on other CPUs; fp16 AMP on request on CUDA), SortaGrad and
selectable batch construction (training/batching.py), augmentation in DataLoader workers
(training/data.py). A checkpoint holds everything needed to continue exactly where a killed run
stopped: weights, optimiser, step, epoch and the position inside the epoch (batches are a pure
function of seed and epoch; augmentation of seed, epoch and utterance). Launch with
`torchrun --nproc-per-node N -m harken_cli train ...` for synchronous data-parallel SGD (DS2
§4.1): gloo on CPU, NCCL on GPU.

This module is the loop; training/export.py writes its bundles and training/cli.py is
`harken train`'s command line.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader
from tqdm import tqdm

from models.bundle import BundleError, load_bundle, unfold_batchnorm
from models.config import INFERENCE_ONLY, ModelConfig
from models.ds2 import DS2
from models.features import featurize
from models.manifest import Utterance
from models.metrics import error_rates, greedy_decode
from models.precision import bf16_units
from training.augment import AUGMENT_PRESETS, AugmentConfig
from training.batching import BatchConfig, BatchSampler
from training.data import Batch, DataConfig, SpeechDataset, collate, load_audio, worker_init
from training.distill import Distillation
from training.extra_loss import ExtraLoss, WithHeads
from training.grow import widen
from training.pause import PauseClock
from training.teacher import TeacherTargets

PRECISIONS = ("auto", "bf16", "fp16", "fp32")


def training_precision(
    requested: Literal["auto", "bf16", "fp16", "fp32"],
    device: str,
    flags: frozenset[str] | None = None,
) -> Literal["bf16", "fp16", "fp32"]:
    """The autocast dtype a run trains in. auto: bf16 where the hardware runs it natively (a
    GPU that supports it, else fp16; a CPU with AMX or AVX512-BF16: 2.4x fp32's speed on a
    Zen 4), fp32 on other CPUs, where bf16 has no kernels and trains many times slower than
    fp32 (experiments/dtype.md)."""
    if requested != "auto":
        return requested
    if device == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "bf16" if bf16_units(flags) else "fp32"


@dataclass(frozen=True)
class TrainConfig:
    optimizer: Literal["adamw", "sgd"] = "adamw"  # SGD uses Nesterov momentum
    lr: float = 1.5e-3  # peak learning rate after warm-up
    min_lr_ratio: float = 0.05  # cosine decay ends at lr * this
    warmup_steps: int = 300  # linear warm-up from 0
    weight_decay: float = 1e-6  # AdamW decoupled decay / SGD L2
    momentum: float = 0.9  # SGD only
    grad_clip: float = 5.0  # max global gradient norm
    epochs: int = 20  # passes over the training manifest
    max_steps: int = 0  # stop after this many optimiser steps (0: no limit)
    time_budget_s: float = 0.0  # stop after this much training time (0: no limit)
    # autocast dtype (fp16 only on CUDA); auto: training_precision's choice for the hardware
    precision: Literal["auto", "bf16", "fp16", "fp32"] = "auto"
    checkpoint_every: int = 200  # steps between checkpoints
    workers: int = 1  # DataLoader worker processes (featurising + augmentation)
    augment: bool = True  # on-the-fly noise, speed, gain and reverberation
    augment_preset: str = "full"  # which perturbations, with augment (AUGMENT_PRESETS)
    # band effects on top of the preset, each a probability (training/augment.py): a random
    # low-pass (a band-limited recording), the telephone channel, linear 8-bit samples
    p_lowpass: float = 0.0
    p_telephone: float = 0.0
    p_8bit: float = 0.0
    norm_utterances: int = 400  # training utterances measured for normalisation statistics
    dev_limit: int = 0  # dev utterances scored per epoch (0: all)
    dev_every: int = 0  # also score dev every this many steps, into the log (0: epochs only)
    init_from: str = ""  # a bundle to fine-tune (same model config); "" starts from scratch
    calibration_utterances: int = 64  # training utterances that re-derive its BatchNorm
    ema_decay: float = 0.0  # > 0: score and export a moving average of the weights (see ema_rate)
    teacher: str = ""  # `harken teacher` targets: distil them into the hidden state (distill.py)
    distill_weight: float = 0.0  # the distillation loss's weight beside CTC's (with teacher)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )
        if not 0.0 <= self.ema_decay < 1.0:
            raise ValueError(f"ema_decay must be in [0, 1) (0: no averaging), got {self.ema_decay}")
        if self.lr <= 0 or self.grad_clip <= 0:
            raise ValueError(f"lr and grad_clip must be > 0, got {self.lr} and {self.grad_clip}")
        if min(self.epochs, self.checkpoint_every) < 1:
            raise ValueError("epochs and checkpoint_every must be >= 1")
        if self.augment_preset not in AUGMENT_PRESETS:
            raise ValueError(
                f"augment_preset must be one of {sorted(AUGMENT_PRESETS)}, "
                f"got {self.augment_preset!r}"
            )
        bands = {
            "p_lowpass": self.p_lowpass,
            "p_telephone": self.p_telephone,
            "p_8bit": self.p_8bit,
        }
        for name, p in bands.items():
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {p}")
        if not self.augment and any(bands.values()):
            raise ValueError(
                "p_lowpass, p_telephone and p_8bit are augmentation: they need augment on"
            )
        if bool(self.teacher) != (self.distill_weight > 0):
            raise ValueError(
                "teacher and distill_weight go together: a teacher's targets directory and a "
                f"weight > 0, or neither (got {self.teacher!r} and {self.distill_weight})"
            )

    def augmentation(self) -> AugmentConfig | None:
        """The preset with this run's band effects; None without augmentation."""
        if not self.augment:
            return None
        return dataclasses.replace(
            AUGMENT_PRESETS[self.augment_preset],
            p_lowpass=self.p_lowpass,
            p_telephone=self.p_telephone,
            p_8bit=self.p_8bit,
        )

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "a saved run") -> TrainConfig:
        """A TrainConfig from a checkpoint's or run record's `train_config`. Fields of the
        techniques the consolidation removed (REMOVED) are dropped where they hold their
        neutral value; one that was on is refused (`refuse_removed`), so a resumed run never
        silently trains without it. Fields this version does not know are refused too."""
        refuse_removed(d, where)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known - set(REMOVED))
        if unknown:
            raise ValueError(f"{where} has train_config fields this trainer lacks: {unknown}")
        return cls(**{k: v for k, v in d.items() if k in known})


# TrainConfig fields of techniques that were tried and not adopted (experiments/*.md), with
# the value each had when off; their code was removed from the product in the consolidation
# and is at commit 13cc3b3. A field whose technique is off may hold any value (the head's
# layer, say, of a run without the head): only the switches are compared.
REMOVED: dict[str, tuple[Any, str]] = {
    "soft_teacher": ("", "soft targets (experiments/soft.md)"),
    "soft_weight": (0.0, "soft targets (experiments/soft.md)"),
    "adversary_scale": (0.0, "the voice adversary (experiments/adversary.md)"),
    "adversary_layer": (None, "the voice adversary"),
    "phone_lexicon": ("", "phone targets (experiments/phones.md)"),
    "phone_weight": (0.0, "phone targets (experiments/phones.md)"),
    "phone_layer": (None, "phone targets"),
    "phone_probe_steps": (None, "phone targets"),
    "phone_head_lr": (None, "phone targets"),
    "row_conv_lr": (1.0, "the row convolution's own rate (experiments/rowconv.md)"),
    "residual_lr": (1.0, "the residual layers' own rate (experiments/deep.md)"),
    "residual_gain": (0.0, "deepening's starting gain (experiments/deep.md)"),
    "consistency_weight": (0.0, "consistency regularisation (experiments/consistency.md)"),
    "dropout": (0.0, "dropout (experiments/dropout.md)"),
}
REMOVED_AT = "13cc3b3"


def refuse_removed(d: Mapping[str, Any], where: str) -> None:
    """Raise ValueError naming every removed technique that `d` (a saved train_config) had
    on: this trainer cannot continue or reproduce such a run."""
    on = [
        f"{k}={d[k]!r} ({what})"
        for k, (neutral, what) in REMOVED.items()
        if neutral is not None and k in d and d[k] not in (neutral, None)
    ]
    if on:
        raise ValueError(
            f"{where} was trained with {', '.join(on)}, which this trainer no longer has (the "
            f"code was removed in the consolidation; it is at commit {REMOVED_AT}): continue "
            "it there, or start a new --out"
        )


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0  # global batches of `epoch` already taken
    train_seconds: float = 0.0
    audio_seconds: float = 0.0
    history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    best_dev_cer: float | None = None  # the lowest dev greedy CER scored so far in this run
    skipped_steps: int = 0  # batches whose loss or gradient was not finite: never applied


def ema_rate(decay: float, step: int) -> float:
    """The weight averaging's decay after `step` optimiser steps: `decay`, ramped up from
    0.1 so the average follows the first steps of a run closely ((1 + t) / (10 + t), as
    TensorFlow's ExponentialMovingAverage does with num_updates).

    Why average: at batch 16 the weights jitter around the minimum the optimiser is heading
    for; their moving average sits nearer to it, and reads dev better
    (experiments/averaging.md)."""
    return min(decay, (1 + step) / (10 + step))


def learning_rate(cfg: TrainConfig, step: int, total_steps: int, seconds: float = 0.0) -> float:
    """Linear warm-up, then cosine decay to lr * min_lr_ratio: a pure function of the step
    (and, under a time budget, of the training time spent, whichever is further along), so a
    resumed run follows the same schedule and a budgeted run still ends at the low rate."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    frac = min(1.0, (step - cfg.warmup_steps) / max(1, total_steps - cfg.warmup_steps))
    if cfg.time_budget_s > 0:
        frac = max(frac, min(1.0, seconds / cfg.time_budget_s))
    return cfg.lr * (
        cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * frac))
    )


@dataclass
class Dist:
    rank: int = 0
    world: int = 1
    device: torch.device = dataclasses.field(default_factory=lambda: torch.device("cpu"))

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup_distributed(device: str) -> Dist:
    """Join the torchrun process group if launched by torchrun; otherwise one process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    dev = torch.device(device)
    if world == 1:
        return Dist(device=dev)
    backend = "nccl" if dev.type == "cuda" else "gloo"
    dist.init_process_group(backend)
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if dev.type == "cuda":
        dev = torch.device("cuda", local)
        torch.cuda.set_device(dev)
    return Dist(rank=dist.get_rank(), world=world, device=dev)


def _spread(n: int, limit: int) -> list[int]:
    """Up to `limit` indices spread evenly over n items, in order."""
    return sorted(set(np.linspace(0, n - 1, num=min(n, limit)).astype(int).tolist()))


def clean_features(dataset: SpeechDataset, limit: int) -> Iterator[npt.NDArray[np.float32]]:
    """Unaugmented features of up to `limit` utterances spread evenly over the dataset."""
    for i in _spread(len(dataset), limit):
        audio = load_audio(str(dataset.utterances[i].audio))
        yield featurize(audio, dataset.cfg.features)


def training_features(dataset: SpeechDataset, limit: int) -> Iterator[torch.Tensor]:
    """Features of up to `limit` utterances spread evenly over the dataset, as the run's
    batches see them (augmented when it augments): the statistics that BatchNorm's running
    averages track once training starts."""
    for i in _spread(len(dataset), limit):
        yield dataset[i].feats


@torch.no_grad()
def measure_normalization(model: DS2, dataset: SpeechDataset, limit: int) -> None:
    """Per-bin mean and std of clean training features, stored in the model (DS2 §7)."""
    total = torch.zeros(model.config.features.n_bins, dtype=torch.float64)
    sq, count = total.clone(), 0
    for feats in clean_features(dataset, limit):
        f = torch.from_numpy(feats).double()
        total += f.sum(0)
        sq += (f * f).sum(0)
        count += f.shape[0]
    mean = total / max(count, 1)
    std = (sq / max(count, 1) - mean * mean).clamp_min(1e-6).sqrt()
    model.feat_mean.copy_(mean.float())
    model.feat_std.copy_(std.float())


class Trainer:
    """One training run: model, optimiser, data, checkpoints. Rank 0 logs and saves."""

    def __init__(
        self,
        model_cfg: ModelConfig,
        cfg: TrainConfig,
        batch_cfg: BatchConfig,
        train: list[Utterance],
        dev: list[Utterance],
        out: Path,
        device: str = "cpu",
    ) -> None:
        self.dist = setup_distributed(device)
        precision = training_precision(cfg.precision, self.dist.device.type)
        cfg = dataclasses.replace(cfg, precision=precision)  # what ran, in every record
        self.cfg, self.batch_cfg, self.out = cfg, batch_cfg, out
        torch.manual_seed(cfg.seed)
        aug = cfg.augmentation()
        self.teacher = TeacherTargets(cfg.teacher) if cfg.teacher else None
        data_cfg = DataConfig(
            model_cfg.features, aug, cfg.seed, self.teacher, model_cfg.time_stride
        )
        self.train_set = SpeechDataset(train, data_cfg)
        self.dev = dev
        self.model = DS2(model_cfg).to(self.dist.device)
        # losses beside CTC, each with a training-only head (extra_loss.py): trained and
        # checkpointed, not exported
        self.extra_losses: list[ExtraLoss] = []
        if self.teacher is not None:
            if not self.teacher.covers(train):
                raise ValueError(f"{cfg.teacher} has targets for none of the training audio")
            distill = Distillation(self.teacher, model_cfg.rnn_hidden, cfg.distill_weight)
            self.extra_losses.append(distill)
        for extra in self.extra_losses:
            extra.head.to(self.dist.device)
        self.extra_logged: dict[str, float] = {}  # each extra loss's last step's mean
        self.ddp: torch.nn.Module = self.model
        if self.extra_losses:
            self.ddp = WithHeads(self.model, [e.head for e in self.extra_losses])
        self.ema: DS2 | None = None  # the moving average of the weights, when cfg.ema_decay
        self.optimizer = self._optimizer()
        self.sampler = BatchSampler(
            self.train_set.durations(), batch_cfg, self.dist.rank, self.dist.world
        )
        self.steps_per_epoch = len(self.sampler.global_batches())
        self.total_steps = self.steps_per_epoch * cfg.epochs
        if cfg.max_steps:
            self.total_steps = min(self.total_steps, cfg.max_steps)
        self.progress = Progress()
        self._on_best: Callable[[Trainer], None] | None = None  # set by `fit`
        self.scaler = torch.amp.GradScaler(
            "cuda", enabled=cfg.precision == "fp16" and self.dist.device.type == "cuda"
        )

    def _optimizer(self) -> torch.optim.Optimizer:
        c = self.cfg
        heads = [p for e in self.extra_losses for p in e.head.parameters()]
        params = [*self.model.parameters(), *heads]
        if c.optimizer == "sgd":
            return torch.optim.SGD(
                params,
                lr=c.lr,
                momentum=c.momentum,
                nesterov=True,
                weight_decay=c.weight_decay,
            )
        return torch.optim.AdamW(params, lr=c.lr, weight_decay=c.weight_decay)

    # -- checkpoints -------------------------------------------------------------------------

    @property
    def checkpoint_path(self) -> Path:
        return self.out / "checkpoint.pt"

    def save_checkpoint(self) -> None:
        if not self.dist.main:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scaler": self.scaler.state_dict(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            **{e.key: e.head.state_dict() for e in self.extra_losses},
            "progress": dataclasses.asdict(self.progress),
            "model_config": self.model.config.to_dict(),
            "train_config": dataclasses.asdict(self.cfg),
            "batch_config": dataclasses.asdict(self.batch_cfg),
        }
        tmp = self.checkpoint_path.with_suffix(".tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.checkpoint_path)  # atomic: a kill never leaves half a checkpoint

    def resume(self) -> bool:
        """Load the checkpoint in `out` if there is one; True when resumed."""
        if not self.checkpoint_path.exists():
            return False
        state = torch.load(self.checkpoint_path, map_location=self.dist.device, weights_only=False)
        saved = ModelConfig.from_dict(state["model_config"])
        if saved != self.model.config:
            raise ValueError(
                f"{self.checkpoint_path} was trained with another model config; use a new --out"
            )
        # a run with a technique this trainer no longer has (REMOVED) must not go on without it
        refuse_removed(state.get("train_config", {}), str(self.checkpoint_path))
        heads = [k for k in ("adversary", "phones") if state.get(k) is not None]
        if heads:  # the checkpoints of those runs kept their training-only heads
            raise ValueError(
                f"{self.checkpoint_path} holds training-only heads ({', '.join(heads)}) of "
                f"techniques this trainer no longer has (removed; at commit {REMOVED_AT}): "
                "continue it there, or start a new --out"
            )
        distilled = state.get("projection") is not None
        if (self.teacher is not None) != distilled:
            raise ValueError(
                f"{self.checkpoint_path} was trained {'with' if distilled else 'without'} a "
                "teacher; resume it with the same --teacher, or use a new --out"
            )
        if state.get("ema") is not None and self.cfg.ema_decay == 0:
            # without the flag the average would be dropped: a resumed run would restart it
            # from the live weights, and --export-only would export the live weights
            decay = state.get("train_config", {}).get("ema_decay")
            raise ValueError(
                f"{self.checkpoint_path} keeps a moving average of the weights; resume or "
                f"export it with --ema-decay {decay or 'as it was trained'}"
            )
        self.model.load_state_dict(state["model"])
        for extra in self.extra_losses:
            extra.head.load_state_dict(state[extra.key])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scaler.load_state_dict(state["scaler"])
        if self.cfg.ema_decay > 0 and state.get("ema") is not None:
            self.ema = self._average_of_model()
            self.ema.load_state_dict(state["ema"])
        self.progress = Progress(**state["progress"])
        return True

    def init_from_bundle(self, path: Path) -> None:
        """Start from a bundle's weights and normalisation (fine-tuning): its BatchNorm is
        unfolded with statistics measured on training utterances as the run's batches see
        them. Unfolding keeps the bundle's function exact with any statistics, but training
        pulls the running averages to the batches' own: calibrated on clean audio, an
        augmented run moved them at once and lost accuracy before the weights had moved
        at all (experiments/newtext.md).

        The run may change the features (a lifter, say) as long as their size stays: the
        per-bin normalisation is then measured afresh on the new features, so the first layer
        sees inputs on the scale it was trained on, and the BatchNorm calibration follows."""
        folded = load_bundle(path, device=str(self.dist.device))
        mine, theirs = self.model.config, folded.config
        inference = {k: getattr(mine, k) for k in INFERENCE_ONLY}  # re-tuned after training
        grows = mine.rnn_hidden > theirs.rnn_hidden  # a wider copy (training/grow.py)
        hidden = max(mine.rnn_hidden, theirs.rnn_hidden)
        grown = dataclasses.replace(theirs, features=mine.features, rnn_hidden=hidden)
        if dataclasses.replace(grown, **inference) != mine:
            m, t = mine.to_dict(), theirs.to_dict()
            skip = ("features", *INFERENCE_ONLY)
            diff = {k: (t.get(k), v) for k, v in m.items() if t.get(k) != v and k not in skip}
            raise BundleError(f"{path} has another model config (bundle, run): {diff}")
        if theirs.features != mine.features:
            if theirs.features.n_bins != mine.features.n_bins:
                raise BundleError(
                    f"{path} takes {theirs.features.n_bins} feature bins, this run makes "
                    f"{mine.features.n_bins}: fine-tuning can change features but not their size"
                )
            measure_normalization(folded, self.train_set, self.cfg.norm_utterances)
        limit = self.cfg.calibration_utterances
        model = unfold_batchnorm(folded, list(training_features(self.train_set, limit)))
        if grows:
            if self.dist.main:
                print(f"widening {path}: rnn_hidden {theirs.rnn_hidden} -> {mine.rnn_hidden}")
            model = widen(model, mine.rnn_hidden)
        self.model.load_state_dict(model.state_dict())

    # -- training ----------------------------------------------------------------------------

    def _autocast(self) -> torch.autocast:
        p, dev = self.cfg.precision, self.dist.device.type
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(p, torch.float32)
        return torch.autocast(dev, dtype=dtype, enabled=p != "fp32")

    def train_step(self, batch: Batch) -> float:
        """One synchronous SGD step; returns the mean per-utterance CTC loss of this shard."""
        dev = self.dist.device
        self.model.train()
        rate = learning_rate(
            self.cfg, self.progress.step, self.total_steps, self.progress.train_seconds
        )
        for g in self.optimizer.param_groups:
            g["lr"] = rate
        statistics = [b.clone() for b in self.model.buffers()]  # BatchNorm's, kept for _skip
        feats, feat_lens = batch.feats.to(dev, non_blocking=True), batch.feat_lengths.to(dev)
        with self._autocast():
            log_probs, out_lens, *heads = self.ddp(feats, feat_lens)
        losses = F.ctc_loss(
            log_probs.float().transpose(0, 1),
            batch.labels.to(dev),
            out_lens,
            batch.label_lengths.to(dev),
            blank=0,
            reduction="none",
            zero_infinity=True,
        )
        # DDP averages gradients over ranks, so each shard's summed loss is scaled by
        # world / global batch: shards of unequal size then weigh every utterance alike.
        total = losses.sum()
        for extra, out in zip(self.extra_losses, heads, strict=True):
            term = extra.losses(out, out_lens, batch)
            total = total + extra.weight * term.sum()
            self.extra_logged[extra.log_key] = float(term.detach().mean())
        loss = total * self.dist.world / max(self._global_batch(len(batch.indices)), 1)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
        self.scaler.unscale_(self.optimizer)
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        norm = torch.nn.utils.clip_grad_norm_(params, self.cfg.grad_clip)
        if not (self.scaler.is_enabled() or torch.isfinite(norm)):  # fp16's scaler skips these
            self._skip(batch, losses, statistics)
            return float(losses.detach().mean())
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self._update_average()
        return float(losses.detach().mean())

    def _skip(self, batch: Batch, losses: torch.Tensor, statistics: list[torch.Tensor]) -> None:
        """Leave the weights, and the BatchNorm statistics its forward pass moved, as they
        were before a batch whose loss or gradient is not finite; log which utterances it held.

        Why: one such step through Adam turns every weight into NaN, and the run goes on
        training and checkpointing NaN until its budget ends (a bf16 CPU run did, 2026-11-28).
        Every rank sees the same all-reduced norm, so all skip together."""
        self.optimizer.zero_grad(set_to_none=True)
        with torch.no_grad():
            for live, kept in zip(self.model.buffers(), statistics, strict=True):
                live.copy_(kept)
        self.progress.skipped_steps += 1
        bad = ~torch.isfinite(losses.detach().cpu())
        suspects = batch.indices[bad] if bad.any() else batch.indices  # else: the backward's
        audio = [str(self.train_set.utterances[int(i)].audio) for i in suspects]
        self._log(
            {
                "step": self.progress.step + 1,
                "skipped": "non-finite loss" if bad.any() else "non-finite gradient",
                "audio": audio,
            }
        )
        if self.dist.main:
            tqdm.write(f"step {self.progress.step + 1}: skipped, not finite: {audio[:4]}")

    @torch.no_grad()
    def _update_average(self) -> None:
        if self.ema is None:
            return
        weight = 1.0 - ema_rate(self.cfg.ema_decay, self.progress.step)
        for p_avg, p_live in zip(self.ema.parameters(), self.model.parameters(), strict=True):
            p_avg.lerp_(p_live, weight)
        for b_avg, b_live in zip(self.ema.buffers(), self.model.buffers(), strict=True):
            if b_avg.is_floating_point():  # BatchNorm's running statistics, the normalisation
                b_avg.lerp_(b_live, weight)
            else:
                b_avg.copy_(b_live)

    def _average_of_model(self) -> DS2:
        """A moving average that starts at the current weights."""
        return copy.deepcopy(self.model).eval().requires_grad_(False)

    @property
    def final_model(self) -> DS2:
        """The weights this run scores on dev and exports: their moving average when
        averaging is on, else the weights themselves."""
        return self.ema if self.ema is not None else self.model

    def _global_batch(self, shard: int) -> int:
        """Utterances in this step over all ranks (the last batch may split unevenly)."""
        if self.dist.world == 1:
            return shard
        n = torch.tensor([shard], dtype=torch.long, device=self.dist.device)
        dist.all_reduce(n)
        return int(n.item())

    def _loader(self, epoch: int, start: int) -> Iterator[Batch]:
        self.sampler.set_epoch(epoch, start)
        self.train_set.set_epoch(epoch)
        w = self.cfg.workers
        loader = DataLoader(
            self.train_set,
            batch_sampler=self.sampler,
            collate_fn=collate,
            num_workers=w,
            prefetch_factor=4 if w else None,
            persistent_workers=False,
            worker_init_fn=worker_init,
            pin_memory=self.dist.device.type == "cuda",
        )
        return iter(loader)

    def _should_stop(self) -> bool:
        c, p = self.cfg, self.progress
        return bool(
            (c.max_steps and p.step >= c.max_steps)
            or (c.time_budget_s and p.train_seconds >= c.time_budget_s)
        )

    def fit(
        self,
        on_epoch: Callable[[Trainer], None] | None = None,
        on_best: Callable[[Trainer], None] | None = None,
    ) -> Progress:
        """Train until the epochs, the step limit or the time budget run out; `on_epoch` runs
        on rank 0 after each epoch's checkpoint (the CLI exports a bundle there, so a run cut
        short still leaves its latest model); `on_best` runs on rank 0 whenever a dev score is
        the run's lowest CER yet, with the weights that scored it (the CLI keeps them as a
        second bundle: a long run can pass its best dev point well before its end)."""
        self._on_best = on_best
        if not self.resume():
            if self.cfg.init_from:
                self.init_from_bundle(Path(self.cfg.init_from))
            else:
                measure_normalization(self.model, self.train_set, self.cfg.norm_utterances)
        if self.cfg.ema_decay > 0 and self.ema is None:
            # a fresh run, or one that switches averaging on at a resume: the average starts here
            self.ema = self._average_of_model()
        if self.dist.world > 1:
            self.ddp = DistributedDataParallel(self.ddp)
        p = self.progress
        while p.epoch < self.cfg.epochs and not self._should_stop():
            self._run_epoch()
            if self._should_stop() and p.batch_in_epoch < self.steps_per_epoch:
                break  # cut mid-epoch (a limit met on its last batch still ends the epoch)
            p.history.append({"epoch": p.epoch, "step": p.step, **self.evaluate()})
            self._log(p.history[-1])
            self._note_best(p.history[-1])
            p.epoch, p.batch_in_epoch = p.epoch + 1, 0
            self.save_checkpoint()
            if on_epoch is not None and self.dist.main:
                on_epoch(self)
        self.save_checkpoint()
        if p.batch_in_epoch and on_epoch is not None and self.dist.main:
            on_epoch(self)  # stopped mid-epoch by a limit: keep what it learnt so far
        return p

    def _run_epoch(self) -> None:
        p = self.progress
        bar = tqdm(
            total=self.steps_per_epoch,
            initial=p.batch_in_epoch,
            desc=f"epoch {p.epoch}",
            disable=not self.dist.main,
            dynamic_ncols=True,
        )
        pauses = PauseClock()
        pauses.install()
        try:
            self._run_batches(bar, pauses)
        finally:
            pauses.uninstall()
            bar.close()

    def _run_batches(self, bar: tqdm[Any], pauses: PauseClock) -> None:
        p = self.progress
        t_last = time.perf_counter()
        for batch in self._loader(p.epoch, p.batch_in_epoch):
            loss = self.train_step(batch)
            now = time.perf_counter()
            step_s = max(now - t_last - pauses.take(), 1e-9)  # a pause is not training
            audio = (
                float(batch.feat_lengths.sum())
                * self.model.config.features.hop_ms
                / 1000
                * self.dist.world
            )
            p.step, p.batch_in_epoch = p.step + 1, p.batch_in_epoch + 1
            p.train_seconds += step_s
            p.audio_seconds += audio
            rate = audio / step_s
            t_last = now
            bar.update(1)
            bar.set_postfix(
                loss=f"{loss:.2f}",
                lr=f"{self.optimizer.param_groups[0]['lr']:.2e}",
                audio_s_per_s=f"{rate:.0f}",
            )
            if p.step % 20 == 0:
                self._log(
                    {
                        "step": p.step,
                        "epoch": p.epoch,
                        "loss": loss,
                        **self.extra_logged,
                        "lr": self.optimizer.param_groups[0]["lr"],
                        "audio_s_per_s": rate,
                    }
                )
            if self.cfg.dev_every and p.step % self.cfg.dev_every == 0 and self.dist.main:
                scores = self.evaluate()
                # kept in the history too, so the exported card reports the latest dev score
                p.history.append({"epoch": p.epoch, "step": p.step, **scores})
                self._log(
                    {"step": p.step, "epoch": p.epoch, **{f"dev_{k}": v for k, v in scores.items()}}
                )
                tqdm.write(
                    f"step {p.step}: dev greedy "
                    + ", ".join(f"{k} {v:.3f}" for k, v in scores.items())
                )
                self._note_best(scores)
            if p.step % self.cfg.checkpoint_every == 0:  # after the dev score, which it keeps
                self.save_checkpoint()
            if self._should_stop():
                break

    def _note_best(self, scores: dict[str, Any]) -> None:
        """Record a dev score; a CER lower than every earlier one of the run calls `on_best`
        (a tie keeps the earlier weights: fewer steps from the start for the same score)."""
        cer, p = scores.get("cer"), self.progress
        if cer is None or (p.best_dev_cer is not None and cer >= p.best_dev_cer):
            return
        p.best_dev_cer = cer
        if self._on_best is not None and self.dist.main:
            self._on_best(self)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Greedy WER/CER on the dev manifest (rank 0 scores; others skip)."""
        if not self.dev or not self.dist.main:
            return {}
        dev = self.dev[: self.cfg.dev_limit] if self.cfg.dev_limit else self.dev
        hyps = transcribe_greedy(self.final_model, dev, self.dist.device)
        return error_rates([u.text for u in dev], hyps)

    def _log(self, record: dict[str, Any]) -> None:
        if not self.dist.main:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        with (self.out / "log.jsonl").open("a") as f:
            f.write(json.dumps({"time": time.time(), **record}) + "\n")
        if "wer" in record:
            tqdm.write(
                f"epoch {record['epoch']}: dev greedy WER {record['wer']:.3f} CER {record['cer']:.3f}"
            )


@torch.no_grad()
def transcribe_greedy(
    model: DS2, utts: list[Utterance], device: torch.device, batch_size: int = 16
) -> list[str]:
    """Greedy transcripts of clean utterances, batched by length."""
    model.eval()
    ds = SpeechDataset(utts, DataConfig(model.config.features))
    order = sorted(range(len(utts)), key=lambda i: utts[i].duration or 0.0)
    hyps = [""] * len(utts)
    for k in range(0, len(order), batch_size):
        idx = order[k : k + batch_size]
        b = collate([ds[i] for i in idx])
        lp, n = model(b.feats.to(device), b.feat_lengths.to(device))
        for j, i in enumerate(idx):
            hyps[i] = greedy_decode(lp[j, : int(n[j])].float().cpu().numpy(), model.config.alphabet)
    return hyps
