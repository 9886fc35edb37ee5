"""Caches models/default's outputs over prose dev as WORK/prose_dev.pkl, where the probes
(`general_lm/probe.py`, `confidence/probe.py`) read them beside TTS dev and her dev.

Usage (repository root): python models/results/prose/cache.py WORK
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import torch

from evaluation.model_outputs import ModelOutputs, manifest_log_probs
from models.results.rescore.nbest import load_outputs

PROSE_DEV = "data/prose/dev.jsonl"


def load_with_prose(work: Path) -> dict[str, ModelOutputs]:
    """`rescore/nbest.py`'s cached dev outputs, and prose dev's when this script cached it."""
    sets = load_outputs(work)
    if (work / "prose_dev.pkl").is_file():
        with open(work / "prose_dev.pkl", "rb") as f:
            sets["prose_dev"] = pickle.load(f)
    return sets


if __name__ == "__main__":
    torch.set_num_threads(2)
    work = Path(sys.argv[1])
    work.mkdir(parents=True, exist_ok=True)
    out = manifest_log_probs(Path("models/default"), Path(PROSE_DEV))
    with open(work / "prose_dev.pkl", "wb") as f:
        pickle.dump(out, f)
