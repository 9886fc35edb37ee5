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

The same warp geometry serves training's vocal-tract-length perturbation (`training/augment`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from models.config import FeatureConfig, WarpMerge
from models.features import bin_positions
from models.mixing import mix_numpy

if TYPE_CHECKING:
    from models.ds2 import DS2

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class InputTransforms:
    """A recording's fitted transforms: under warp candidate k, raw (warped) feature frames
    x [T, F] are heard as x * gain[k] + offset[k]. `models/input_adaptation.py` fits them
    (and re-exports this class); they live here, below it, because `adapted_forward` hears
    through them."""

    gain: F32  # [K, F]
    offset: F32  # [K, F]

    @property
    def candidates(self) -> int:
        return len(self.gain)

    def apply(self, feats: Tensor, k: int) -> Tensor:
        """Candidate k's transform of raw frames [..., T, F] (their dtype and device)."""
        gain = torch.from_numpy(self.gain[k]).to(feats.device, feats.dtype)
        offset = torch.from_numpy(self.offset[k]).to(feats.device, feats.dtype)
        return feats * gain + offset


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


def frame_entropy(log_probs: F32) -> F64:
    """Entropy in nats of each output frame's distribution [T, V] -> [T]."""
    lp = log_probs.astype(np.float64)
    return np.asarray(-(np.exp(lp) * lp).sum(axis=1))


# A frame counts towards the choice while the model hears speech: when the candidates' mean
# probability of a character (not blank) passes SPEECH_PROB, and for HOLD_FRAMES after
# (0.5 s at 20 ms output frames), so the blanks between a word's characters count too.
SPEECH_PROB = 0.5
HOLD_FRAMES = 25
BLANK = 0  # the alphabet puts blank first


@dataclass
class WarpChoice:
    """One stream's choice among K warp factors, updated frame by frame."""

    entropy: F64  # [K] summed entropy of each candidate's counted frames
    neutral: int = 0  # the candidate used while nothing has been heard (factor nearest 1)
    frames: int = 0  # output frames counted (heard near speech)
    since_speech: int | None = None  # frames since the last speech frame; None: none yet
    chosen: int | None = None  # the candidate kept for good, once decided
    mean: bool = False  # average every candidate's probabilities for good: never decide

    @classmethod
    def start(
        cls, k: int, factors: Sequence[float] = (), merge: WarpMerge = "choose"
    ) -> WarpChoice:
        neutral = int(np.argmin([abs(a - 1.0) for a in factors])) if factors else 0
        return cls(np.zeros(k, np.float64), neutral, mean=merge == "mean")

    @property
    def active(self) -> list[int]:
        """Candidates that still have to run."""
        return list(range(len(self.entropy))) if self.chosen is None else [self.chosen]

    def hear(self, speech: bool) -> bool:
        """Advance one frame; whether it counts towards the choice."""
        if speech:
            self.since_speech = 0
        elif self.since_speech is not None:
            self.since_speech += 1
        return self.since_speech is not None and self.since_speech <= HOLD_FRAMES

    @property
    def leader(self) -> int:
        return int(np.argmin(self.entropy)) if self.frames else self.neutral


def select(outputs: Sequence[F32], choice: WarpChoice, decide_frames: int) -> F32:
    """Merge the active candidates' next frames [t, V] (one array each, in `choice.active`
    order) into the stream's output [t, V]; `choice` is updated in place."""
    if choice.mean:
        return log_mean(outputs)
    if choice.chosen is not None:
        assert len(outputs) == 1, "a decided stream runs one candidate"
        return outputs[0]
    assert len(outputs) == len(choice.entropy), "an undecided stream runs every candidate"
    t = len(outputs[0])
    assert all(len(o) == t for o in outputs), "candidates must emit the same frames"
    if not t:
        return outputs[0]
    entropies = np.stack([frame_entropy(o) for o in outputs])
    speech = np.mean([1.0 - np.exp(o[:, BLANK].astype(np.float64)) for o in outputs], axis=0)
    out = np.empty_like(outputs[0])
    for i in range(t):
        if choice.hear(bool(speech[i] > SPEECH_PROB)):
            choice.entropy += entropies[:, i]
            choice.frames += 1
        k = choice.leader
        out[i] = outputs[k][i]
        if choice.frames >= decide_frames:
            choice.chosen = k
            out[i + 1 :] = outputs[k][i + 1 :]
            break
    return out


def log_mean(outputs: Sequence[F32]) -> F32:
    """log of the mean of the candidates' probabilities, frame by frame ([t, V] each)."""
    return mix_numpy(list(outputs), [1.0 / len(outputs)] * len(outputs))


def warp_features(feats: Tensor, alpha: float, features: FeatureConfig) -> Tensor:
    """Raw feature frames [..., F] of `features`' kind warped by `alpha` (any batch)."""
    if alpha == 1.0:
        return feats
    m = _cached_matrix(features, float(alpha))
    return feats @ m.to(device=feats.device, dtype=feats.dtype)


@torch.no_grad()
def adapted_forward(
    model: DS2,
    feats: Tensor,
    lengths: Tensor,
    transforms: Sequence[InputTransforms] | None = None,
    profiles: Sequence[InputTransforms | None] | None = None,
) -> tuple[Tensor, Tensor]:
    """`model(feats, lengths)` with the model's warp adaptation applied to each utterance:
    exactly what the streaming server produces for it. Without warp factors, plain forward.
    With `transforms` (one per utterance, `models/input_adaptation.py`) each warped copy is
    heard twice, as it is and through the utterance's fitted transform, and the two are
    averaged before the copies merge: what the server gives a file it adapts to. With
    `profiles` (one per utterance, or None) each warped copy is heard through the speaker's
    profile alone: what the server gives a stream whose profile came with its first chunk."""
    factors = model.config.warp_factors
    if profiles is not None:
        assert transforms is None, "a file's transforms or a speaker's profile, not both"
        assert len(profiles) == feats.shape[0], "one profile (or None) per utterance"
    if not factors and transforms is None and not any(profiles or ()):
        lp, n = model(feats, lengths)
        return lp, n
    b, alphas = feats.shape[0], factors or (1.0,)
    rows = [warp_features(feats, a, model.config.features) for a in alphas]
    if profiles is not None:
        rows = [
            torch.stack(
                [x if (p := profiles[i]) is None else p.apply(x, k) for i, x in enumerate(copy)]
            )
            for k, copy in enumerate(rows)
        ]
    if transforms is not None:
        assert len(transforms) == b, "one set of transforms per utterance"
        rows += [
            torch.stack([transforms[i].apply(copy[i], k) for i in range(b)])
            for k, copy in enumerate(list(rows))
        ]
    lp, n = model(torch.cat(rows), lengths.repeat(len(rows)))
    out = lp[:b].clone()
    for i in range(b):
        t = int(n[i])
        outs = [lp[r * b + i, :t].float().numpy() for r in range(len(rows))]
        k = len(alphas)
        candidates = [log_mean([outs[j], outs[k + j]]) for j in range(k)] if transforms else outs
        if not factors:
            out[i, :t] = torch.from_numpy(candidates[0]).to(out.dtype)
            continue
        choice = WarpChoice.start(k, factors, model.config.warp_merge)
        merged = select(candidates, choice, model.config.warp_decide_frames)
        out[i, :t] = torch.from_numpy(merged).to(out.dtype)
    return out, n[:b]
