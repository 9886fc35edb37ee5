"""The decoder benchmark's pruning sweep: a user choosing cutoffs reads each row as what the
decoder does with that setting, and the last row as the search without pruning."""

from __future__ import annotations

import numpy as np

from decoder.alphabet import ENGLISH, Alphabet
from decoder.beam import BeamSearchDecoder, DecoderConfig
from decoder.bench import (
    SWEEP_CUTOFF_PROBS,
    SWEEP_TOP_NS,
    pruning_markdown,
    pruning_sweep,
    pruning_table,
)
from decoder.synthetic import synthetic_log_probs

TEXTS = ["the cat sat", "a dog ran off", "so it goes", "what now"]


def test_the_sweep_spans_the_grid_and_ends_without_pruning() -> None:
    alphabet = Alphabet(ENGLISH)
    rng = np.random.default_rng(3)
    log_probs = [synthetic_log_probs(t, alphabet, rng, confusion=0.3, peak=3.0) for t in TEXTS]
    decoder = BeamSearchDecoder(alphabet, DecoderConfig(beam_width=16, cutoff_prob=0.99))
    rows = pruning_sweep(log_probs, TEXTS, decoder)
    grid = [(r["cutoff_prob"], r["cutoff_top_n"]) for r in rows]
    assert sorted(grid) == sorted(
        (p, n) for p in SWEEP_CUTOFF_PROBS for n in (*SWEEP_TOP_NS, alphabet.size)
    )
    assert grid[-1] == (1.0, alphabet.size)
    table = pruning_table(log_probs, TEXTS, decoder)
    assert (rows[-1]["wer"], rows[-1]["cer"]) == (table["off"]["wer"], table["off"]["cer"])
    # every row sets both knobs itself: starting from a decoder that keeps one symbol a frame
    # gives the same table
    keep_one = pruning_sweep(log_probs, TEXTS, decoder.with_config(cutoff_top_n=1))
    assert [r["cer"] for r in keep_one] == [r["cer"] for r in rows]
    lines = pruning_markdown(
        {"config": decoder.config.__dict__, "pruning": {"model": table}, "pruning_sweep": rows}
    )
    assert "## Pruning (DS2 §7.3: cumulative probability 0.99, at most 40 symbols)\n" in lines
    assert sum(line.startswith(("| 0.99 ", "| 1.0 ")) for line in lines) == 6
