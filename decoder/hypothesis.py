"""What a decoder stream returns: hypotheses with scored, timed words."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Word:
    word: str
    start: float  # seconds: start of the frame where its first symbol was emitted
    end: float  # seconds: end of the frame where its last symbol was emitted
    conf: float  # 0..1: geometric mean of its symbols' frame posteriors


@dataclass(frozen=True)
class Hypothesis:
    text: str
    score: float  # total Q = acoustic + alpha * lm + beta * count (+ penalties, boosts)
    acoustic: float  # log p_ctc(text | audio), natural log
    lm: float  # log p_lm(text), natural log (0 without an LM)
    words: tuple[Word, ...]
    stable: int = -1  # len of the text prefix no later audio can change; -1 means all of it

    @property
    def stable_text(self) -> str:
        """The prefix of `text` that is final (common to every live beam)."""
        return self.text if self.stable < 0 else self.text[: self.stable]
