"""The mixture's weight, with the LM weight and bonus, on the shipped pair's dev outputs.

Usage (repository root):
    python models/results/rescore/nbest.py WORK    # caches models/default's dev outputs
    python models/results/prose/cache.py WORK      # optional: prose dev beside them
    python models/results/general_lm/probe.py WORK BUNDLE LAMBDAS ALPHAS BETAS

BUNDLE is models/default after `harken mix-lm --name general` (its lm.binary, general.binary
and both unigram lists); LAMBDAS are the general LM's shares (0 = the shipped LM alone), the
rest comma-separated grids. The blank penalty and everything else stay the bundle's. Prints
one JSON line of beam WER per point, two points at a time, on TTS dev, her dev and (when
WORK holds prose_dev.pkl) prose dev.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from decoder.lm import InterpolatedLM, KenLM, LanguageModel
from models.results.prose.cache import load_with_prose
from models.results.rescore.search_probe import beam_wer, run_grid, spelt_words

WORK, BUNDLE = Path(sys.argv[1]), Path(sys.argv[2])
SETS = load_with_prose(WORK)
OWN, GENERAL = KenLM(BUNDLE / "lm.binary"), KenLM(BUNDLE / "general.binary")
OWN_WORDS = (BUNDLE / "unigrams.txt").read_text().split()
ALL_WORDS = spelt_words(BUNDLE / "unigrams.txt", BUNDLE / "general.unigrams.txt")


def point(args: tuple[float, ...]) -> dict[str, float]:
    share, alpha, beta = args
    lm: LanguageModel = OWN if share == 0 else InterpolatedLM([OWN, GENERAL], [1 - share, share])
    words = OWN_WORDS if share == 0 else ALL_WORDS
    row = {"share": share, "alpha": alpha, "beta": beta}
    return row | beam_wer(BUNDLE, SETS, lm, words, alpha, beta)


if __name__ == "__main__":
    grid = [[float(x) for x in arg.split(",")] for arg in sys.argv[3:6]]
    run_grid(point, list(itertools.product(*grid)))
