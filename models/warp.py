"""Speaker adaptation by frequency warping, chosen by the model's own confidence.

A model trained on few speakers hears an unseen voice far better once that voice's spectrum
is scaled towards the voices it learnt (vocal-tract-length normalisation): on the default
model, a held-out female voice warped down by 0.75 loses a quarter of its character errors.
Which warp suits a voice is not known in advance, so the model runs on a few warped copies
of the same features at once and, per stream, the copy whose outputs are the most
confident so far (lowest cumulative entropy) supplies each output frame; once
`decide_frames` frames of speech have been heard the stream keeps that copy alone and the
others stop costing anything. A bundle whose `warp_merge` is "mean" instead averages every
copy's probabilities, frame by frame, for the whole stream: an ensemble over warped inputs,
which hears unseen voices better than any one copy, at the factors' count in network steps
for as long as the stream lasts. Only frames near speech count: silence or faint noise says
nothing about a voice, and a microphone user who pauses before speaking would otherwise have
the warp fixed before saying a word. The rule only looks at frames already produced, so a
stream fed in chunks chooses exactly as the whole utterance does: streaming still equals
offline.

This module holds the warp's geometry; the rows a stream becomes and the merge rule live in
`models/rows.py`, shared by the streaming runner and the offline forward (`adapted_forward`).
The same geometry serves training's vocal-tract-length perturbation (`training/augment`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from models.config import FeatureConfig, ModelConfig
from models.features import bin_positions
from models.rows import (
    BLANK,
    HOLD_FRAMES,
    SPEECH_PROB,
    InputTransforms,
    PerUtterance,
    RowPlan,
    WarpChoice,
    frame_entropy,
    log_mean,
    select,
)

if TYPE_CHECKING:
    from models.ds2 import DS2

F32 = npt.NDArray[np.float32]

__all__ = [  # the choice and the transforms live in models/rows.py; their old home still names them
    "BLANK",
    "HOLD_FRAMES",
    "SPEECH_PROB",
    "InputTransforms",
    "WarpChoice",
    "adapted_forward",
    "frame_entropy",
    "log_mean",
    "piecewise_warp_matrix",
    "row_plan",
    "select",
    "warp_features",
    "warp_frequencies",
    "warp_matrix",
]


def warp_matrix(positions: Sequence[float], alpha: float, boundary: float = 0.6) -> F32:
    """[F, F] matrix M with `features @ M` = the features with content at frequency f moved to
    alpha * f, piecewise linearly so that 0 and Nyquist stay put (the kink sits at `boundary`
    of Nyquist, scaled as in Jaitly & Hinton, 2013). `positions` are the bins' centre
    frequencies as shares of Nyquist (`models.features.bin_positions`: even for linear bins,
    denser at the bottom for mel)."""
    knee = boundary * min(alpha, 1.0)  # as a share of Nyquist, on the output side
    return piecewise_warp_matrix(positions, (0.0, knee / alpha, 1.0), (0.0, knee, 1.0))


def piecewise_warp_matrix(
    positions: Sequence[float], knots_from: Sequence[float], knots_to: Sequence[float]
) -> F32:
    """[F, F] matrix moving the content at each frequency `knots_from[i]` to `knots_to[i]`,
    linearly in between (shares of Nyquist; both increasing, from 0 to 1). Each output bin
    linearly interpolates the two source bins around the frequency it takes its content
    from. With more knots than `warp_matrix`'s one kink, each region of the spectrum moves by
    its own amount, the way two speakers' vowel spaces differ by more than the length of the
    vocal tract."""
    pos_out = np.asarray(positions, dtype=np.float64)
    n_bins = len(pos_out)
    # the source frequency whose content lands on each output bin (the warp's inverse)
    src_freq = np.interp(
        pos_out, np.asarray(knots_to, np.float64), np.asarray(knots_from, np.float64)
    )
    pos = np.interp(src_freq, pos_out, np.arange(n_bins, dtype=np.float64))
    lo = np.clip(np.floor(pos).astype(int), 0, n_bins - 2)
    frac = pos - lo
    m = np.zeros((n_bins, n_bins), np.float64)
    np.add.at(m, (lo, np.arange(n_bins)), 1.0 - frac)
    np.add.at(m, (lo + 1, np.arange(n_bins)), frac)
    return m.astype(np.float32)


@functools.lru_cache(maxsize=64)
def _cached_matrix(features: FeatureConfig, alpha: float) -> Tensor:
    """Serving uses a handful of fixed factors: their matrices are built once."""
    return torch.from_numpy(warp_matrix(bin_positions(features), alpha))


def warp_frequencies(logspec: F32, alpha: float, features: FeatureConfig) -> F32:
    """A [T, F] log spectrogram (of `features`' kind) warped by `alpha` (>1 moves formants
    up); a new array."""
    if alpha == 1.0:
        return np.array(logspec, dtype=np.float32, copy=True)
    return np.asarray(logspec @ warp_matrix(bin_positions(features), float(alpha)), np.float32)


def warp_features(feats: Tensor, alpha: float, features: FeatureConfig) -> Tensor:
    """Raw feature frames [..., F] of `features`' kind warped by `alpha` (any batch)."""
    if alpha == 1.0:
        return feats
    m = _cached_matrix(features, float(alpha))
    return feats @ m.to(device=feats.device, dtype=feats.dtype)


def row_plan(config: ModelConfig) -> RowPlan:
    """How `config`'s network hears a stream: its warps as rows, merged as it says."""
    warp = functools.partial(warp_features, features=config.features)
    return RowPlan(config.warp_factors, config.warp_merge, config.warp_decide_frames, warp)


@torch.no_grad()
def adapted_forward(
    model: DS2,
    feats: Tensor,
    lengths: Tensor,
    transforms: Sequence[InputTransforms] | None = None,
    profiles: Sequence[InputTransforms | None] | None = None,
) -> tuple[Tensor, Tensor]:
    """`model(feats, lengths)` with the model's warp adaptation applied to each utterance:
    exactly what the streaming server produces for it, through the same `models/rows.py`
    plan. Without warp factors, plain forward. With `transforms` (one per utterance,
    `models/input_adaptation.py`) each warped copy is heard twice, as it is and through the
    utterance's fitted transform, and the two are averaged before the copies merge: what the
    server gives a file it adapts to. With `profiles` (one per utterance, or None) each warped
    copy is heard through the speaker's profile alone: what the server gives a stream whose
    profile came with its first chunk."""
    plan = row_plan(model.config)
    if profiles is not None:
        assert transforms is None, "a file's transforms or a speaker's profile, not both"
        assert len(profiles) == feats.shape[0], "one profile (or None) per utterance"
    if plan.identity(transforms is not None, any(profiles or ())):
        lp, n = model(feats, lengths)
        return lp, n
    b = feats.shape[0]
    if transforms is not None:
        assert len(transforms) == b, "one set of transforms per utterance"
    candidates = plan.expand(
        feats,
        range(plan.candidates),
        None if transforms is None else PerUtterance(transforms),
        None if profiles is None else PerUtterance(profiles),
    )
    # as is (or profiled) for every candidate first, then every transformed copy
    rows = [c[0] for c in candidates] + [c[1] for c in candidates if len(c) > 1]
    lp, n = model(torch.cat(rows), lengths.repeat(len(rows)))
    out = lp[:b].clone()
    k = len(candidates)
    for i in range(b):
        t = int(n[i])
        outs = [lp[r * b + i, :t].float().numpy() for r in range(len(rows))]
        grouped = [outs[j::k] for j in range(k)]
        merged = plan.merge_rows(grouped, plan.start())
        out[i, :t] = torch.from_numpy(merged).to(out.dtype)
    return out, n[:b]
