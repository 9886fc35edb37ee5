"""A third LM in the mixture: the shares (G:E pairs) of the general LM and of EXTRA, with the LM weight
and bonus, on the shipped pair's dev outputs.

Usage (repository root):
    python models/results/rescore/nbest.py WORK    # caches models/default's dev outputs
    python models/results/prose/third_lm.py WORK EXTRA_DIR G:E,G:E,... ALPHAS BETAS

EXTRA_DIR holds an lm.binary and unigrams.txt (`harken build-lm --out`); the general LM and
the project's own are models/default's. The own LM keeps 1 - both shares. Prints one JSON
line of beam WER per point, two points at a time.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

from decoder.lm import InterpolatedLM, KenLM
from models.results.rescore.nbest import load_outputs
from models.results.rescore.search_probe import beam_wer, run_grid, spelt_words

BUNDLE = Path("models/default")
WORK, EXTRA = Path(sys.argv[1]), Path(sys.argv[2])
SETS = load_outputs(WORK)
MODELS = [KenLM(BUNDLE / "lm.binary"), KenLM(BUNDLE / "general.binary"), KenLM(EXTRA / "lm.binary")]
WORDS = spelt_words(
    BUNDLE / "unigrams.txt", BUNDLE / "general.unigrams.txt", EXTRA / "unigrams.txt"
)


def point(args: tuple[float, ...]) -> dict[str, float]:
    general, extra, alpha, beta = args
    weights = [1 - general - extra, general, extra]
    parts = [(m, w) for m, w in zip(MODELS, weights, strict=True) if w > 0]
    lm = InterpolatedLM([m for m, _ in parts], [w for _, w in parts])
    row = {"general": general, "extra": extra, "alpha": alpha, "beta": beta}
    return row | beam_wer(BUNDLE, SETS, lm, WORDS, alpha, beta)


if __name__ == "__main__":
    shares = [[float(x) for x in pair.split(":")] for pair in sys.argv[3].split(",")]
    alphas, betas = ([float(x) for x in arg.split(",")] for arg in sys.argv[4:6])
    run_grid(point, [(*ge, a, b) for ge, a, b in itertools.product(shares, alphas, betas)])
