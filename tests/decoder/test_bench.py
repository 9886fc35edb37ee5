"""The decoder benchmark: a user choosing cutoffs reads each sweep row as what the decoder
does with that setting, and the last row as the search without pruning; a user reading the
peer rows reads searches compared on the same posteriors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from decoder.alphabet import ENGLISH, Alphabet
from decoder.beam import BeamSearchDecoder, DecoderConfig
from decoder.bench import (
    SWEEP_CUTOFF_PROBS,
    SWEEP_TOP_NS,
    compare,
    markdown,
    pruning_markdown,
    pruning_sweep,
    pruning_table,
    run_bench,
)
from decoder.synthetic import synthetic_log_probs
from tests.decoder.conftest import TINY, WORD_BIGRAMS, WORDS, write_arpa

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


def test_with_a_blank_penalty_the_peers_decode_the_posteriors_our_search_sees(
    tmp_path: Path,
) -> None:
    write_arpa(tmp_path / "word.arpa", WORDS, WORD_BIGRAMS)
    (tmp_path / "unigrams.txt").write_text("a\nb\nab\nba\n")
    search = DecoderConfig(beam_width=8, alpha=0.0, beta=0.0)
    config = {"beam_width": 8, "alpha": 0.0, "beta": 0.0}
    doc: dict[str, object] = {"lm": "word.arpa", "unigrams": "unigrams.txt", "config": config}
    (tmp_path / "decoder.json").write_text(json.dumps(doc))
    # "a", then a frame where the blank (0.5) narrowly out-scores "b" (0.45): without the
    # penalty every search reads "a"; with it, "ab"
    frames = np.log(np.array([[0.03, 0.03, 0.9, 0.04], [0.5, 0.025, 0.025, 0.45]]))
    log_probs = [frames.astype(np.float32)]
    raw = compare(log_probs, ["ab"], BeamSearchDecoder(TINY, search), tmp_path)
    assert raw["harken"]["wer"] == raw["pyctcdecode"]["wer"] == raw["flashlight"]["wer"] == 1.0
    doc["config"] = config | {"blank_penalty": 1.0}
    (tmp_path / "decoder.json").write_text(json.dumps(doc))
    out = run_bench(log_probs, ["ab"], tmp_path, TINY, 0.02, {"kind": "test"})
    assert out["harken"]["wer"] == out["pyctcdecode"]["wer"] == out["flashlight"]["wer"] == 0.0
    assert out["greedy"]["wer"] == 1.0  # the network's own best path, unpenalised
    assert "blank penalty 1.0 (pyctcdecode and flashlight-text decode the same" in markdown(out)
