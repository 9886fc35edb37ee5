"""`harken train`: CTC training of a DS2 model from manifests, resumable, data-parallel.

CTC loss, AdamW or SGD with Nesterov momentum, gradient clipping, bf16 autocast where the
hardware runs it natively (fp32 on other CPUs; fp16 AMP on request on CUDA), SortaGrad and
selectable batch construction (training/batching.py), augmentation in DataLoader workers
(training/data.py). A checkpoint holds everything needed to continue exactly where a killed run
stopped: weights, optimiser, step, epoch and the position inside the epoch (batches are a pure
function of seed and epoch; augmentation of seed, epoch and utterance). Launch with
`torchrun --nproc-per-node N -m harken_cli train ...` for synchronous data-parallel SGD (DS2
§4.1): gloo on CPU, NCCL on GPU.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import os
import platform
import sys
import time
from collections.abc import Callable, Iterator, Sequence
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

from models.bundle import (
    BundleError,
    carry_decoder_files,
    load_bundle,
    read_bundle_config,
    save_bundle,
    unfold_batchnorm,
)
from models.config import INFERENCE_ONLY, ModelConfig, parse_bool
from models.ds2 import DS2
from models.ensemble import alone_search
from models.features import featurize
from models.manifest import Utterance, read_manifest
from models.metrics import error_rates, greedy_decode
from models.precision import bf16_units
from training.adversary import VoiceAdversary, voice_ids, voice_losses
from training.augment import AUGMENT_PRESETS, AugmentConfig
from training.batching import STRATEGIES, BatchConfig, BatchSampler, padding_ratio
from training.consistency import consistency_losses
from training.data import Batch, DataConfig, SpeechDataset, collate, load_audio, worker_init
from training.distill import distill_losses
from training.dropout import recalibrated
from training.grow import deepen, lengthen, widen
from training.heads import WithHeads, check_layer, layer_name
from training.pause import PauseClock
from training.phones import PhoneHead, phone_losses, phone_targets, read_lexicon
from training.soft_targets import SoftTeacher, soft_losses
from training.teacher import TeacherTargets

PRECISIONS = ("auto", "bf16", "fp16", "fp32")


def training_precision(
    requested: Literal["auto", "bf16", "fp16", "fp32"],
    device: str,
    flags: frozenset[str] | None = None,
) -> Literal["bf16", "fp16", "fp32"]:
    """The autocast dtype a run trains in. auto: bf16 where the hardware runs it natively (a
    GPU that supports it, else fp16; a CPU with AMX or AVX512-BF16: 2.4x fp32's speed on a
    Zen 4), fp32 on other CPUs, where bf16 has no kernels: on an AVX2-only Zen 3 the default's
    first network trained at 27.3 audio s/s in fp32 and 1.2 in bf16
    (models/results/dtype/README.md)."""
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
    soft_teacher: str = ""  # a bundle (an ensemble too) whose per-frame outputs are targets
    soft_weight: float = 0.0  # the KL term's weight beside CTC's (with soft_teacher)
    adversary_scale: float = 0.0  # > 0: a voice classifier's reversed gradient, at this scale
    adversary_layer: int = -1  # what it reads: -1 the row-conv output, i recurrent layer i
    phone_lexicon: str = ""  # a pronouncing dictionary: a phone CTC head beside (phones.py)
    phone_weight: float = 0.0  # the phone CTC loss's weight beside CTC's (with phone_lexicon)
    phone_layer: int = 1  # the recurrent layer the phone head reads (-1: the row-conv output)
    phone_probe_steps: int = 200  # first steps the phone head's gradient stops at its layer
    phone_head_lr: float = 30.0  # the phone head's rate as a multiple of the network's
    # the row convolution's rate as a multiple of the network's: taps that lengthening added
    # start at zero (grow.py), and a fine-tuning rate leaves them near it (rowconv.md)
    row_conv_lr: float = 1.0
    # the residual recurrent layers' rate as a multiple of the network's: layers that deepening
    # added start with fresh weights at a small gain (residual_gain), where a fine-tuning rate
    # is slow (grow.py)
    residual_lr: float = 1.0
    # the gain deepening's new residual layers start at: 0 keeps the trained function exactly,
    # but there only the gain has a gradient, against a fresh layer's random outputs (deep.md)
    residual_gain: float = 0.0
    # > 0: each utterance heard twice under independent feature augmentation, each view's
    # frames pulled towards the other's by a KL term of this weight (consistency.py)
    consistency_weight: float = 0.0
    # the share of each recurrent layer's and the row convolution's inputs zeroed per step;
    # BatchNorm is re-measured without it before a model is scored or exported (dropout.py)
    dropout: float = 0.0
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
        if bool(self.soft_teacher) != (self.soft_weight > 0):
            raise ValueError(
                "soft_teacher and soft_weight go together: a bundle and a weight > 0, or "
                f"neither (got {self.soft_teacher!r} and {self.soft_weight})"
            )
        if self.adversary_scale < 0:
            raise ValueError(f"adversary_scale must be >= 0, got {self.adversary_scale}")
        if min(self.row_conv_lr, self.residual_lr) <= 0:
            raise ValueError(
                f"row_conv_lr and residual_lr must be > 0, got {self.row_conv_lr} and "
                f"{self.residual_lr}"
            )
        if self.phone_head_lr <= 0 or self.phone_probe_steps < 0:
            raise ValueError(
                f"phone_head_lr must be > 0 and phone_probe_steps >= 0, got "
                f"{self.phone_head_lr} and {self.phone_probe_steps}"
            )
        if self.residual_gain and not self.init_from:
            raise ValueError(
                f"residual_gain {self.residual_gain:g} starts the layers that deepening a bundle "
                "adds, and this run starts from scratch: give init_from, or leave it at 0"
            )
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1) (0: none), got {self.dropout}")
        if self.consistency_weight < 0:
            raise ValueError(f"consistency_weight must be >= 0, got {self.consistency_weight}")
        if self.consistency_weight > 0 and not self.augment:
            raise ValueError(
                "consistency_weight needs augmentation: two views of an utterance without it "
                "are the same view"
            )
        if bool(self.phone_lexicon) != (self.phone_weight > 0):
            raise ValueError(
                "phone_lexicon and phone_weight go together: a pronouncing dictionary and a "
                f"weight > 0, or neither (got {self.phone_lexicon!r} and {self.phone_weight})"
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
    for; their moving average sits nearer to it. Averaging four checkpoints 200 steps apart
    at peak rate lowered dev greedy CER from 34.8% to 32.9% (models/results/averaging.md)."""
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
            model_cfg.features,
            aug,
            cfg.seed,
            self.teacher,
            model_cfg.time_stride,
            views=2 if cfg.consistency_weight > 0 else 1,
        )
        self.train_set = SpeechDataset(train, data_cfg)
        self.dev = dev
        self.model = DS2(model_cfg).to(self.dist.device)
        self.model.dropout = cfg.dropout
        if cfg.residual_lr != 1.0 and not model_cfg.rnn_residual_layers:
            raise ValueError(
                f"residual_lr {cfg.residual_lr:g} steps the residual recurrent layers, and this "
                "model has none: deepen it (rnn_layers, rnn_residual_layers) or leave it at 1"
            )
        self.ddp: torch.nn.Module = self.model
        # distillation's projection into the teacher's space: trained, checkpointed, not exported
        self.projection: torch.nn.Linear | None = None
        if self.teacher is not None:
            self.projection = torch.nn.Linear(model_cfg.rnn_hidden, self.teacher.dim)
            self.projection.to(self.dist.device)
            if not self.teacher.covers(train):
                raise ValueError(f"{cfg.teacher} has targets for none of the training audio")
        # the voice adversary (adversary.py): trained, checkpointed, not exported
        self.adversary: VoiceAdversary | None = None
        self.voice_of = torch.zeros(0, dtype=torch.int64)  # manifest position -> voice index
        if cfg.adversary_scale > 0:
            check_layer("adversary_layer", cfg.adversary_layer, model_cfg.rnn_layers)
            ids, names = voice_ids(train)
            self.voice_of = torch.tensor(ids, dtype=torch.int64)
            self.adversary = VoiceAdversary(model_cfg.rnn_hidden, names, cfg.adversary_scale)
            self.adversary.to(self.dist.device)
        # the phone head (phones.py): trained, checkpointed, not exported
        self.phones: PhoneHead | None = None
        self.phones_of: list[tuple[int, ...] | None] = []  # manifest position -> phone ids
        if cfg.phone_lexicon:
            check_layer("phone_layer", cfg.phone_layer, model_cfg.rnn_layers)
            try:
                self.phones_of = phone_targets(train, read_lexicon(cfg.phone_lexicon))
            except OSError as e:
                raise ValueError(f"phone_lexicon: {e}") from None
            if not any(self.phones_of):
                raise ValueError(
                    f"{cfg.phone_lexicon} spells every word of none of the training utterances"
                )
            self.phones = PhoneHead(model_cfg.rnn_hidden).to(self.dist.device)
        self.phone_loss = 0.0  # the last step's mean per-utterance phone CTC loss
        self.phoned = 0  # how many of the last step's utterances had phones
        self.heads: WithHeads | None = None
        if any(h is not None for h in (self.projection, self.adversary, self.phones)):
            self.ddp = self.heads = WithHeads(
                self.model,
                self.projection,
                self.adversary,
                cfg.adversary_layer,
                self.phones,
                cfg.phone_layer,
            )
        self.adversary_loss = 0.0  # the last step's mean per-utterance voice cross-entropy
        self.voices_named = 0.0  # the last step's share of frames whose voice it named
        self.distill_loss = 0.0  # the last step's mean per-utterance distillation loss
        self.soft = (
            SoftTeacher(cfg.soft_teacher, model_cfg, str(self.dist.device))
            if cfg.soft_teacher
            else None
        )
        self.soft_loss = 0.0  # the last step's mean per-utterance KL to the soft teacher
        self.consistency_loss = 0.0  # the last step's mean per-row KL between the two views
        self.ema: DS2 | None = None  # the moving average of the weights, when cfg.ema_decay
        self._calibration: list[torch.Tensor] = []  # dropout's BatchNorm re-measurement
        self._scored: tuple[int, DS2] | None = None  # (step, scored_model) with dropout
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

    def _groups(self) -> list[dict[str, Any]]:
        """Every parameter the optimiser steps, the model's and its training-only heads', in
        groups, each with the multiple of the schedule's rate it steps at: a fine-tuning run's
        phone head starts from nothing at a rate chosen for weights that are already trained,
        so it gets its own group (phone_head_lr), and so may the row convolution, whose new
        taps start at zero after lengthening (row_conv_lr), and the residual layers, which
        deepening adds at gain zero (residual_lr); each its own group only when asked, so that
        earlier checkpoints resume)."""
        heads = [h for h in (self.projection, self.adversary) if h is not None]
        row = list(self.model.row_conv.parameters()) if self.cfg.row_conv_lr != 1.0 else []
        residual = [
            p
            for layer in self.model.rnn_stack
            if layer.gain is not None and self.cfg.residual_lr != 1.0
            for p in layer.parameters()
        ]
        apart = {id(p) for p in (*row, *residual)}
        own = [p for p in self.model.parameters() if id(p) not in apart]
        network = [*own, *(p for h in heads for p in h.parameters())]
        groups: list[dict[str, Any]] = [{"params": network, "rate_scale": 1.0}]
        if row:
            groups.append({"params": row, "rate_scale": self.cfg.row_conv_lr})
        if residual:
            groups.append({"params": residual, "rate_scale": self.cfg.residual_lr})
        if self.phones is not None:
            groups.append(
                {"params": list(self.phones.parameters()), "rate_scale": self.cfg.phone_head_lr}
            )
        return groups

    def _optimizer(self) -> torch.optim.Optimizer:
        c = self.cfg
        if c.optimizer == "sgd":
            return torch.optim.SGD(
                self._groups(),
                lr=c.lr,
                momentum=c.momentum,
                nesterov=True,
                weight_decay=c.weight_decay,
            )
        return torch.optim.AdamW(self._groups(), lr=c.lr, weight_decay=c.weight_decay)

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
            "projection": self.projection.state_dict() if self.projection is not None else None,
            "adversary": self.adversary.state_dict() if self.adversary is not None else None,
            "adversary_voices": list(self.adversary.voices) if self.adversary is not None else None,
            "phones": self.phones.state_dict() if self.phones is not None else None,
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
        distilled = state.get("projection") is not None
        if (self.projection is not None) != distilled:
            raise ValueError(
                f"{self.checkpoint_path} was trained {'with' if distilled else 'without'} a "
                "teacher; resume it with the same --teacher, or use a new --out"
            )
        voices = state.get("adversary_voices")
        mine = list(self.adversary.voices) if self.adversary is not None else None
        if voices != mine:
            trained = (
                "without a voice adversary"
                if voices is None
                else "with a voice adversary"
                if mine is None
                else "with a voice adversary over other voices (other training manifests)"
            )
            raise ValueError(
                f"{self.checkpoint_path} was trained {trained}; resume it with the same "
                "--adversary-scale and training manifests, or use a new --out"
            )
        phoned = state.get("phones") is not None
        if (self.phones is not None) != phoned:
            raise ValueError(
                f"{self.checkpoint_path} was trained {'with' if phoned else 'without'} a phone "
                "head; resume it with the same --phone-lexicon, or use a new --out"
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
        if self.projection is not None:
            self.projection.load_state_dict(state["projection"])
        if self.adversary is not None:
            self.adversary.load_state_dict(state["adversary"])
        if self.phones is not None:
            self.phones.load_state_dict(state["phones"])
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
        augmented run moved them at once, and gpu4 lost 6.6 points of dev CER in 150 steps at
        a rate of 1e-12 (models/results/newtext.md).

        The run may change the features (a lifter, say) as long as their size stays: the
        per-bin normalisation is then measured afresh on the new features, so the first layer
        sees inputs on the scale it was trained on, and the BatchNorm calibration follows."""
        folded = load_bundle(path, device=str(self.dist.device))
        mine, theirs = self.model.config, folded.config
        inference = {k: getattr(mine, k) for k in INFERENCE_ONLY}  # re-tuned after training
        grows = mine.rnn_hidden > theirs.rnn_hidden  # a wider copy (training/grow.py)
        hidden = max(mine.rnn_hidden, theirs.rnn_hidden)
        tau = max(mine.row_conv_tau, theirs.row_conv_tau)  # a longer look-ahead (the same)
        deeper = max(mine.rnn_layers - theirs.rnn_layers, 0)  # residual layers on top (the same)
        grown = dataclasses.replace(
            theirs,
            features=mine.features,
            rnn_hidden=hidden,
            row_conv_tau=tau,
            rnn_layers=theirs.rnn_layers + deeper,
            rnn_residual_layers=theirs.rnn_residual_layers + deeper,
        )
        if deeper and mine.rnn_residual_layers != grown.rnn_residual_layers:
            raise BundleError(
                f"{path} has rnn_layers={theirs.rnn_layers} ({theirs.rnn_residual_layers} "
                f"residual); deepening to {mine.rnn_layers} needs the new ones residual: "
                f"--rnn-residual-layers {grown.rnn_residual_layers}"
            )
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
        if mine.row_conv_tau > theirs.row_conv_tau:
            if self.dist.main:
                print(f"lengthening {path}: row_conv_tau {theirs.row_conv_tau} -> {tau}")
            model = lengthen(model, tau)
        if deeper:
            if self.dist.main:
                print(f"deepening {path}: rnn_layers {theirs.rnn_layers} -> {mine.rnn_layers}")
            model = deepen(model, mine.rnn_layers, gain=self.cfg.residual_gain)
        elif self.cfg.residual_gain:
            raise BundleError(
                f"residual_gain {self.cfg.residual_gain:g} starts the layers that deepening "
                f"adds, and {path} already has rnn_layers={theirs.rnn_layers}: raise "
                "rnn_layers to deepen it, or leave residual_gain at 0"
            )
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
            g["lr"] = rate * g.get("rate_scale", 1.0)
        if self.heads is not None:
            self.heads.phones_reach_network = self.progress.step >= self.cfg.phone_probe_steps
        statistics = [b.clone() for b in self.model.buffers()]  # BatchNorm's, kept for _skip
        feats, feat_lens = batch.feats.to(dev, non_blocking=True), batch.feat_lengths.to(dev)
        with self._autocast():
            outputs = self.ddp(feats, feat_lens)
            soft = self.soft(feats, feat_lens) if self.soft is not None else None
        log_probs, out_lens = outputs[0], outputs[1]
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
        if self.adversary is not None:
            voices = self.voice_of[batch.indices].to(dev)
            ce, self.voices_named = voice_losses(outputs[3], voices, out_lens)
            total = total + ce.sum()  # the classifier learns at full rate; the network reversed
            self.adversary_loss = float(ce.detach().mean())
        if self.projection is not None:
            if batch.teacher is None:
                raise ValueError("a distilling run got a batch without teacher targets")
            distill = distill_losses(outputs[2], batch.teacher.to(dev), out_lens)
            total = total + self.cfg.distill_weight * distill.sum()
            self.distill_loss = float(distill.detach().mean())
        if self.phones is not None:
            targets = [self.phones_of[i] for i in batch.indices.tolist()]
            ph, self.phoned = phone_losses(outputs[4], targets, out_lens)
            total = total + self.cfg.phone_weight * ph.sum()
            self.phone_loss = float(ph.detach().sum()) / max(self.phoned, 1)
        if batch.views == 2:
            cr = consistency_losses(log_probs, out_lens)
            total = total + self.cfg.consistency_weight * cr.sum()
            self.consistency_loss = float(cr.detach().mean())
        if soft is not None:
            kl = soft_losses(log_probs, soft[0], out_lens)
            total = total + self.cfg.soft_weight * kl.sum()
            self.soft_loss = float(kl.detach().mean())
        loss = total * self.dist.world / max(self._global_batch(len(batch.indices)), 1)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()  # type: ignore[no-untyped-call]
        self.scaler.unscale_(self.optimizer)
        groups = [g["params"] for g in self.optimizer.param_groups]
        # each group clipped on its own: a new phone head's large early gradient must not
        # shrink the network's step (the head's group holds only the head); the sum of the
        # norms is only read for being finite
        norm = sum(torch.nn.utils.clip_grad_norm_(ps, self.cfg.grad_clip) for ps in groups)
        assert isinstance(norm, torch.Tensor)
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
        averaging is on, else the weights themselves (`scored_model` is what is scored)."""
        return self.ema if self.ema is not None else self.model

    def scored_model(self) -> DS2:
        """`final_model` as dev scores it and the bundle keeps it: with dropout, a copy whose
        BatchNorm statistics are re-measured without it (dropout.py), once per step."""
        if self.cfg.dropout == 0:
            return self.final_model
        step = self.progress.step
        if self._scored is None or self._scored[0] != step:
            if not self._calibration:
                limit = self.cfg.calibration_utterances
                self._calibration = list(training_features(self.train_set, limit))
            self._scored = (step, recalibrated(self.final_model, self._calibration))
        return self._scored[1]

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
                        **({"distill_loss": self.distill_loss} if self.projection else {}),
                        **({"soft_loss": self.soft_loss} if self.soft else {}),
                        **(
                            {"consistency_loss": self.consistency_loss}
                            if self.cfg.consistency_weight > 0
                            else {}
                        ),
                        **(
                            {"phone_loss": self.phone_loss, "phoned": self.phoned}
                            if self.phones
                            else {}
                        ),
                        **(
                            {
                                "adversary_loss": self.adversary_loss,
                                "voices_named": self.voices_named,
                            }
                            if self.adversary
                            else {}
                        ),
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
        hyps = transcribe_greedy(self.scored_model(), dev, self.dist.device)
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


def export(trainer: Trainer, path: Path, train_manifest: str) -> Path:
    """Write the trained model as a bundle with its provenance."""
    p, model = trainer.progress, trainer.scored_model()
    last: dict[str, Any] = next((h for h in reversed(p.history) if "wer" in h), {})
    provenance: dict[str, Any] = {
        "train_manifest": train_manifest,
        "train_hours_per_epoch": round(sum(trainer.train_set.durations()) / 3600, 2),
        "steps": p.step,
        "epochs_completed": p.epoch,
        "train_time_hours": round(p.train_seconds / 3600, 2),
        "hardware": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {trainer.dist.world} process(es)",
        "precision": trainer.cfg.precision,
        "weight_averaging": f"moving average, decay {trainer.cfg.ema_decay}"
        if trainer.ema is not None
        else "none",
        "dev_greedy_wer": last.get("wer"),
        "dev_greedy_cer": last.get("cer"),
        "dev_greedy_at_step": last.get("step"),
        "augmentation": trainer.train_set.cfg.augment.describe()
        if trainer.train_set.cfg.augment
        else "none",
    }
    if trainer.teacher is not None:
        provenance["distillation"] = (
            f"{trainer.teacher.name}, cosine on the row-conv output, weight "
            f"{trainer.cfg.distill_weight:g}"
        )
    if trainer.soft is not None:
        shares = trainer.soft.networks.weights
        provenance["soft_targets"] = (
            f"{trainer.soft.name} (per-frame mix of {len(shares)} network(s), shares "
            f"{', '.join(f'{w:.2f}' for w in shares)}), KL weight {trainer.cfg.soft_weight:g}"
        )
    if trainer.cfg.consistency_weight > 0:
        provenance["consistency"] = (
            "each utterance heard twice per step under independent feature augmentation "
            f"(warps, colour, masks), a KL term of weight {trainer.cfg.consistency_weight:g} "
            "between the two views' frames (CR-CTC)"
        )
    if trainer.adversary is not None:
        provenance["voice_adversary"] = (
            f"a classifier of {len(trainer.adversary.voices)} voices on "
            f"{layer_name(trainer.cfg.adversary_layer)}, "
            f"gradient reversed at scale {trainer.cfg.adversary_scale:g}"
        )
    if trainer.phones is not None:
        have = sum(1 for t in trainer.phones_of if t)
        provenance["phone_targets"] = (
            f"a phone CTC head on {layer_name(trainer.cfg.phone_layer)}, weight {trainer.cfg.phone_weight:g}, phones from "
            f"{Path(trainer.cfg.phone_lexicon).name} for {have} of {len(trainer.phones_of)} "
            "training utterances"
        )
    if trainer.cfg.dropout > 0:
        provenance["dropout"] = (
            f"{trainer.cfg.dropout:g} of each recurrent layer's and the row convolution's "
            f"inputs; BatchNorm re-measured without it on {len(trainer._calibration)} "
            "training utterances"
        )
    if trainer.cfg.init_from:  # what the fine-tuned bundle had behind it, by value
        provenance["fine_tuned_from"] = trainer.cfg.init_from
        stages = lineage(read_bundle_config(trainer.cfg.init_from).get("provenance", {}))
        provenance["earlier_stages"] = stages
        hours = [s["train_time_hours"] for s in [*stages, provenance]]
        if all(isinstance(h, int | float) for h in hours):
            provenance["total_train_time_hours"] = round(sum(hours), 2)
        if carried := carry_language_model(trainer.cfg.init_from, path):
            provenance["language_model"] = carried
    return save_bundle(model, path, provenance=provenance)


def carry_language_model(init_from: str, path: Path) -> str:
    """Copy the LM and search settings of the bundle a fine-tune started from into its
    export (its decoder.json and the files that names), and say so; '' when it has none.
    An ensemble's search settings were tuned for its networks together: the export is its
    own network alone, so the settings it keeps for that (`ensemble.alone`) replace them."""
    alone = alone_search(init_from)
    carried = carry_decoder_files(init_from, path, alone)
    if not carried:
        print(f"{init_from} has no LM (decoder.json): {path} is exported without one")
        return ""
    what = f"{', '.join(carried)} carried over from {init_from}"
    if alone:
        settings = ", ".join(f"{k} {v:g}" for k, v in sorted(alone.items()))
        what += f", with the search settings its own network has alone ({settings})"
    print(f"{path}: {what}")
    return what


def _dev_cer_of(bundle: Path) -> float | None:
    """The dev CER a bundle's provenance records, if that bundle exists."""
    try:
        cer = read_bundle_config(bundle).get("provenance", {}).get("dev_greedy_cer")
    except (OSError, ValueError):
        return None
    return float(cer) if isinstance(cer, int | float) else None


def export_checkpoint(trainer: Trainer, bundle: Path, train_manifest: str) -> int:
    """`--export-only`: the bundle of the run's checkpoint, as `fit` would have exported it."""
    if not trainer.dist.main:
        return 0
    try:
        if not trainer.resume():
            print(f"harken train: error: no checkpoint in {trainer.out}", file=sys.stderr)
            return 2
    except ValueError as e:  # another model config, or a teacher given or missing
        print(f"harken train: error: {e}", file=sys.stderr)
        return 2
    print(
        f"step {trainer.progress.step}: bundle written to {export(trainer, bundle, train_manifest)}"
    )
    return 0


STAGE_KEYS = ("train_manifest", "steps", "epochs_completed", "train_time_hours", "augmentation")


def lineage(base: dict[str, Any]) -> list[dict[str, Any]]:
    """Every training stage behind a base bundle's weights, oldest first, so that a chain of
    fine-tunes keeps the whole history (bundles from before this kept one earlier stage as
    `base_*` keys, and anything before that is not recorded)."""
    if "earlier_stages" in base:
        earlier = list(base["earlier_stages"])
    elif "base_steps" in base:
        earlier = [{k: base[f"base_{k}"] for k in STAGE_KEYS if f"base_{k}" in base}]
    else:
        earlier = []
    last = {k: base.get(k, "not recorded") for k in STAGE_KEYS}
    last["distillation"] = base.get("distillation", "none")  # only teacher runs record one
    for key in ("soft_targets", "phone_targets", "consistency"):  # what only some runs record
        if key in base:
            last[key] = base[key]
    return [*earlier, last]


# -- command line ------------------------------------------------------------------------------

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
    "soft_teacher": "a bundle (an ensemble too) whose per-frame outputs are soft targets (with "
    "--soft-weight); '': none",
    "soft_weight": "weight of the KL term to --soft-teacher beside CTC's; 0: none",
    "adversary_scale": "scale of a voice classifier's reversed gradient; 0: no adversary",
    "adversary_layer": "what the voice adversary reads: -1 the row-conv output, i recurrent "
    "layer i",
    "phone_lexicon": "a pronouncing dictionary: a phone CTC head beside the characters (with "
    "--phone-weight); '': none",
    "phone_weight": "weight of the phone CTC loss beside CTC's (with --phone-lexicon); 0: none",
    "phone_layer": "the recurrent layer the phone head reads; -1: the row-conv output",
    "phone_probe_steps": "first steps in which the phone head's gradient stops at its layer; "
    "0: none",
    "phone_head_lr": "the phone head's learning rate as a multiple of the network's",
    "row_conv_lr": "the row convolution's learning rate as a multiple of the network's",
    "residual_lr": "the residual recurrent layers' learning rate as a multiple of the network's",
    "residual_gain": "gain the layers that deepening an --init-from bundle adds start at; 0: "
    "the bundle's function exactly",
    "consistency_weight": "weight of a KL term between two augmented views of each utterance "
    "(CR-CTC); 0: one view",
    "dropout": "share of each recurrent layer's and the row convolution's inputs zeroed per "
    "step; 0: none",
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
        held = _dev_cer_of(best) if resuming else None
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
