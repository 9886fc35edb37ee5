"""The mixture's weight, with the LM weight and bonus, on the shipped pair's dev outputs.

Usage (repository root):
    python models/results/rescore/nbest.py WORK    # caches models/default's dev outputs
    python models/results/general_lm/probe.py WORK BUNDLE LAMBDAS ALPHAS BETAS

BUNDLE is models/default after `harken mix-lm --name general` (its lm.binary, general.binary
and both unigram lists); LAMBDAS are the general LM's shares (0 = the shipped LM alone), the
rest comma-separated grids. The blank penalty and everything else stay the bundle's. Prints
one JSON line of beam WER per point, two points at a time.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import sys
from multiprocessing import Pool
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder
from decoder.lm import InterpolatedLM, KenLM, LanguageModel
from decoder.loading import load_config
from decoder.metrics import wer
from models.results.rescore.nbest import load_outputs

WORK, BUNDLE = Path(sys.argv[1]), Path(sys.argv[2])
SETS = load_outputs(WORK)
OWN, GENERAL = KenLM(BUNDLE / "lm.binary"), KenLM(BUNDLE / "general.binary")
OWN_WORDS = (BUNDLE / "unigrams.txt").read_text().split()
ALL_WORDS = sorted(set(OWN_WORDS) | set((BUNDLE / "general.unigrams.txt").read_text().split()))


def point(args: tuple[float, ...]) -> dict[str, float]:
    share, alpha, beta = args
    torch.set_num_threads(1)
    first = SETS["tts_dev"]
    base = load_config(BUNDLE, first.config.frame_seconds)
    config = dataclasses.replace(base, alpha=alpha, beta=beta)
    lm: LanguageModel = OWN if share == 0 else InterpolatedLM([OWN, GENERAL], [1 - share, share])
    words = OWN_WORDS if share == 0 else ALL_WORDS
    decoder = BeamSearchDecoder(Alphabet.from_list(first.config.alphabet), config, lm, words)
    row = {"share": share, "alpha": alpha, "beta": beta}
    for name, out in SETS.items():
        hyps = [decoder.decode(lp)[0].text for lp in out.log_probs]
        row[name] = round(100 * wer(zip(out.references, hyps, strict=True)).rate, 2)
    return row


if __name__ == "__main__":
    grid = [[float(x) for x in arg.split(",")] for arg in sys.argv[3:6]]
    with Pool(2) as pool:
        for row in pool.imap(point, list(itertools.product(*grid))):
            print(json.dumps(row), flush=True)
