"""Log-linear fusion of the two shipped LMs instead of their linear mixture, on the dev outputs.

Usage (repository root):
    python models/results/rescore/nbest.py WORK
    python models/results/prose/loglinear.py WORK SHARES ALPHAS BETAS

score(w | h) = (1 - g) ln p_own(w | h) + g ln p_general(w | h): not a probability (nothing
normalises it), but ASR systems often fuse LMs this way, since it lets either model veto a
word. One JSON line of beam WER per point (g, alpha, beta), two points at a time.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import kenlm

from decoder.lm import LN10, KenLM, Unit
from models.results.rescore.nbest import load_outputs
from models.results.rescore.search_probe import beam_wer, run_grid, spelt_words

BUNDLE = Path("models/default")
SETS = load_outputs(Path(sys.argv[1]))
OWN, GENERAL = KenLM(BUNDLE / "lm.binary"), KenLM(BUNDLE / "general.binary")
WORDS = spelt_words(BUNDLE / "unigrams.txt", BUNDLE / "general.unigrams.txt")


class LogLinearLM:
    """The `LanguageModel` protocol over two KenLMs, their log-probabilities weighted."""

    unit: Unit = "word"

    def __init__(self, share: float) -> None:
        self._parts: tuple[tuple[Any, float], ...] = (
            (OWN.raw, 1 - share),
            (GENERAL.raw, share),
        )

    def begin(self) -> Hashable:
        return (OWN.begin(), GENERAL.begin())

    def score(self, state: Hashable, token: str) -> tuple[float, Hashable, bool]:
        assert isinstance(state, tuple)
        total, outs, known = 0.0, [], False
        for (model, weight), before in zip(self._parts, state, strict=True):
            out = kenlm.State()
            total += weight * float(model.BaseScore(before, token, out))
            outs.append(out)
            known = known or token in model
        return total * LN10, tuple(outs), known

    def finish(self, state: Hashable) -> float:
        assert isinstance(state, tuple)
        return LN10 * sum(
            weight * float(model.BaseScore(before, "</s>", kenlm.State()))
            for (model, weight), before in zip(self._parts, state, strict=True)
        )


def point(args: tuple[float, ...]) -> dict[str, float]:
    share, alpha, beta = args
    row = {"g": share, "alpha": alpha, "beta": beta}
    return row | beam_wer(BUNDLE, SETS, LogLinearLM(share), WORDS, alpha, beta)


if __name__ == "__main__":
    grid = [[float(x) for x in arg.split(",")] for arg in sys.argv[2:5]]
    run_grid(point, list(itertools.product(*grid)))
