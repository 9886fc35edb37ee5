"""Decoder time and beam WER of search settings on the same log-probs, interleaved.

Usage (repository root):
    python models/results/lookahead/speed.py WORK ROUNDS NAME=FIELD:VALUE,... [NAME=...]

Each variant is models/default's decoder.json with the listed DecoderConfig fields changed
("shipped=" changes nothing). One thread; TTS dev and her dev log-probs from WORK
(rescore/nbest.py); each round decodes every utterance with each variant in turn. Prints one
JSON line per variant and round: ms of decoding per audio second, each set's beam WER, and
how many of the best hypotheses' words lie outside every LM's vocabulary (glued or misspelt
non-words, issue 17's "resonacrost").
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder
from decoder.loading import load_decoder
from decoder.metrics import wer
from models.results.rescore.nbest import load_outputs
from server.precision import cpu_description


def variant(base: BeamSearchDecoder, spec: str) -> tuple[str, BeamSearchDecoder]:
    """NAME=FIELD:VALUE,... as (NAME, the decoder with those fields changed)."""
    name, _, changes = spec.partition("=")
    fields = dict(item.split(":") for item in changes.split(",") if item)
    typed = {k: int(v) if k == "beam_width" else float(v) for k, v in fields.items()}
    return name, base.with_config(**typed)


def main(work: Path, rounds: int, specs: list[str]) -> None:
    torch.set_num_threads(1)
    sets = load_outputs(work)
    first = next(iter(sets.values()))
    alphabet = Alphabet.from_list(first.config.alphabet)
    base = load_decoder(Path("models/default"), alphabet, first.config.frame_seconds)
    decoders = dict(variant(base, s) for s in specs)
    seconds = sum(o.audio_seconds for o in sets.values())
    vocabulary = set(base._words)
    for d in decoders.values():
        d.decode(first.log_probs[0])  # compile, and build any look-ahead table, before timing
    print(json.dumps({"cpu": cpu_description(), "audio_s": round(seconds, 1)}), flush=True)
    for r in range(rounds):
        for name, decoder in decoders.items():
            row: dict[str, float | int | str] = {"round": r, "variant": name}
            spent, words, unknown = 0.0, 0, 0
            for set_name, out in sets.items():
                start = time.perf_counter()
                hyps = [decoder.decode(lp)[0].text for lp in out.log_probs]
                spent += time.perf_counter() - start
                row[set_name] = round(100 * wer(zip(out.references, hyps, strict=True)).rate, 2)
                said = [w for h in hyps for w in h.split()]
                words += len(said)
                unknown += sum(w not in vocabulary for w in said)
            row["ms_per_audio_s"] = round(1000 * spent / seconds, 3)
            row["words"], row["unknown_words"] = words, unknown
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:])
