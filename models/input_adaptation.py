"""Input adaptation: a recording fits a small transform of its own features before it is heard.

A network trained on few voices hears an unheard one better once that voice's features move
towards what it learnt. Speaker warps (`models/warp.py`) move the spectrum along one axis
chosen from a few; this fits, per recording, a gain and an offset for every feature bin
(2 x n_bins numbers per warped copy) by a few steps of gradient descent on the network's own
uncertainty: the mean entropy of its frames that are not blank (single-utterance test-time
adaptation, SUTA: Lin et al., 2022). Alone, that makes the network surer and its greedy
reading better, but the beam search worse; what serves is each warped copy heard twice, as it
is and adapted, their probabilities averaged (models/results/adapt.md: TTS dev 27.29% ->
26.36%, the held-out voices of TTS test 28.76% -> 27.54%, the real-speech prompts flat; the
fit costs about 15 times the network's plain pass).

The fit reads the recording before its first step, so it is for files (REST, `harken
transcribe`, `harken eval`), not live streams. It needs gradients, from an fp32 copy of the
network (the served one may run in bf16 or int8); the update is Adam's, written out, so serving
code imports no optimiser.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from models.ds2 import DS2
from models.warp import BLANK, warp_features

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class AdaptConfig:
    """How a recording's transform is fitted (the measured setting: models/results/adapt.md)."""

    steps: int = 5  # gradient steps (2 at rate 0.1 kept most of the gain at 2/5 of the cost)
    rate: float = 0.05  # Adam's learning rate, per step, in units of the features' spread
    # the fit reads at most this much of the start of a recording: its cost and memory grow
    # with the length, and a voice is learnt in far less (the rest is heard through it too)
    max_seconds: float = 30.0


@dataclass(frozen=True)
class InputTransforms:
    """A recording's fitted transforms: under warp candidate k, raw (warped) feature frames
    x [T, F] are heard as x * gain[k] + offset[k]."""

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


def speech_entropy(log_probs: Tensor) -> tuple[Tensor, Tensor]:
    """Per row of [K, T, V] log-probs, the mean entropy (nats) of the frames whose most
    probable symbol is not the blank, and whether it has any such frame ([K] each)."""
    speech = (log_probs.argmax(-1) != BLANK).to(log_probs.dtype)
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
    lengths = torch.full((k,), copies.shape[1], dtype=torch.long)
    mean, std = model.feat_mean.float(), model.feat_std.float()
    # in units of the network's normalisation: scale 0 and shift 0 are "as it is"
    scale = torch.zeros(k, 1, bins, device=x.device)
    shift = torch.zeros(k, 1, bins, device=x.device)
    adam, live = _Adam.start([scale, shift]), torch.ones(k, 1, 1, dtype=torch.bool)
    for _ in range(config.steps):
        scale.requires_grad_(True)
        shift.requires_grad_(True)
        log_probs, _ = model(mean + (copies - mean) * (1 + scale) + shift * std, lengths)
        loss, heard = speech_entropy(log_probs.float())
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

    def fit(self, feats: F32) -> InputTransforms:
        """`fit_transforms` of raw frames [T, F] with the served network's warp factors."""
        # a caller may be in inference mode, whose tensors cannot carry gradients
        with self._lock, torch.inference_mode(False), torch.enable_grad():
            if self._model is None:
                model = self._load().float().eval()
                for p in model.parameters():
                    p.requires_grad_(False)
                self._model = model
            return fit_transforms(self._model, feats, self.factors, self.config)
