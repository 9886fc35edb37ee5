"""Step 1: the n-best lists of models/default's search over the dev sets, and their oracle.

Usage (repository root): python models/results/rescore/nbest.py WORK_DIR

Runs the network once per dev set (speaker adaptation on, as the server runs it), then
decodes with the shipped decoder.json at commit_s 0.75 (shipped) and 0 (no early commit, so
the n-best differs anywhere in the utterance), 100 hypotheses each. Prints the 1-best WER,
the oracle WER (the best hypothesis in each list) and the mean list length; pickles the lists.
"""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import torch

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from decoder.metrics import edit_distance, wer
from evaluation.model_outputs import ModelOutputs, manifest_log_probs

SETS = {"tts_dev": "data/corpus/dev.jsonl", "her_dev": "data/asterisk/dev.jsonl"}
BUNDLE = Path("models/default")


def load_outputs(work: Path) -> dict[str, ModelOutputs]:
    """The network outputs this script cached in WORK, by set name (for the scripts that
    decode them again: rescore, lm_train_text, blank)."""
    outputs = {}
    for name in SETS:
        with open(work / f"{name}.pkl", "rb") as f:
            outputs[name] = pickle.load(f)
    return outputs


def cache_outputs(work: Path) -> dict[str, ModelOutputs]:
    """Run BUNDLE's network over each set once and pickle its outputs into WORK, where
    `load_outputs` finds them."""
    work.mkdir(parents=True, exist_ok=True)
    outputs = {}
    for name, manifest in SETS.items():
        outputs[name] = manifest_log_probs(BUNDLE, Path(manifest))
        with open(work / f"{name}.pkl", "wb") as f:
            pickle.dump(outputs[name], f)
    return outputs


def main(work: Path) -> None:
    torch.set_num_threads(1)
    for name, out in cache_outputs(work).items():
        alphabet = Alphabet.from_list(out.config.alphabet)
        base = load_decoder(BUNDLE, alphabet, out.config.frame_seconds)
        words = sum(len(r.split()) for r in out.references)
        for commit in (0.75, 0.0):
            decoder = base.with_config(commit_s=commit, nbest=100)
            lists = [decoder.decode(lp) for lp in out.log_probs]
            refs = out.references
            best = [lst[0].text for lst in lists]
            oracle = sum(
                min(edit_distance(r.split(), h.text.split()) for h in lst)
                for r, lst in zip(refs, lists, strict=True)
            )
            row = {
                "wer1": wer(zip(refs, best, strict=True)).rate,
                "oracle": oracle / words,
                "mean_n": sum(map(len, lists)) / len(lists),
            }
            print(name, commit, row, flush=True)
            with open(work / f"{name}_nbest_c{commit}.pkl", "wb") as f:
                pickle.dump(lists, f)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
