"""The shared step of the LM probes: read cached network outputs with a bundle's search, an LM
and a weight and bonus, and report beam WER per set; and run a grid of such points.

The probes (`general_lm/probe.py`, `prose/third_lm.py`, `prose/loglinear.py`) differ only
in the LM they build for a point.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from multiprocessing import Pool
from pathlib import Path
from typing import TypeVar

import torch

from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder
from decoder.lm import LanguageModel
from decoder.loading import load_config
from decoder.metrics import wer
from evaluation.model_outputs import ModelOutputs

P = TypeVar("P")


def spelt_words(*unigram_files: Path) -> list[str]:
    """The words the search may spell: the union of the LMs' unigram lists, sorted."""
    return sorted({w for path in unigram_files for w in path.read_text().split()})


def beam_wer(
    bundle: Path,
    sets: dict[str, ModelOutputs],
    lm: LanguageModel,
    words: Sequence[str],
    alpha: float,
    beta: float,
) -> dict[str, float]:
    """Beam WER (%) of each set, decoded one thread with `bundle`'s search settings but this
    LM, weight and bonus."""
    torch.set_num_threads(1)
    first = next(iter(sets.values()))
    base = load_config(bundle, first.config.frame_seconds)
    config = dataclasses.replace(base, alpha=alpha, beta=beta)
    decoder = BeamSearchDecoder(Alphabet.from_list(first.config.alphabet), config, lm, words)
    row = {}
    for name, out in sets.items():
        hyps = [decoder.decode(lp)[0].text for lp in out.log_probs]
        row[name] = round(100 * wer(zip(out.references, hyps, strict=True)).rate, 2)
    return row


def run_grid(point: Callable[[P], dict[str, float]], points: Sequence[P]) -> None:
    """One JSON line per point, in order, two points at a time (one per core)."""
    with Pool(2) as pool:
        for row in pool.imap(point, points):
            print(json.dumps(row), flush=True)
