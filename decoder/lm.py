"""Language models for the beam search: a small protocol and its KenLM implementation.

Scores are natural logs (KenLM's log10 times ln 10), so that alpha weighs them against
log p_ctc on the same scale. A word LM is asked once per word, at its boundary; a
character LM once per character (the space is the token `CHAR_SPACE`, since KenLM splits
its input on whitespace).

Caching: each stream caches the LM score of every prefix it has built (decoder/prefixes.py),
and nothing is cached across streams. A shared (state, token) cache was tried and taken out:
it made a pass over TTS dev slower, not faster (KenLM's lookup costs less than the cache's
misses), it grew to hundreds of MB in a long-running decoder process, and emptying it stalled
whichever chunk filled it for about 90 ms (experiments/decoder/stalls.md). A `KenLM` object is
read-only, so streams and threads share it freely.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import kenlm
import numpy as np
import numpy.typing as npt

LN10 = math.log(10.0)
CHAR_SPACE = "|"  # the token a character LM uses for the space
Unit = Literal["word", "char"]


class LanguageModel(Protocol):
    """What the beam search needs from an n-gram model; states are hashable values."""

    @property
    def unit(self) -> Unit:
        """'word': tokens are words; 'char': tokens are characters (space = CHAR_SPACE)."""
        ...

    def begin(self) -> Hashable:
        """The state at the start of a sentence (after <s>)."""
        ...

    def score(self, state: Hashable, token: str) -> tuple[float, Hashable, bool]:
        """(ln p(token | state), next state, whether the token is in the vocabulary)."""
        ...

    def finish(self, state: Hashable) -> float:
        """ln p(</s> | state): the end-of-sentence score, added at finalisation."""
        ...


class KenLM:
    """A KenLM ARPA or binary model, queried through the `kenlm` module."""

    def __init__(self, path: str | Path, unit: Unit = "word"):
        if unit not in ("word", "char"):
            raise ValueError(f"unit must be 'word' or 'char', got {unit!r}")
        if not Path(path).is_file():
            raise FileNotFoundError(f"no language model at {path}; build one with harken build-lm")
        self._model: Any = kenlm.Model(str(path))
        self._unit: Unit = unit

    @property
    def unit(self) -> Unit:
        return self._unit

    @property
    def order(self) -> int:
        return int(self._model.order)

    @property
    def raw(self) -> Any:
        """The `kenlm.Model` itself, for callers that query it in a tight loop."""
        return self._model

    def begin(self) -> Hashable:
        state = kenlm.State()
        self._model.BeginSentenceWrite(state)
        return state  # type: ignore[no-any-return]

    def score(self, state: Hashable, token: str) -> tuple[float, Hashable, bool]:
        out = kenlm.State()
        log10 = self._model.BaseScore(state, token, out)
        return float(log10) * LN10, out, token in self._model

    def finish(self, state: Hashable) -> float:
        out = kenlm.State()
        return float(self._model.BaseScore(state, "</s>", out)) * LN10


class InterpolatedLM:
    """Linear interpolation of KenLMs of one unit: p(w | h) = sum_i weight_i p_i(w | h).

    A small in-domain LM knows the phrasing of its texts and little else; a large general one
    knows English. Mixing them per query keeps each model's own history (their orders may
    differ) and the mixture exactly normalised, with no backoff weights to recompute, which a
    merged ARPA would need; the price is one KenLM lookup per model at each word boundary,
    so this class calls the KenLM module directly rather than through `KenLM.score`.
    A token is known if any model knows it.
    """

    def __init__(self, models: Sequence[KenLM], weights: Sequence[float]):
        if len(models) != len(weights) or len(models) < 2:
            raise ValueError("an interpolated LM needs two or more models, one weight each")
        if any(not 0.0 < w < 1.0 for w in weights) or abs(sum(weights) - 1.0) > 1e-6:
            raise ValueError(
                f"mixture weights must lie in (0, 1) and sum to 1, got {list(weights)}"
            )
        units = {m.unit for m in models}
        if len(units) != 1:
            raise ValueError(f"cannot mix LMs of different units: {sorted(units)}")
        self._unit: Unit = models[0].unit
        self.models = tuple(models)
        self._parts = tuple((m.raw, float(w)) for m, w in zip(models, weights, strict=True))

    @property
    def unit(self) -> Unit:
        return self._unit

    def begin(self) -> Hashable:
        return tuple(m.begin() for m in self.models)

    def score(self, state: Hashable, token: str) -> tuple[float, Hashable, bool]:
        assert isinstance(state, tuple)
        p, outs, known = 0.0, [], False
        for (model, weight), before in zip(self._parts, state, strict=True):
            out = kenlm.State()
            p += weight * 10.0 ** model.BaseScore(before, token, out)
            outs.append(out)
            known = known or token in model
        return _ln(p), tuple(outs), known

    def finish(self, state: Hashable) -> float:
        assert isinstance(state, tuple)
        p = 0.0
        for (model, weight), before in zip(self._parts, state, strict=True):
            p += weight * 10.0 ** model.BaseScore(before, "</s>", kenlm.State())
        return _ln(p)


def _ln(p: float) -> float:
    """ln p; KenLM's floor is log10 -100 (an unknown word without <unk>), far above underflow."""
    return math.log(p) if p > 0.0 else -1e4


def unigram_log_probs(lm: LanguageModel, words: Sequence[str]) -> npt.NDArray[np.float64]:
    """ln p(w) of each word with no history at all (KenLM's null context; a mixture's
    weighted sum): what the search can know of a word before it is spelt whole, and so the
    estimate its look-ahead gives a partial word (decoder/tries.py `smear_max`)."""
    if isinstance(lm, KenLM):
        parts = [(lm.raw, 1.0)]
    elif isinstance(lm, InterpolatedLM):
        parts = list(lm._parts)
    else:
        raise TypeError(f"no unigram probabilities for {type(lm).__name__}")
    p = np.zeros(len(words))
    for model, weight in parts:
        null, out = kenlm.State(), kenlm.State()
        model.NullContextWrite(null)
        log10 = np.array([model.BaseScore(null, w, out) for w in words])
        p += weight * 10.0**log10
    lps: npt.NDArray[np.float64] = np.log(np.maximum(p, 1e-300))
    return lps
