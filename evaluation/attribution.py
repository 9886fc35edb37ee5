"""Where a beam search's word errors come from: the search, the LM, or the network.

The search returns the transcript it found with the best score Q = ln p_ctc(y | x) +
alpha ln p_lm(y) + beta |y| + the unknown-word penalty (`decoder/scorer.py`). For a wrong
transcript, score the reference under the same Q:

- **search**: the reference scores higher; a wider or better-guided search could have found it
  (its pruning, or its look-ahead, lost it).
- **lm**: the transcript scores at least as high, but the network alone prefers the reference:
  the LM, the word bonus or the unknown-word penalty overrode what was heard.
- **network**: the network itself prefers the wrong words; no search or LM setting fixes it.

Which share is large says which lever to pull (beam and look-ahead, LM text and weight, or
training). The acoustic part is the full CTC mass of every label sequence that reads as the
text, counted the way the search counts it (leading and repeated spaces absorbed, a trailing
space merged), so the search's own acoustic score can only be lower (it sums the alignments its
pruning keeps).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder, penalise_blank
from decoder.lm import CHAR_SPACE

F64 = npt.NDArray[np.float64]
Kind = Literal["right", "search", "lm", "network"]
KINDS: tuple[Kind, ...] = ("right", "search", "lm", "network")


def text_log_prob(log_probs: npt.ArrayLike, text: str, alphabet: Alphabet) -> float:
    """ln of the CTC mass of `text`: every alignment whose labels, with leading, trailing and
    repeated spaces dropped, read as `text`'s words.

    One pass over the chain blank, [space], blank, c1, blank, ..., cn, blank, [space], blank:
    the bracketed spaces are optional (a path may start at c1 and end after cn), and the blank
    after every space may return to it (space, blank, space reads as one space)."""
    lp = np.asarray(log_probs, dtype=np.float64)
    space = alphabet.space
    core = [int(i) for i in alphabet.encode(" ".join(text.split()))]
    labels = [space, *core, space] if core else [space]
    n = 2 * len(labels) + 1
    sym = np.zeros(n, dtype=np.int64)  # the output each state emits (even states: blank)
    sym[1::2] = labels
    skip = np.zeros(n, dtype=bool)  # a label may follow the label before it directly
    skip[3::2] = sym[3::2] != sym[1:-2:2]
    back = np.zeros(n, dtype=bool)  # a space, which the blank after it may return to
    back[1::2] = sym[1::2] == space
    starts = [0, 1, 3] if core else [0, 1]
    ends = [n - 1, n - 2, n - 3, n - 4] if core else [0, 1, 2]
    alpha = np.full(n, -np.inf)
    for s in starts:
        alpha[s] = lp[0, sym[s]]
    for frame in lp[1:]:
        prev = alpha
        alpha = prev.copy()
        alpha[1:] = np.logaddexp(alpha[1:], prev[:-1])
        alpha[2:] = np.where(skip[2:], np.logaddexp(alpha[2:], prev[:-2]), alpha[2:])
        alpha[:-1] = np.where(back[:-1], np.logaddexp(alpha[:-1], prev[1:]), alpha[:-1])
        if core:  # no leading space: from the first blank straight to the first letter
            alpha[3] = np.logaddexp(alpha[3], prev[0])
        alpha += frame[sym]
    return float(np.logaddexp.reduce(alpha[ends]))


@dataclass(frozen=True)
class Scores:
    """A text's Q, in the network's part and the rest (LM, bonus, unknown-word penalty)."""

    network: float
    rest: float

    @property
    def total(self) -> float:
        return self.network + self.rest


def objective(decoder: BeamSearchDecoder, log_probs: F64, text: str) -> Scores:
    """Q(text) as `decoder` scores a finished hypothesis (its tokens words, or characters for a
    character LM); `log_probs` already blank-penalised."""
    c, lm = decoder.config, decoder.lm
    network = text_log_prob(log_probs, text, decoder.alphabet)
    if lm is None:  # the bonus alone, per word
        return Scores(network, c.beta * len(text.split()))
    words = " ".join(text.split())
    tokens = words.split() if lm.unit == "word" else list(words.replace(" ", CHAR_SPACE))
    rest, state = 0.0, lm.begin()
    for token in tokens:
        ln_p, state, known = lm.score(state, token)
        rest += c.alpha * ln_p + c.beta + (0.0 if known else c.unk_penalty)
    return Scores(network, rest + c.alpha * lm.finish(state))


def attribute(
    decoder: BeamSearchDecoder, log_probs: npt.ArrayLike, reference: str, hypothesis: str
) -> Kind:
    """Which part of the recogniser `hypothesis`'s difference from `reference` is owed to."""
    if " ".join(hypothesis.split()) == " ".join(reference.split()):
        return "right"
    lp = penalise_blank(np.asarray(log_probs, dtype=np.float64), decoder.config.blank_penalty)
    ref, hyp = objective(decoder, lp, reference), objective(decoder, lp, hypothesis)
    if ref.total > hyp.total:
        return "search"
    return "lm" if ref.network > hyp.network else "network"


def shares(kinds: Sequence[Kind], word_errors: Sequence[int]) -> dict[str, dict[str, float]]:
    """Per kind: its utterances and its share of the word errors."""
    total = max(sum(word_errors), 1)
    return {
        kind: {
            "utterances": sum(k == kind for k in kinds),
            "share": sum(e for k, e in zip(kinds, word_errors, strict=True) if k == kind) / total,
        }
        for kind in KINDS[1:]
    }
