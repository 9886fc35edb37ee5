"""Beam WER against the decoder's blank penalty, on the same log-probs.

Usage (repository root): python models/results/blank/sweep.py WORK BUNDLE OUT.jsonl PENALTY...

WORK holds tts_dev.pkl and her_dev.pkl (`models/results/rescore/nbest.py`: models/default's
network over TTS dev and her dev prompts, speaker adaptation on). Every other setting is
BUNDLE's decoder.json; only `blank_penalty` changes. One thread.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from decoder.metrics import cer, wer
from models.results.rescore.nbest import load_outputs


def main(work: Path, bundle: Path, out_path: Path, penalties: list[float]) -> None:
    torch.set_num_threads(1)
    sets = load_outputs(work)
    first = sets["tts_dev"]
    base = load_decoder(
        bundle, Alphabet.from_list(first.config.alphabet), first.config.frame_seconds
    )
    with open(out_path, "w") as out:
        for penalty in penalties:
            decoder = base.with_config(blank_penalty=penalty)
            row: dict[str, object] = {"blank_penalty": penalty}
            for name, o in sets.items():
                pairs = [
                    (r, decoder.decode(lp)[0].text)
                    for r, lp in zip(o.references, o.log_probs, strict=True)
                ]
                row[name] = {
                    "wer": round(100 * wer(pairs).rate, 2),
                    "cer": round(100 * cer(pairs).rate, 2),
                }
            print(json.dumps(row), flush=True)
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), [float(p) for p in sys.argv[4:]])
