"""Probe: re-rank the search's n-best by each text's exact Q (its full CTC mass).

Usage (repository root): python models/results/search/exact.py WORK_DIR [NBEST ...]

The search scores a hypothesis by the alignments its pruning kept; `evaluation/attribution.py`
scores a text by all of them. Where the two orders of an n-best list differ, the exact one is
what the objective prefers, so re-ranking by it can only fix "search" errors (and make a few,
where the objective itself is wrong). Runs the network once per dev set (cached in WORK_DIR),
decodes with the shipped decoder.json at each n-best size, and prints the 1-best WER, the
re-ranked WER, how many utterances changed, and the paired 95% interval of the difference.
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder, penalise_blank
from decoder.loading import load_decoder
from decoder.metrics import edit_distance
from evaluation.attribution import objective
from evaluation.compare import paired_bootstrap
from evaluation.model_outputs import ModelOutputs, manifest_log_probs

SETS = {
    "tts_dev": "data/corpus/dev.jsonl",
    "her_dev": "data/asterisk/dev.jsonl",
    "prose_dev": "data/prose/dev.jsonl",
}
BUNDLE = Path("models/default")


def outputs(work: Path, name: str) -> ModelOutputs:
    """The network's outputs over one set, run once and pickled in WORK."""
    path = work / f"{name}.pkl"
    if path.exists():
        with open(path, "rb") as f:
            cached: ModelOutputs = pickle.load(f)
            return cached
    out = manifest_log_probs(BUNDLE, Path(SETS[name]))
    work.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(out, f)
    return out


def rerank(decoder: BeamSearchDecoder, lp: npt.NDArray[np.float32]) -> tuple[str, str]:
    """The search's best text, and the n-best's text of highest exact Q."""
    hyps = decoder.decode(lp)
    penalised = penalise_blank(lp.astype(np.float64), decoder.config.blank_penalty)
    exact = [objective(decoder, penalised, h.text).total for h in hyps]
    return hyps[0].text, hyps[int(np.argmax(exact))].text


def main(work: Path, sizes: list[int]) -> None:
    rows = []
    for name in SETS:
        out = outputs(work, name)
        alphabet = Alphabet.from_list(out.config.alphabet)
        base = load_decoder(BUNDLE, alphabet, out.config.frame_seconds)
        assert isinstance(base, BeamSearchDecoder)
        lengths = np.array([len(r.split()) for r in out.references])
        for n in sizes:
            decoder = base.with_config(nbest=n)
            pairs = [rerank(decoder, lp) for lp in out.log_probs]
            errors = np.array(
                [
                    [edit_distance(ref.split(), text.split()) for text in pair]
                    for ref, pair in zip(out.references, pairs, strict=True)
                ]
            )
            err_a, err_b = errors.T
            low, high, p_worse = paired_bootstrap(err_a, err_b, lengths)
            row = {
                "set": name,
                "nbest": n,
                "search_wer": float(err_a.sum() / lengths.sum()),
                "reranked_wer": float(err_b.sum() / lengths.sum()),
                "changed": sum(a != b for a, b in pairs),
                "better": int((err_b < err_a).sum()),
                "worse": int((err_b > err_a).sum()),
                "interval": [low, high],
                "p_worse": p_worse,
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    (work / "exact.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), [int(n) for n in sys.argv[2:]] or [5, 20])
