"""Training examples: audio from a manifest, augmented, featurised and labelled, and batched.

`SpeechDataset` does all the per-utterance work in `__getitem__`, so a DataLoader with workers
runs it in parallel processes beside the trainer (seeds/000 §2-3); `collate` pads a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import soundfile as sf
import torch
from threadpoolctl import threadpool_limits
from torch.utils.data import Dataset

from models.config import ALPHABET, FeatureConfig
from models.features import featurize
from models.manifest import Utterance
from training.audio import load_audio as load_audio  # its home is training/audio.py
from training.augment import F32, AugmentConfig, augment, augment_features
from training.teacher import TeacherTargets, align


class Example(NamedTuple):
    feats: torch.Tensor  # [T, F] float32 log-spectrogram frames
    labels: torch.Tensor  # [L] int64 alphabet index + 1 (0 is the CTC blank)
    position: int  # index of the utterance in the manifest
    teacher: torch.Tensor | None = None  # [T', D] teacher targets per output frame (NaN: none)


class Batch(NamedTuple):
    feats: torch.Tensor  # [B, T, F] float32, zero-padded after each utterance's frames
    feat_lengths: torch.Tensor  # [B] int64 frames
    labels: torch.Tensor  # [sum of label_lengths] int64, concatenated (as CTCLoss accepts)
    label_lengths: torch.Tensor  # [B] int64
    indices: torch.Tensor  # [B] int64 manifest positions, for logs and resume checks
    teacher: torch.Tensor | None = None  # [B, T', D] float32 targets, NaN where there are none


def encode(text: str, alphabet: Sequence[str] = ALPHABET) -> list[int]:
    """Transcript to label ids (alphabet index + 1); raises naming an unknown character."""
    ids = {c: i + 1 for i, c in enumerate(alphabet)}
    try:
        return [ids[c] for c in text]
    except KeyError as e:
        raise ValueError(f"character {e.args[0]!r} of {text!r} is not in the alphabet") from None


@dataclass(frozen=True)
class DataConfig:
    features: FeatureConfig  # must equal the model's feature parameters
    augment: AugmentConfig | None = None  # None: clean audio (dev, test, evaluation)
    seed: int = 0  # with the epoch and index, fixes every random perturbation
    teacher: TeacherTargets | None = None  # distillation targets (training/teacher.py)
    time_stride: int = 2  # the model's: output frames per feature frame, to align targets


class SpeechDataset(Dataset[Example]):
    """Utterances of a manifest as (features, labels); augmentation is seeded per
    (seed, epoch, index), so workers, reruns and resumed runs produce identical examples.
    Call `set_epoch` before creating each epoch's DataLoader iterator (workers copy it)."""

    def __init__(self, utterances: Sequence[Utterance], cfg: DataConfig) -> None:
        if not utterances:
            raise ValueError("the manifest has no utterances")
        self.utterances, self.cfg, self.epoch = list(utterances), cfg, 0
        self.labels = [encode(u.text) for u in self.utterances]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.utterances)

    def durations(self) -> list[float]:
        """Seconds per utterance (from the manifest, else the file header): sampler lengths."""
        return [u.duration or sf.info(str(u.audio)).duration for u in self.utterances]

    def __getitem__(self, index: int) -> Example:
        audio = load_audio(str(self.utterances[index].audio), self.cfg.features.sample_rate)
        rng = np.random.default_rng([self.cfg.seed, self.epoch, index])
        n_clean = len(audio)
        if self.cfg.augment is not None:
            audio = augment(audio, self.cfg.augment, rng, self._babble)
        feats = featurize(audio, self.cfg.features)
        if self.cfg.augment is not None:
            feats = augment_features(feats, self.cfg.augment, rng, self.cfg.features)
        labels = torch.tensor(self.labels[index], dtype=torch.int64)
        teacher = None
        if self.cfg.teacher is not None:
            teacher = self._targets(index, len(feats), len(audio) / max(n_clean, 1))
        return Example(torch.from_numpy(np.ascontiguousarray(feats)), labels, index, teacher)

    def _targets(self, index: int, n_frames: int, stretch: float) -> torch.Tensor:
        """The teacher's frames under each output frame of this (speed-perturbed) example."""
        assert self.cfg.teacher is not None
        s, hop_ms = self.cfg.time_stride, self.cfg.features.hop_ms
        n_out = -(-n_frames // s)
        found = self.cfg.teacher.get(self.utterances[index].audio)
        if found is None:
            return torch.full((n_out, self.cfg.teacher.dim), float("nan"))
        aligned = align(found, n_out, 1000.0 / (hop_ms * s), self.cfg.teacher.rate_hz, stretch)
        return torch.from_numpy(aligned)

    def _babble(self, rng: np.random.Generator) -> F32:
        other = self.utterances[int(rng.integers(len(self.utterances)))]
        return load_audio(str(other.audio), self.cfg.features.sample_rate)


def worker_init(worker_id: int) -> None:
    """One BLAS thread per loader worker (DataLoader's worker_init_fn).

    Workers run one per core, and each inherits numpy's BLAS pool (the mel projection is a
    matmul) sized to every core: every worker's pool then contends for the same cores, and
    on a many-core GPU host that starved training of data (experiments/gpu.md)."""
    threadpool_limits(1)


def collate(examples: Sequence[Example]) -> Batch:
    """Pad features to the longest in the batch; concatenate labels and teacher targets."""
    if not examples:
        raise ValueError("cannot collate an empty batch")
    lengths = [e.feats.shape[0] for e in examples]
    n_bins = examples[0].feats.shape[1]
    feats = torch.zeros(len(examples), max(lengths), n_bins, dtype=torch.float32)
    for i, e in enumerate(examples):
        assert e.feats.shape[1] == n_bins, "examples have different feature sizes"
        feats[i, : lengths[i]] = e.feats
    teacher = None
    if all(e.teacher is not None for e in examples):
        t = [e.teacher for e in examples if e.teacher is not None]
        teacher = torch.full((len(t), max(len(x) for x in t), t[0].shape[1]), float("nan"))
        for i, x in enumerate(t):
            teacher[i, : len(x)] = x
    return Batch(
        feats=feats,
        feat_lengths=torch.tensor(lengths, dtype=torch.int64),
        labels=torch.cat([e.labels for e in examples]),
        label_lengths=torch.tensor([len(e.labels) for e in examples], dtype=torch.int64),
        indices=torch.tensor([e.position for e in examples], dtype=torch.int64),
        teacher=teacher,
    )
