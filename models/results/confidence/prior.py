"""Would the letters the network under-hears help the search if they were made cheaper? A
decode-time test of the forty-seventh session's lead (a training loss that weighs the letters
awb loses): divide each letter's per-frame probability by its prior raised to lam (the hybrid
systems' prior correction: rare-in-output letters gain, common ones lose), or boost only the
letters awb loses most (r, a, n, h) by lam nats, renormalise, and decode with the shipped
search. Beam WER per set and per voice; lam 0 is the shipped decoding.

Usage (repository root; WORK as for rescore/nbest.py, whose cached outputs it reuses and
creates when missing):
    python models/results/confidence/prior.py WORK MODE VALUES
MODE `prior`: VALUES are exponents lam; the priors are the mean posterior of each letter over
TTS dev's frames (blank excluded, it keeps the shipped blank penalty). MODE `letters`: VALUES
are boosts in nats for r, a, n and h. One JSON line per value.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from decoder.alphabet import BLANK, Alphabet
from decoder.loading import load_decoder
from evaluation.model_outputs import F32, ModelOutputs
from models.results.confidence.probe import add_wers, voices_of
from models.results.rescore.nbest import BUNDLE, SETS, cache_outputs, load_outputs

AWB_LETTERS = "ranh"  # the most letters awb loses beyond flite's slt (confidence.md)


def renormalised(log_probs: F32, bias: F32) -> F32:
    """log_probs + bias, as log-probabilities again (each frame sums to one)."""
    shifted = log_probs + bias
    norm: F32 = np.logaddexp.reduce(shifted, axis=1, keepdims=True)
    return (shifted - norm).astype(np.float32)


def letter_priors(out: ModelOutputs) -> F32:
    """The mean posterior of each output symbol over every frame of a set."""
    total = sum(np.exp(lp).sum(axis=0) for lp in out.log_probs)
    frames = sum(len(lp) for lp in out.log_probs)
    return (np.asarray(total) / frames).astype(np.float32)


def main(work: Path, mode: str, values: list[float]) -> None:
    torch.set_num_threads(1)
    have = all((work / f"{name}.pkl").exists() for name in SETS)
    sets = load_outputs(work) if have else cache_outputs(work)
    first = sets["tts_dev"]
    alphabet = Alphabet.from_list(first.config.alphabet)
    decoder = load_decoder(BUNDLE, alphabet, first.config.frame_seconds)
    symbols = ["", *first.config.alphabet]  # output index 0 is the blank
    log_prior = np.log(letter_priors(first))
    voices = voices_of(SETS)
    for value in values:
        if mode == "prior":
            bias = -value * log_prior
        else:
            bias = np.array([value if s in AWB_LETTERS else 0.0 for s in symbols])
        bias[BLANK] = 0.0
        bias -= bias.mean()  # only differences between symbols matter
        b = bias.astype(np.float32)
        row: dict[str, object] = {"mode": mode, "value": value}
        for name, out in sets.items():
            hyps = [decoder.decode(renormalised(lp, b))[0].text for lp in out.log_probs]
            add_wers(row, name, list(zip(out.references, hyps, strict=True)), voices[name])
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], [float(x) for x in sys.argv[3].split(",")])
