"""Step 3: does the word LSTM pick better hypotheses from the n-best than the 4-gram did?

Usage (repository root): python models/results/rescore/rescore.py WORK_DIR [THREADS]

First each LM's perplexity on the dev transcripts (which neither LM read; the LSTM maps words
outside its vocabulary to <unk>, which flatters it a little). Then each hypothesis is scored
again as its search score + a * its 4-gram log-prob + b * its word count + c * its LSTM
log-prob: a moves weight off the 4-gram, b re-tunes the word bonus. (a, b, c) is chosen on
TTS dev over a grid and applied unchanged to her dev prompts.
"""

from __future__ import annotations

import itertools
import json
import math
import pickle
import sys
from pathlib import Path

import kenlm
import numpy as np
import numpy.typing as npt
import torch

from decoder.hypothesis import Hypothesis
from decoder.metrics import edit_distance
from models.results.rescore.nnlm import EOS, PAD, UNK, WordLM

A = [-0.7, -0.5, -0.3, 0.0]
B = [-0.5, 0.0, 0.5, 1.0, 1.5]
C = [0.0, 0.2, 0.35, 0.5, 0.7, 0.9]
F64 = npt.NDArray[np.float64]


class Scorer:
    """Sentence log-probs (natural log, with </s>) under the LSTM, cached by text."""

    def __init__(self, path: Path) -> None:
        ck = torch.load(path)
        self.stoi = {w: i for i, w in enumerate(ck["itos"])}
        hidden = ck["state"]["rnn.weight_hh_l0"].shape[1]
        self.model = WordLM(len(ck["itos"]), hidden=hidden)
        self.model.load_state_dict(ck["state"])
        self.model.eval()
        self.cache: dict[str, float] = {}

    def __call__(self, texts: list[str]) -> list[float]:
        todo = sorted({t for t in texts if t not in self.cache})
        for i in range(0, len(todo), 256):
            chunk = todo[i : i + 256]
            seqs = [[EOS, *(self.stoi.get(w, UNK) for w in t.split()), EOS] for t in chunk]
            x = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long)
            for j, s in enumerate(seqs):
                x[j, : len(s)] = torch.tensor(s)
            with torch.no_grad():
                h = self.model.proj(self.model.rnn(self.model.emb(x[:, :-1]))[0])
                lp = self.model.head.log_prob(h.reshape(-1, h.shape[-1])).view(*h.shape[:2], -1)
                tok = lp.gather(2, x[:, 1:, None])[..., 0] * (x[:, 1:] != PAD)
            self.cache.update(zip(chunk, tok.sum(1).tolist(), strict=True))
        return [self.cache[t] for t in texts]


def errors(
    refs: list[str], lists: list[list[Hypothesis]], feats: list[F64], w: tuple[float, ...]
) -> int:
    total = 0
    for ref, hyps, f in zip(refs, lists, feats, strict=True):
        score = f[:, 0] + w[0] * f[:, 1] + w[1] * f[:, 2] + w[2] * f[:, 3]
        total += edit_distance(ref.split(), hyps[int(np.argmax(score))].text.split())
    return total


def main(work: Path, threads: int) -> None:
    torch.set_num_threads(threads)
    lstm = Scorer(work / "nnlm.pt")
    ngram = kenlm.Model("models/default/lm.binary")
    for manifest in ("data/corpus/dev.jsonl", "data/asterisk/dev.jsonl"):
        with open(manifest) as f:
            refs = [json.loads(line)["text"] for line in f]
        n = sum(len(r.split()) + 1 for r in refs)
        k = sum(ngram.score(r, bos=True, eos=True) * math.log(10) for r in refs)
        print(manifest, "4-gram ppl", round(math.exp(-k / n), 1), end=" ")
        print("lstm ppl", round(math.exp(-sum(lstm(refs)) / n), 1), flush=True)
    for commit in ("0.0", "0.75"):
        sets = {}
        for name in ("tts_dev", "her_dev"):
            with open(work / f"{name}.pkl", "rb") as f:
                refs = pickle.load(f).references
            with open(work / f"{name}_nbest_c{commit}.pkl", "rb") as f:
                lists = pickle.load(f)
            feats = [
                np.array(
                    [[h.score, h.lm, len(h.text.split()), s] for h, s in zip(hyps, lp, strict=True)]
                )
                for hyps in lists
                for lp in [lstm([h.text for h in hyps])]
            ]
            sets[name] = (refs, lists, feats, sum(len(r.split()) for r in refs))
        refs, lists, feats, n = sets["tts_dev"]
        scored = sorted((errors(refs, lists, feats, w) / n, w) for w in itertools.product(A, B, C))
        w = scored[0][1]
        refs2, lists2, feats2, n2 = sets["her_dev"]
        row = {
            "tts_base": errors(refs, lists, feats, (0, 0, 0)) / n,
            "tts_best": scored[0][0],
            "w": w,
            "her_base": errors(refs2, lists2, feats2, (0, 0, 0)) / n2,
            "her_at_w": errors(refs2, lists2, feats2, w) / n2,
            "top5": scored[:5],
        }
        print(commit, json.dumps(row), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 1)
