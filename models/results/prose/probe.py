"""The general LM's share, the LM weight and the bonus, read on TTS dev, her dev and prose dev.

Usage (repository root):
    python models/results/rescore/nbest.py WORK          # caches tts_dev and her_dev
    python models/results/prose/cache.py WORK            # caches prose_dev beside them
    python models/results/prose/probe.py WORK SHARES ALPHAS BETAS

Does the search tuned on the fortunes (TTS dev) suit prose the LMs never read? One JSON line
of beam WER per point, two points at a time; the blank penalty and the rest stay the bundle's.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import pickle
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
    torch.set_num_threads(1)
    first = SETS["tts_dev"]
    base = load_config(BUNDLE, first.config.frame_seconds)
    config = dataclasses.replace(base, alpha=alpha, beta=beta)
    lm = InterpolatedLM(MODELS, [1 - share, share])
    decoder = BeamSearchDecoder(Alphabet.from_list(first.config.alphabet), config, lm, WORDS)
    row = {"share": share, "alpha": alpha, "beta": beta}
    for name, out in SETS.items():
        hyps = [decoder.decode(lp)[0].text for lp in out.log_probs]
        row[name] = round(100 * wer(zip(out.references, hyps, strict=True)).rate, 2)
    return row


if __name__ == "__main__":
    grid = [[float(x) for x in arg.split(",")] for arg in sys.argv[2:5]]
    with Pool(2) as pool:
        for row in pool.imap(point, list(itertools.product(*grid))):
            print(json.dumps(row), flush=True)
