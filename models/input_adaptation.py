"""Input adaptation: a recording fits a small transform of its own features before it is heard.

A network trained on few voices hears an unheard one better once that voice's features move
towards what it learnt. Speaker warps (`models/warp.py`) move the spectrum along one axis
chosen from a few; this fits, per recording, a gain and an offset for every feature bin
(2 x n_bins numbers per warped copy) by a few steps of gradient descent on the network's own
uncertainty: the mean entropy of its frames that are not blank (single-utterance test-time
adaptation, SUTA: Lin et al., 2022). Alone, that makes the network surer and its greedy
reading better, but the beam search worse; what serves is each warped copy heard twice, as it
is and adapted, their probabilities averaged: the adapted copy mends some of what the plain
one mishears on unheard voices while the plain one keeps the second choices the search needs
(experiments/adapt.md). The fit costs many plain passes of the network, which a file can
afford and a live stream's latency cannot.

The fit reads the recording before its first step, so it is for files (REST, `harken
transcribe`, `harken eval`), not live streams. It needs gradients, from an fp32 copy of the
network (the served one may run in bf16 or int8); the update is Adam's, written out, so serving
code imports no optimiser.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from models.ds2 import DS2, time_mask
from models.warp import BLANK, warp_features
from models.warp import InputTransforms as InputTransforms  # its home is models/warp.py

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class AdaptConfig:
    """How a recording's transform is fitted (the setting experiments/adapt.md measured)."""

    steps: int = 5  # gradient steps (fewer at a higher rate keep part of the gain for less work)
    rate: float = 0.05  # Adam's learning rate, per step, in units of the features' spread
    # the fit reads at most this much of the start of a recording: its cost and memory grow
    # with the length, and a voice is learnt in far less (the rest is heard through it too)
    max_seconds: float = 30.0
    # over this (seconds; 0: never), the frames are fitted as a batch of pieces this long, not
    # as one sequence: the recurrent layers then take far fewer, wider steps (a long
    # speaker's profile fits several times faster); on a minute the pieces' edges barely
    # move a per-bin transform, on 15 s they do (`ProfileSchedule.config`)
    piece_seconds: float = 0.0


@dataclass(frozen=True)
class ProfileSchedule:
    """When a stream that adapts to its speaker fits the speaker's profile (the same fit over
    the stream's own audio so far, then heard through alone): first once `first_s` seconds of
    it have been stepped, then again each time they have doubled, until one reads `max_s`.
    Most of what a profile gives comes from its first 15 s and the rest within a minute; a
    longer enrolment adds nothing, so the refits stop at `max_s` (experiments/speaker.md)."""

    first_s: float = 15.0
    max_s: float = 60.0
    fit: AdaptConfig = AdaptConfig(steps=10, rate=0.05, max_seconds=60.0, piece_seconds=5.0)

    def __post_init__(self) -> None:
        if not (0 < self.first_s <= self.max_s) or not math.isfinite(self.max_s):
            raise ValueError(
                f"a profile needs 0 < first_s <= max_s, got {self.first_s} and {self.max_s}"
            )

    @classmethod
    def of(cls, first_s: float, max_s: float) -> ProfileSchedule:
        """Fits at `first_s`, doubling up to `max_s`, each reading all the audio so far."""
        return cls(first_s, max_s, dataclasses.replace(cls.fit, max_seconds=max_s))

    def config(self, first: bool) -> AdaptConfig:
        """How a fit runs: a stream's first (on 15 s) as one sequence, the later ones in
        pieces. A short first fit loses accuracy when cut into pieces and saves little, while
        on a minute the pieces read as well as one sequence for a fraction of its cost: the
        recurrent layers take fewer, wider steps (experiments/speaker.md)."""
        return dataclasses.replace(self.fit, piece_seconds=0.0) if first else self.fit

    def due(self, fitted_on_s: float, heard_s: float) -> bool:
        """Whether a stream whose profile read `fitted_on_s` seconds (0: it has none) and
        that has stepped `heard_s` should fit again."""
        if fitted_on_s >= self.max_s:
            return False
        wanted = 2 * fitted_on_s if fitted_on_s else self.first_s
        return heard_s >= min(wanted, self.max_s)


@dataclass
class _Adam:
    """Adam's moments for a few parameters, as torch.optim.Adam keeps them (defaults)."""

    m: list[Tensor]
    v: list[Tensor]
    t: int = 0
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    @classmethod
    def start(cls, params: Sequence[Tensor]) -> _Adam:
        return cls([torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params])

    def update(self, params: Sequence[Tensor], grads: Sequence[Tensor], rate: float) -> None:
        """One step, in place; rows of a parameter whose gradient is exactly zero still move
        with their momentum, as in torch's Adam."""
        self.t += 1
        c1, c2 = 1 - self.beta1**self.t, 1 - self.beta2**self.t
        for p, g, m, v in zip(params, grads, self.m, self.v, strict=True):
            m.mul_(self.beta1).add_(g, alpha=1 - self.beta1)
            v.mul_(self.beta2).addcmul_(g, g, value=1 - self.beta2)
            p.sub_(rate / c1 * m / ((v / c2).sqrt() + self.eps))


def speech_entropy(log_probs: Tensor, valid: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Per row of [K, T, V] log-probs, the mean entropy (nats) of the frames whose most
    probable symbol is not the blank, and whether it has any such frame ([K] each). With
    `valid` [K, T], only the frames it marks count (a row's pieces laid end to end)."""
    speech = (log_probs.argmax(-1) != BLANK).to(log_probs.dtype)
    if valid is not None:
        speech = speech * valid.to(speech.dtype)
    entropy = -(log_probs.exp() * log_probs).sum(-1)
    count = speech.sum(-1)
    return (entropy * speech).sum(-1) / count.clamp(min=1.0), count > 0


def fit_transforms(
    model: DS2, feats: F32, factors: Sequence[float], config: AdaptConfig = AdaptConfig()
) -> InputTransforms:
    """The transforms of raw frames `feats` [T, F] under each warp factor (`()`: one, the
    features as they are) that lower the fp32 `model`'s speech entropy. A warped copy is
    fitted as if alone (the copies share nothing but the batch); one with no speech frame
    stops where it is, as there is nothing to be surer of."""
    cfg = model.config.features
    limit = max(1, int(config.max_seconds * 1000 / cfg.hop_ms))
    x = torch.from_numpy(np.ascontiguousarray(feats[:limit], np.float32))
    x = x.to(next(model.parameters()).device)[None]
    copies = torch.cat([warp_features(x, a, cfg) for a in factors or (1.0,)])  # [K, T, F]
    k, bins = copies.shape[0], copies.shape[-1]
    copies, lengths = _pieces(copies, int(config.piece_seconds * 1000 / cfg.hop_ms))
    n = copies.shape[0] // k  # pieces per copy
    valid = time_mask(model.output_lengths(lengths), int(model.output_lengths(lengths).max()))
    mean, std = model.feat_mean.float(), model.feat_std.float()
    # in units of the network's normalisation: scale 0 and shift 0 are "as it is"
    scale = torch.zeros(k, 1, bins, device=x.device)
    shift = torch.zeros(k, 1, bins, device=x.device)
    adam, live = _Adam.start([scale, shift]), torch.ones(k, 1, 1, dtype=torch.bool)
    for _ in range(config.steps):
        scale.requires_grad_(True)
        shift.requires_grad_(True)
        gains, shifts = (1 + scale).repeat_interleave(n, 0), shift.repeat_interleave(n, 0)
        log_probs, _ = model(mean + (copies - mean) * gains + shifts * std, lengths)
        flat = log_probs.float().reshape(k, -1, log_probs.shape[-1])  # each copy's pieces
        loss, heard = speech_entropy(flat, valid[:, : log_probs.shape[1]].reshape(k, -1))
        live &= heard.view(k, 1, 1).cpu()
        if not bool(live.any()):
            break
        grads = torch.autograd.grad(loss.sum(), [scale, shift])
        scale, shift = scale.detach(), shift.detach()
        keep = live.to(x.device)
        before = (scale.clone(), shift.clone())
        adam.update([scale, shift], grads, config.rate)
        scale, shift = torch.where(keep, scale, before[0]), torch.where(keep, shift, before[1])
    scale, shift = scale.detach().squeeze(1), shift.detach().squeeze(1)
    gain = 1 + scale
    offset = shift * std - mean * scale
    return InputTransforms(
        np.ascontiguousarray(gain.cpu().numpy(), np.float32),
        np.ascontiguousarray(offset.cpu().numpy(), np.float32),
    )


def _pieces(copies: Tensor, size: int) -> tuple[Tensor, Tensor]:
    """[K, T, F] copies cut into pieces of `size` frames ([K * n, size, F], the last piece of
    each copy zero-padded) and their lengths; whole ([K, T, F]) when size is 0 or T fits."""
    k, t, f = copies.shape
    if size <= 0 or t <= size:
        return copies, torch.full((k,), t, dtype=torch.long)
    n = -(-t // size)
    padded = torch.nn.functional.pad(copies, (0, 0, 0, n * size - t))
    lengths = torch.full((n,), size, dtype=torch.long)
    lengths[-1] = t - (n - 1) * size
    return padded.reshape(k * n, size, f), lengths.repeat(k)


class InputAdapter:
    """Fits recordings' transforms for a served network: loads its fp32 copy on first use (a
    server that never adapts never holds it) and fits one recording at a time."""

    def __init__(
        self, load: Callable[[], DS2], factors: Sequence[float], config: AdaptConfig = AdaptConfig()
    ) -> None:
        self._load, self.factors, self.config = load, tuple(factors), config
        self._model: DS2 | None = None
        self._lock = threading.Lock()

    @property
    def candidates(self) -> int:
        """Transforms per recording: one per warp factor of the served network."""
        return max(len(self.factors), 1)

    def fit(self, feats: F32, config: AdaptConfig | None = None) -> InputTransforms:
        """`fit_transforms` of raw frames [T, F] with the served network's warp factors, by
        `config` (a speaker's profile fits longer than a file) or the adapter's own."""
        # a caller may be in inference mode, whose tensors cannot carry gradients
        with self._lock, torch.inference_mode(False), torch.enable_grad():
            if self._model is None:
                model = self._load().float().eval()
                for p in model.parameters():
                    p.requires_grad_(False)
                self._model = model
            return fit_transforms(self._model, feats, self.factors, config or self.config)
