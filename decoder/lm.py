"""Language models for the beam search: a small protocol and its KenLM implementation.

Scores are natural logs (KenLM's log10 times ln 10), so that alpha weighs them against
log p_ctc on the same scale. A word LM is asked once per word, at its boundary; a
character LM once per character (the space is the token `CHAR_SPACE`, since KenLM splits
its input on whitespace).

Caching: each stream caches the LM score of every prefix it has built (decoder/prefixes.py),
and nothing is cached across streams. A shared (state, token) cache was tried and taken out:
it made a pass over TTS dev slower, not faster (KenLM's lookup costs less than the cache's
misses), it grew to hundreds of MB in a long-running decoder process, and emptying it stalled
whichever chunk filled it for about 90 ms (decoder/results/stalls.md). A `KenLM` object is
read-only, so streams and threads share it freely.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from pathlib import Path
from typing import Any, Literal, Protocol

import kenlm

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
