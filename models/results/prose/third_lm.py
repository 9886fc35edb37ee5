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

import dataclasses
import itertools
import json
import sys
from multiprocessing import Pool
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder
from decoder.lm import InterpolatedLM, KenLM
from decoder.loading import load_config
from decoder.metrics import wer
from models.results.rescore.nbest import load_outputs

BUNDLE = Path("models/default")
WORK, EXTRA = Path(sys.argv[1]), Path(sys.argv[2])
SETS = load_outputs(WORK)
MODELS = [KenLM(BUNDLE / "lm.binary"), KenLM(BUNDLE / "general.binary"), KenLM(EXTRA / "lm.binary")]
WORDS = sorted(
    set((BUNDLE / "unigrams.txt").read_text().split())
    | set((BUNDLE / "general.unigrams.txt").read_text().split())
    | set((EXTRA / "unigrams.txt").read_text().split())
)


def point(args: tuple[float, ...]) -> dict[str, float]:
    general, extra, alpha, beta = args
    torch.set_num_threads(1)
    first = SETS["tts_dev"]
    base = load_config(BUNDLE, first.config.frame_seconds)
    config = dataclasses.replace(base, alpha=alpha, beta=beta)
    weights = [1 - general - extra, general, extra]
    parts = [(m, w) for m, w in zip(MODELS, weights, strict=True) if w > 0]
    lm = InterpolatedLM([m for m, _ in parts], [w for _, w in parts])
    decoder = BeamSearchDecoder(Alphabet.from_list(first.config.alphabet), config, lm, WORDS)
    row = {"general": general, "extra": extra, "alpha": alpha, "beta": beta}
    for name, out in SETS.items():
        hyps = [decoder.decode(lp)[0].text for lp in out.log_probs]
        row[name] = round(100 * wer(zip(out.references, hyps, strict=True)).rate, 2)
    return row


if __name__ == "__main__":
    shares = [[float(x) for x in pair.split(":")] for pair in sys.argv[3].split(",")]
    alphas, betas = ([float(x) for x in arg.split(",")] for arg in sys.argv[4:6])
    points = [(*ge, a, b) for ge, a, b in itertools.product(shares, alphas, betas)]
    with Pool(2) as pool:
        for row in pool.imap(point, points):
            print(json.dumps(row), flush=True)
