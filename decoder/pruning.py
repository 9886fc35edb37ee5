"""DS2 §7.3 pruning: per frame, only the fewest symbols whose cumulative probability reaches
p (at most K) may extend a beam. A frame where the blank alone reaches p extends nothing:
the search takes its fast path there."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from decoder.alphabet import BLANK

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def candidate_symbols(log_probs: F64, cutoff_prob: float, top_n: int) -> list[I64]:
    """For each frame of log_probs [T, V], the non-blank symbol ids (ascending) that may
    extend a beam: the most probable symbols until their mass reaches `cutoff_prob`,
    at most `top_n` of them (the blank counts towards both, but is not returned)."""
    order = np.argsort(-log_probs, axis=1, kind="stable")
    mass = np.cumsum(np.exp(np.take_along_axis(log_probs, order, axis=1)), axis=1)
    counts = np.minimum((mass < cutoff_prob).sum(axis=1) + 1, top_n)
    out: list[I64] = []
    for row, n in zip(order, counts.tolist(), strict=True):
        ids = row[:n]
        out.append(np.sort(ids[ids != BLANK]))
    return out
