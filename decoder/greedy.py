"""Greedy (best-path) CTC decoding as a stream: the cheapest decoder, with no LM or n-best.

Each frame's most likely symbol, repeats collapsed, blanks dropped. It speaks the same
stream API as the beam search (`start`, `advance`, `partial`, `finalize`), and decoding in
chunks equals decoding at once because the only carried state is the previous symbol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from decoder.hypothesis import Hypothesis, Word

F32 = npt.NDArray[np.float32]


@dataclass
class _Symbol:
    char: str
    frame: int
    logp: float


@dataclass
class GreedyStream:
    """One utterance being decoded; `advance` with log-probs [T, V] as they arrive."""

    alphabet: tuple[str, ...]
    frame_seconds: float
    blank: int = 0
    _prev: int = -1
    _frames: int = 0
    _score: float = 0.0
    _symbols: list[_Symbol] = field(default_factory=list)

    def advance(self, log_probs: F32, threshold: float | None = None) -> None:
        """Consume log-probs [T, V] of the next T frames (V = len(alphabet) + 1); there is
        no search to narrow, so `threshold` changes nothing."""
        lp = np.asarray(log_probs)
        if lp.ndim != 2 or lp.shape[1] != len(self.alphabet) + 1:
            raise ValueError(f"log_probs must be [T, {len(self.alphabet) + 1}], got {lp.shape}")
        best = lp.argmax(axis=1)
        best_lp = lp[np.arange(len(best)), best]
        self._score += float(best_lp.sum())
        starts = np.flatnonzero(
            (best != self.blank) & (best != np.concatenate([[self._prev], best[:-1]]))
        )
        for t in starts.tolist():
            self._symbols.append(
                _Symbol(self.alphabet[best[t] - 1], self._frames + t, float(best_lp[t]))
            )
        if len(best):
            self._prev = int(best[-1])
        self._frames += len(best)

    def partial(self) -> Hypothesis:
        return self._hypothesis()

    def finalize(self) -> list[Hypothesis]:
        return [self._hypothesis()]

    def _hypothesis(self) -> Hypothesis:
        words = tuple(self._words())
        text = " ".join(w.word for w in words)
        return Hypothesis(text, self._score, self._score, 0.0, words)  # all of it is stable

    def _words(self) -> list[Word]:
        out: list[Word] = []
        group: list[_Symbol] = []
        for sym in [*self._symbols, _Symbol(" ", self._frames, 0.0)]:
            if sym.char != " ":
                group.append(sym)
                continue
            if group:
                fs = self.frame_seconds
                conf = float(np.exp(np.mean([s.logp for s in group])))
                word = "".join(s.char for s in group)
                out.append(Word(word, group[0].frame * fs, (group[-1].frame + 1) * fs, conf))
            group = []
        return out


@dataclass(frozen=True)
class GreedyDecoder:
    """Starts greedy streams for a model's alphabet (blank at index 0)."""

    alphabet: tuple[str, ...]
    frame_seconds: float  # seconds per output frame

    def start(self, hotwords: Sequence[str] = ()) -> GreedyStream:
        """A new stream; greedy decoding has no way to use hotwords, so they are ignored."""
        return GreedyStream(self.alphabet, self.frame_seconds)
