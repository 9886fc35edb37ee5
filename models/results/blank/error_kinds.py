"""Substitutions, deletions and insertions of two decoder.json settings on the same log-probs.

Usage (repository root): python models/results/blank/error_kinds.py WORK A_DIR B_DIR

WORK/tts_dev.pkl and her_dev.pkl as in sweep.py; A_DIR and B_DIR hold decoder.json, lm.binary
and unigrams.txt. Word-level alignment counts, one line per set and bundle.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from models.results.rescore.nbest import load_outputs


def kinds(ref: list[str], hyp: list[str]) -> tuple[int, int, int]:
    """(substitutions, deletions, insertions) of one minimum-edit alignment."""
    n, m = len(ref), len(hyp)
    d = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        d[i][0] = i
    for j in range(m + 1):
        d[0][j] = j
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(
                d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1])
            )
    s = de = ins = 0
    i, j = n, m
    while i or j:
        if i and j and d[i][j] == d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            s += ref[i - 1] != hyp[j - 1]
            i, j = i - 1, j - 1
        elif i and d[i][j] == d[i - 1][j] + 1:
            de, i = de + 1, i - 1
        else:
            ins, j = ins + 1, j - 1
    return s, de, ins


def main(work: Path, dirs: list[str]) -> None:
    torch.set_num_threads(1)
    for name, out in load_outputs(work).items():
        alphabet = Alphabet.from_list(out.config.alphabet)
        for d in dirs:
            decoder = load_decoder(Path(d), alphabet, out.config.frame_seconds)
            totals = [0, 0, 0]
            for ref, lp in zip(out.references, out.log_probs, strict=True):
                k = kinds(ref.split(), decoder.decode(lp)[0].text.split())
                totals = [a + b for a, b in zip(totals, k, strict=True)]
            words = sum(len(r.split()) for r in out.references)
            row = {"set": name, "bundle": d, "words": words}
            row.update(zip(("substitutions", "deletions", "insertions"), totals, strict=True))
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
