"""How much does a wider or looser beam search buy models/default, and at what decoder time?

Usage: python models/results/beam/sweep.py OUT.json [BUNDLE [ROWS.json [TUNED.json]]]

The network runs once per dev set (TTS dev and her dev prompts, speaker adaptation on, as
the server runs it); every row then only decodes those same log-probs, one thread, one row
after another, so the times compare within this run only. Rows vary the search's pruning
(beam width, score threshold, commit horizon, per-frame symbol cut) at the bundle's alpha and
beta; the last rows re-tune alpha and beta on TTS dev (decoder.tune's seeded random search)
at the widest settings, to tell a search gain from a weight that was tuned for the old beam.
ROWS.json and TUNED.json (lists of decoder.json changes) replace the built-in rows.
Dev sets only: the test sets play no part in choosing.
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
from decoder.metrics import cer, wer
from decoder.tune import tune
from evaluation.model_outputs import ModelOutputs, manifest_log_probs
from server.precision import cpu_description

Changes = dict[str, float | int]

SETS = {"tts_dev": Path("data/corpus/dev.jsonl"), "her_dev": Path("data/asterisk/dev.jsonl")}

ROWS: list[Changes] = [
    {},
    {"beam_width": 96},
    {"beam_width": 384},
    {"beam_width": 768},
    {"beam_width": 1536},
    {"score_threshold": 15.0},
    {"beam_width": 768, "score_threshold": 15.0},
    {"beam_width": 768, "commit_s": 1.5},
    {"beam_width": 768, "cutoff_top_n": 20},
    {"beam_width": 768, "cutoff_prob": 0.999},
]
TUNED: list[Changes] = [
    {},
    {"beam_width": 768},
    {"beam_width": 768, "score_threshold": 15.0},
]


def score(decoder: BeamSearchDecoder, out: ModelOutputs) -> dict[str, float]:
    start = time.perf_counter()
    hyps = [decoder.decode(lp)[0].text for lp in out.log_probs]
    seconds = time.perf_counter() - start
    pairs = list(zip(out.references, hyps, strict=True))
    return {
        "wer": round(wer(pairs).rate, 4),
        "cer": round(cer(pairs).rate, 4),
        "decode_s": round(seconds, 2),
        "ms_per_audio_s": round(1000 * seconds / out.audio_seconds, 3),
    }


def main(out_path: Path, bundle: Path, rows_in: list[Changes], tuned_in: list[Changes]) -> None:
    torch.set_num_threads(1)
    outputs = {name: manifest_log_probs(bundle, path) for name, path in SETS.items()}
    first = next(iter(outputs.values()))
    alphabet = Alphabet.from_list(first.config.alphabet)
    base = load_decoder(bundle, alphabet, first.config.frame_seconds)
    base.decode(first.log_probs[0])  # compile and warm the kernels before any timing
    rows = []
    for changes in rows_in:
        decoder = base.with_config(**changes)
        row = {"changes": changes, **{n: score(decoder, o) for n, o in outputs.items()}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    for changes in tuned_in:
        decoder = base.with_config(**changes)
        tts = outputs["tts_dev"]
        best = tune(decoder, tts.log_probs, tts.references, 30, (0.3, 1.2), (0.0, 2.5)).best
        tuned = decoder.with_config(alpha=best.alpha, beta=best.beta)
        changes_t = {**changes, "alpha": best.alpha, "beta": best.beta}
        row = {"changes": changes_t, **{n: score(tuned, o) for n, o in outputs.items()}}
        rows.append(row)
        print(json.dumps(row), flush=True)
    doc = {
        "bundle": str(bundle),
        "cpu": cpu_description(),
        "base": {k: getattr(base.config, k) for k in ("alpha", "beta", "beam_width")},
        "audio_s": {n: round(o.audio_seconds, 1) for n, o in outputs.items()},
        "rows": rows,
    }
    out_path.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    argv = sys.argv[1:]
    main(
        Path(argv[0]),
        Path(argv[1]) if len(argv) > 1 else Path("models/default"),
        json.loads(Path(argv[2]).read_text()) if len(argv) > 2 else ROWS,
        json.loads(Path(argv[3]).read_text()) if len(argv) > 3 else TUNED,
    )
