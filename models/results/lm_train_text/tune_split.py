"""`harken tune-lm --trials 60 --alpha 0.2 1.5 --beta 0 3.5` (make_default.sh evaluate's), its
trials split over processes on cached log-probs: the same 60 points (decoder.tune's seeded
draw), the same WER per point, so the same choice (lowest WER, ties to the first tried).

Usage (repository root): python models/results/lm_train_text/tune_split.py WORK PART PARTS
(PART = 0..PARTS-1, one process each; WORK/tts_dev.pkl from rescore/nbest.py). Prints one
JSON line per trial; the caller writes the chosen pair into decoder.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from decoder.tune import _trial, draw_points
from models.results.rescore.nbest import load_outputs


def main(work: Path, part: int, parts: int) -> None:
    torch.set_num_threads(1)
    out = load_outputs(work)["tts_dev"]
    alphabet = Alphabet.from_list(out.config.alphabet)
    decoder = load_decoder(Path("models/default"), alphabet, out.config.frame_seconds)
    points = draw_points(decoder, 60, (0.2, 1.5), (0.0, 3.5), seed=0)
    for i, (a, b) in enumerate(points):
        if i % parts == part:
            t = _trial(decoder, a, b, out.log_probs, out.references)
            print(json.dumps({"i": i, "alpha": t.alpha, "beta": t.beta, "wer": t.wer}), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]))
