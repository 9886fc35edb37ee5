"""Caches models/default's outputs over prose dev as WORK/prose_dev.pkl, where
`general_lm/probe.py` reads them beside TTS dev and her dev.

Usage (repository root): python models/results/prose/cache.py WORK
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import torch

from evaluation.model_outputs import manifest_log_probs

if __name__ == "__main__":
    torch.set_num_threads(2)
    work = Path(sys.argv[1])
    work.mkdir(parents=True, exist_ok=True)
    out = manifest_log_probs(Path("models/default"), Path("data/prose/dev.jsonl"))
    with open(work / "prose_dev.pkl", "wb") as f:
        pickle.dump(out, f)
