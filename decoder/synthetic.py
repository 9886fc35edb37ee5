"""Synthetic CTC log-probs for a text: a stand-in acoustic model for tests and for
benchmarks run before a trained bundle exists.

Each symbol holds a few frames and is separated by blanks, as a CTC network's spikes are;
some symbols are confused with another one of similar strength, so greedy decoding makes
errors that a language model can correct. Results from these inputs measure the decoder,
not speech recognition, and are labelled as synthetic wherever they are saved.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from decoder.alphabet import BLANK, Alphabet

F32 = npt.NDArray[np.float32]


def synthetic_log_probs(
    text: str,
    alphabet: Alphabet,
    rng: np.random.Generator,
    confusion: float = 0.1,
    peak: float = 10.0,
) -> F32:
    """Log posteriors [T, V] whose best path mostly spells `text`; a symbol is confused
    with a random other one with probability `confusion`."""
    ids = alphabet.encode(text).tolist()
    rows: list[int] = []  # the symbol each frame mostly shows (BLANK between symbols)
    for i, s in enumerate(ids):
        gap = int(rng.integers(1 if i and ids[i - 1] == s else 0, 4))
        rows += [BLANK] * gap
        rows += [s] * int(rng.integers(1, 4))
    rows += [BLANK] * int(rng.integers(1, 4))
    logits = rng.normal(0.0, 1.0, size=(len(rows), alphabet.size))
    logits[np.arange(len(rows)), rows] += peak
    for t, s in enumerate(rows):
        if s != BLANK and rng.random() < confusion:
            other = int(rng.integers(1, alphabet.size))
            logits[t, other] = logits[t, s] + rng.normal(0.0, 1.5)
    return log_softmax(logits).astype(np.float32)


def log_softmax(
    logits: npt.NDArray[np.float64] | npt.NDArray[np.float32],
) -> npt.NDArray[np.float64]:
    x = np.asarray(logits, dtype=np.float64)
    out: npt.NDArray[np.float64] = x - np.logaddexp.reduce(x, axis=-1, keepdims=True)
    return out


def flatten(
    log_probs: npt.NDArray[np.float64] | npt.NDArray[np.float32], temperature: float = 2.0
) -> F32:
    """The 'flattened' copy of the benchmark: log-probs taken as logits, divided by the
    temperature and renormalised (what logits / 2 gives for a softmax output)."""
    return log_softmax(np.asarray(log_probs, dtype=np.float64) / temperature).astype(np.float32)
