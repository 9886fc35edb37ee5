"""The weight and bonus searched again at each look-ahead share, on cached dev outputs: the
first 30 of `harken tune-lm`'s seeded points (make_default.sh evaluate's ranges, the shipped
pair first), chosen on TTS dev as tune-lm chooses; her dev read beside each.

Usage (repository root):
    python models/results/rescore/nbest.py WORK     # caches models/default's dev outputs
    python models/results/lookahead/tune.py WORK LOOKAHEADS PART PARTS   # one process each
Prints one JSON line per point.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from decoder.tune import _wer, draw_points
from models.results.rescore.nbest import load_outputs


def main(work: Path, lookaheads: list[float], part: int, parts: int) -> None:
    torch.set_num_threads(1)
    sets = load_outputs(work)
    first = sets["tts_dev"]
    alphabet = Alphabet.from_list(first.config.alphabet)
    decoder = load_decoder(Path("models/default"), alphabet, first.config.frame_seconds)
    points = draw_points(decoder, 30, (0.2, 1.5), (0.0, 3.5), seed=0)
    grid = [(la, a, b) for la in lookaheads for a, b in points]
    for i, (la, a, b) in enumerate(grid):
        if i % parts != part:
            continue
        d = decoder.with_config(lookahead=la, alpha=float(a), beta=float(b))
        row = {"i": i, "lookahead": la, "alpha": round(a, 4), "beta": round(b, 4)}
        for name, out in sets.items():
            row[name] = round(100 * _wer(d, out.log_probs, out.references), 2)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    lookaheads = [float(x) for x in sys.argv[2].split(",")]
    main(Path(sys.argv[1]), lookaheads, int(sys.argv[3]), int(sys.argv[4]))
