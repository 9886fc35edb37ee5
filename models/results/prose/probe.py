"""The general LM's share, the LM weight and the bonus, read on TTS dev, her dev and prose dev.

Usage (repository root):
    python models/results/rescore/nbest.py WORK          # caches tts_dev and her_dev
    python models/results/prose/cache.py WORK            # caches prose_dev beside them
    python models/results/prose/probe.py WORK SHARES ALPHAS BETAS

Does the search tuned on the fortunes (TTS dev) suit prose the LMs never read? One JSON line
of beam WER per point, two points at a time; the blank penalty and the rest stay the bundle's.
"""

from __future__ import annotations

import itertools
import pickle
import sys
from pathlib import Path

from decoder.lm import InterpolatedLM, KenLM
from models.results.rescore.nbest import load_outputs
from models.results.rescore.search_probe import beam_wer, run_grid

BUNDLE = Path("models/default")
WORK = Path(sys.argv[1])
SETS = load_outputs(WORK)
with open(WORK / "prose_dev.pkl", "rb") as f:
    SETS["prose_dev"] = pickle.load(f)
MODELS = [KenLM(BUNDLE / "lm.binary"), KenLM(BUNDLE / "general.binary")]
WORDS = sorted(
    set((BUNDLE / "unigrams.txt").read_text().split())
    | set((BUNDLE / "general.unigrams.txt").read_text().split())
)


def point(args: tuple[float, ...]) -> dict[str, float]:
    share, alpha, beta = args
    lm = InterpolatedLM(MODELS, [1 - share, share])
    row = {"share": share, "alpha": alpha, "beta": beta}
    return row | beam_wer(BUNDLE, SETS, lm, WORDS, alpha, beta)


if __name__ == "__main__":
    grid = [[float(x) for x in arg.split(",")] for arg in sys.argv[2:5]]
    run_grid(point, list(itertools.product(*grid)))
