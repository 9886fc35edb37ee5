"""The LM weight, insertion bonus and blank penalty searched together, scored on both dev sets.

Usage (repository root):
  python models/results/joint/search.py cache WORK
      models/default's network over TTS dev and her dev prompts (speaker adaptation on), as
      rescore/nbest.py caches them, without its n-best decoding.
  python models/results/joint/search.py trials WORK PART PARTS
      one JSON line per trial of the seeded (alpha, beta, penalty) draw, trial i in this
      process when i % PARTS == PART; each line has both sets' word errors and word counts,
      so any objective can choose from the same table afterwards.

The draw: trial 0 is the shipped decoder.json; then 119 uniform draws of alpha in [0.2, 1.5],
beta in [0, 3.5] (tune-lm's ranges in make_default.sh) and penalty in [0, 2] (its sweep's).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from decoder.metrics import wer
from models.results.rescore.nbest import BUNDLE, cache_outputs, load_outputs

TRIALS = 120


def points(alpha: float, beta: float, penalty: float) -> list[tuple[float, float, float]]:
    rng = np.random.default_rng(0)
    draws = [(alpha, beta, penalty)]
    for _ in range(TRIALS - 1):
        draws.append((rng.uniform(0.2, 1.5), rng.uniform(0.0, 3.5), rng.uniform(0.0, 2.0)))
    return draws


def trials(work: Path, part: int, parts: int) -> None:
    torch.set_num_threads(1)
    sets = load_outputs(work)
    first = sets["tts_dev"]
    base = load_decoder(
        BUNDLE, Alphabet.from_list(first.config.alphabet), first.config.frame_seconds
    )
    c = base.config
    for i, (a, b, p) in enumerate(points(c.alpha, c.beta, c.blank_penalty)):
        if i % parts != part:
            continue
        d = base.with_config(alpha=float(a), beta=float(b), blank_penalty=float(p))
        row: dict[str, object] = {
            "i": i,
            "alpha": round(a, 4),
            "beta": round(b, 4),
            "blank_penalty": round(p, 4),
        }
        for name, o in sets.items():
            pairs = [
                (r, d.decode(lp)[0].text) for r, lp in zip(o.references, o.log_probs, strict=True)
            ]
            w = wer(pairs)
            row[name] = {"errors": w.errors, "words": w.length}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "cache":
        torch.set_num_threads(2)
        cache_outputs(Path(sys.argv[2]))
    else:
        trials(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
