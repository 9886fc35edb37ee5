"""Does a voice the network hears badly want more LM? Beam WER by voice over a grid of LM
weights, and with each utterance's weight scaled by how unsure the network is of it.

Usage (repository root, after rescore/nbest.py WORK and, for prose dev, prose/cache.py WORK):
    python models/results/confidence/probe.py WORK MODE VALUES

MODE `alpha`: VALUES are LM weights, every utterance the same (bonus scaled with it, keeping
the shipped ratio). MODE `scaled`: VALUES are slopes k; an utterance's weight is the shipped
one times exp(k * (u - mean u)), u its mean entropy over frames the network does not give to
blank (in nats; the set's mean). One JSON line per value: beam WER per set and per voice.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import torch

from decoder.alphabet import BLANK, Alphabet
from decoder.loading import load_decoder
from decoder.metrics import wer
from evaluation.model_outputs import F32
from models.results.prose.cache import PROSE_DEV, load_with_prose
from models.results.rescore.nbest import SETS as NBEST_SETS

BUNDLE = Path("models/default")
MANIFESTS = NBEST_SETS | {"prose_dev": PROSE_DEV}


def unsureness(log_probs: F32, blank: int) -> float:
    """Mean entropy (nats) of the frames whose most likely symbol is not blank."""
    frames = log_probs[log_probs.argmax(axis=1) != blank]
    if len(frames) == 0:
        return 0.0
    return float(-(np.exp(frames) * frames).sum(axis=1).mean())


def voices_of(manifests: dict[str, str]) -> dict[str, list[str]]:
    """Each set's voice per utterance, in manifest order."""
    return {
        name: [json.loads(line).get("voice", "?") for line in Path(path).read_text().splitlines()]
        for name, path in manifests.items()
    }


def add_wers(
    row: dict[str, object], name: str, pairs: list[tuple[str, str]], voices: list[str]
) -> None:
    """A set's WER (percent) into row under its name, and each voice's under name:voice."""
    row[name] = round(100 * wer(pairs).rate, 2)
    for voice in sorted(set(voices)):
        sub = [p for p, v in zip(pairs, voices, strict=True) if v == voice]
        row[f"{name}:{voice}"] = round(100 * wer(sub).rate, 2)


def main(work: Path, mode: str, values: list[float]) -> None:
    torch.set_num_threads(1)
    sets = load_with_prose(work)
    first = next(iter(sets.values()))
    alphabet = Alphabet.from_list(first.config.alphabet)
    base = load_decoder(BUNDLE, alphabet, first.config.frame_seconds)
    alpha0, beta0 = base.config.alpha, base.config.beta
    voices = voices_of({name: path for name, path in MANIFESTS.items() if name in sets})
    unsure = {n: [unsureness(lp, BLANK) for lp in out.log_probs] for n, out in sets.items()}
    for value in values:
        row: dict[str, object] = {"mode": mode, "value": value}
        for name, out in sets.items():
            mean_u = sum(unsure[name]) / len(unsure[name])
            hyps = []
            for lp, u in zip(out.log_probs, unsure[name], strict=True):
                scale = value / alpha0 if mode == "alpha" else math.exp(value * (u - mean_u))
                decoder = base.with_config(alpha=alpha0 * scale, beta=beta0 * scale)
                hyps.append(decoder.decode(lp)[0].text)
            add_wers(row, name, list(zip(out.references, hyps, strict=True)), voices[name])
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], [float(x) for x in sys.argv[3].split(",")])
