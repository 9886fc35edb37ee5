"""Batch construction strategies for variable-length utterances (seeds/003) and SortaGrad.

How utterances are grouped decides how much of each batch is padding, and so how fast an
epoch runs, and how varied the batches are, and so how well the model learns (seeds/003,
Table 2). Every strategy is a pure function of (lengths, config, epoch): the trainer resumes
after a kill by rebuilding the epoch and skipping the batches it already took, and data-parallel
ranks each take a disjoint slice of every global batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from torch.utils.data import Sampler

STRATEGIES = ("random", "sorted", "bucketing", "alternated")
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class BatchConfig:
    strategy: str = "alternated"  # one of STRATEGIES
    batch_size: int = 32  # utterances per global batch, summed over data-parallel ranks
    bins: int = 64  # alternated: K bins sorted in alternating directions; bucketing: buckets
    sortagrad: bool = True  # DS2 §3.3: the first epoch in increasing length order
    seed: int = 0

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown batch strategy {self.strategy!r}; use one of {STRATEGIES}")
        if self.batch_size < 1 or self.bins < 1:
            raise ValueError("batch_size and bins must be >= 1")


def epoch_batches(lengths: Sequence[float], cfg: BatchConfig, epoch: int) -> list[list[int]]:
    """The global batches of one epoch: every index exactly once, deterministic in (seed, epoch)."""
    lens = np.asarray(lengths, dtype=np.float64)
    if lens.ndim != 1 or len(lens) == 0:
        raise ValueError("lengths must be a non-empty 1-D sequence of utterance lengths")
    rng = np.random.default_rng([cfg.seed, epoch])
    if cfg.sortagrad and epoch == 0:
        return _cut(np.argsort(lens, kind="stable"), cfg.batch_size)
    if cfg.strategy == "random":
        return _cut(rng.permutation(len(lens)), cfg.batch_size)
    if cfg.strategy == "sorted":
        return _shuffled(_cut(np.argsort(lens, kind="stable"), cfg.batch_size), rng)
    if cfg.strategy == "bucketing":
        return _bucketing(lens, cfg, rng)
    return _cut(alternated_order(lens, cfg.bins, rng), cfg.batch_size)


def alternated_order(lens: npt.NDArray[np.float64], bins: int, rng: np.random.Generator) -> Ints:
    """seeds/003 §4: shuffle, cut into K equal bins, sort bins up and down in turn."""
    order = rng.permutation(len(lens))
    parts = np.array_split(order, min(bins, len(order)))
    out = []
    for k, part in enumerate(parts):
        ranked = part[np.argsort(lens[part], kind="stable")]
        out.append(ranked if k % 2 == 0 else ranked[::-1])
    merged: Ints = np.concatenate(out).astype(np.int64)
    return merged


def _bucketing(
    lens: npt.NDArray[np.float64], cfg: BatchConfig, rng: np.random.Generator
) -> list[list[int]]:
    """MXNet-style (seeds/003 §3): length buckets at quantiles, batches drawn within a bucket,
    batches in random order."""
    edges = np.quantile(lens, np.linspace(0, 1, cfg.bins + 1)[1:-1])
    bucket_of = np.searchsorted(edges, lens, side="right")
    batches: list[list[int]] = []
    for b in range(cfg.bins):
        members = np.flatnonzero(bucket_of == b)
        batches += _cut(rng.permutation(members), cfg.batch_size)
    return _shuffled(batches, rng)


def _cut(order: npt.NDArray[np.int64], size: int) -> list[list[int]]:
    return [order[i : i + size].tolist() for i in range(0, len(order), size)]


def _shuffled(batches: list[list[int]], rng: np.random.Generator) -> list[list[int]]:
    return [batches[i] for i in rng.permutation(len(batches))]


def shard(batch: list[int], rank: int, world: int) -> list[int]:
    """Rank `rank`'s contiguous part of a global batch; parts are disjoint and cover it."""
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")
    size, extra = divmod(len(batch), world)
    start = rank * size + min(rank, extra)
    return batch[start : start + size + (rank < extra)]


def padding_ratio(batches: Sequence[Sequence[int]], lengths: Sequence[float]) -> float:
    """Share of the padded batch tensors that is padding: 1 - real / (max length x batch size)."""
    lens = np.asarray(lengths, dtype=np.float64)
    real = padded = 0.0
    for batch in batches:
        if len(batch):
            b = lens[list(batch)]
            real += float(b.sum())
            padded += float(b.max()) * len(b)
    return 1.0 - real / padded if padded > 0 else 0.0


class BatchSampler(Sampler[list[int]]):
    """A torch batch sampler over one epoch, for one data-parallel rank, from a resume point.

    Global batches with fewer utterances than ranks are merged into the batch before them, so
    every rank takes the same number of steps and no utterance is dropped.
    """

    def __init__(
        self, lengths: Sequence[float], cfg: BatchConfig, rank: int = 0, world: int = 1
    ) -> None:
        if world < 1 or not 0 <= rank < world:
            raise ValueError(f"need 0 <= rank < world, got rank={rank}, world={world}")
        if cfg.batch_size < world:
            raise ValueError(f"batch_size {cfg.batch_size} must be >= world size {world}")
        self.lengths, self.cfg, self.rank, self.world = list(lengths), cfg, rank, world
        self.epoch, self.start = 0, 0

    def set_epoch(self, epoch: int, start: int = 0) -> None:
        """Choose the epoch, and how many of its batches were already taken (for resume)."""
        if epoch < 0 or start < 0:
            raise ValueError("epoch and start must be >= 0")
        self.epoch, self.start = epoch, start

    def global_batches(self) -> list[list[int]]:
        batches = epoch_batches(self.lengths, self.cfg, self.epoch)
        if len(batches) > 1 and len(batches[-1]) < self.world:
            batches[-2] = batches[-2] + batches.pop()
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        for batch in self.global_batches()[self.start :]:
            yield shard(batch, self.rank, self.world)

    def __len__(self) -> int:
        return max(0, len(self.global_batches()) - self.start)
