"""Decoder time of two bundles' decoder.json (LM and weights) on the same log-probs, interleaved.

Usage (repository root): python models/results/lm_train_text/decode_time.py WORK A_DIR B_DIR [ROUNDS]

One thread, TTS dev and her dev log-probs from WORK (rescore/nbest.py); each round decodes
every utterance with A, then with B. Prints ms of decoding per audio second, per round.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from models.results.rescore.nbest import load_outputs
from server.precision import cpu_description


def main(work: Path, dirs: list[str], rounds: int) -> None:
    torch.set_num_threads(1)
    outs = list(load_outputs(work).values())
    alphabet = Alphabet.from_list(outs[0].config.alphabet)
    decoders = {d: load_decoder(Path(d), alphabet, outs[0].config.frame_seconds) for d in dirs}
    seconds = sum(o.audio_seconds for o in outs)
    for d in decoders.values():
        d.decode(outs[0].log_probs[0])  # compile and warm before timing
    print(json.dumps({"cpu": cpu_description(), "audio_s": round(seconds, 1)}))
    for r in range(rounds):
        row: dict[str, float | int] = {"round": r}
        for name, decoder in decoders.items():
            start = time.perf_counter()
            for o in outs:
                for lp in o.log_probs:
                    decoder.decode(lp)
            row[name] = round(1000 * (time.perf_counter() - start) / seconds, 3)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:4], int(sys.argv[4]) if len(sys.argv) > 4 else 3)
