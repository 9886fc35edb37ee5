"""DS2 §7.3 pruning: per frame, only the fewest symbols whose cumulative probability reaches
p (at most K) may extend a beam. A frame where the blank alone reaches p extends nothing:
the search takes its fast path there (decoder/stays.py)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from decoder.alphabet import BLANK

Mask = npt.NDArray[np.bool_]
F64 = npt.NDArray[np.float64]


def candidate_mask(log_probs: F64, cutoff_prob: float, top_n: int) -> Mask:
    """For each frame of log_probs [T, V], which non-blank symbols may extend a beam [T, V]:
    the most probable symbols until their mass reaches `cutoff_prob`, at most `top_n` of
    them (the blank counts towards both, but is never marked)."""
    order = np.argsort(-log_probs, axis=1, kind="stable")
    mass = np.cumsum(np.exp(np.take_along_axis(log_probs, order, axis=1)), axis=1)
    counts = np.minimum((mass < cutoff_prob).sum(axis=1) + 1, top_n)
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(log_probs.shape[1]), axis=1)
    mask: Mask = rank < counts[:, None]
    mask[:, BLANK] = False
    return mask
