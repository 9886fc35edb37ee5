"""Greedy CTC decoding and error rates, for training logs and evaluation without an LM.

(The decoder package has its own search; `models` imports nothing of ours, so the few lines
the trainer needs to report progress live here.)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt


def greedy_decode(log_probs: npt.NDArray[np.floating[Any]], alphabet: Sequence[str]) -> str:
    """Best path: argmax per frame, merge repeats, drop blanks (index 0)."""
    best = np.asarray(log_probs).argmax(axis=-1)
    keep = best[(best != 0) & np.concatenate([[True], best[1:] != best[:-1]])]
    return " ".join("".join(alphabet[i - 1] for i in keep).split())


def edit_distance(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Levenshtein distance between two token sequences."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, start=1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def error_rates(refs: Sequence[str], hyps: Sequence[str]) -> dict[str, float]:
    """Corpus WER and CER: total edits over total reference words / characters."""
    w_err = w_tot = c_err = c_tot = 0
    for r, h in zip(refs, hyps, strict=True):
        w_err += edit_distance(r.split(), h.split())
        w_tot += len(r.split())
        c_err += edit_distance(list(r), list(h))
        c_tot += len(r)
    return {"wer": w_err / max(w_tot, 1), "cer": c_err / max(c_tot, 1)}
