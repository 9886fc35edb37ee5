"""Per-frame mixtures of output distributions: log(sum_i w_i p_i) of log-probs.

One primitive for both ways a stream hears with more than one output: an ensemble of
networks (`models/ensemble.py`) and a network's warped copies averaged (`models/warp.py`,
`warp_merge: "mean"`)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

F32 = npt.NDArray[np.float32]


def mix(outputs: list[Tensor], weights: list[float]) -> Tensor:
    """log(sum_i w_i p_i) of per-member log-probs [..., T, V] (float32 out)."""
    if len(outputs) == 1:
        return outputs[0]
    stacked = torch.stack([o.float() + math.log(w) for o, w in zip(outputs, weights, strict=True)])
    return torch.logsumexp(stacked, dim=0)


def mix_numpy(outputs: list[F32], weights: list[float]) -> F32:
    """`mix` for one stream's numpy rows [T, V], as the server holds them."""
    if len(outputs) == 1:
        return outputs[0]
    mixed = mix([torch.from_numpy(o) for o in outputs], weights)
    return np.ascontiguousarray(mixed.numpy(), dtype=np.float32)
