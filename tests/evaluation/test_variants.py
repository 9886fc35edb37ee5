"""Decoding in forked workers gives each utterance the hypothesis one process gives it, in
the order the outputs came; variants are scored against the baseline."""

from __future__ import annotations

import numpy as np

from decoder.alphabet import ENGLISH, Alphabet
from decoder.beam import BeamSearchDecoder
from evaluation.variants import beam_texts, score_variants
from tests.decoder.conftest import spell


def test_workers_decode_as_one_process_does_in_order() -> None:
    alphabet = Alphabet(ENGLISH)
    paths = ["c_aa_t", "d_o_g", "h_e_ll_l_o", "__", "a_b_c", "x"]
    outputs = [spell(p, alphabet).astype(np.float32) for p in paths]
    decoder = BeamSearchDecoder(alphabet)
    alone = [decoder.decode(o)[0].text for o in outputs]
    assert alone[:3] == ["cat", "dog", "hello"]
    assert beam_texts(decoder, outputs, processes=2) == alone


def test_variants_are_scored_against_the_base() -> None:
    alphabet = Alphabet(ENGLISH)
    refs = ["cat", "dog"]
    right = [spell(p, alphabet).astype(np.float32) for p in ["c_a_t", "d_o_g"]]
    wrong = [spell(p, alphabet).astype(np.float32) for p in ["c_u_t", "d_o_g"]]
    decoder = BeamSearchDecoder(alphabet)
    rows = score_variants(
        decoder, alphabet.symbols, refs, {"wrong": wrong, "right": right}, "right"
    )
    assert rows["right"]["beam_wer"] == 0.0 and "p_worse" not in rows["right"]
    assert rows["wrong"]["beam_wer"] == 0.5 and rows["wrong"]["greedy_cer"] == 1 / 6
    assert rows["wrong"]["vs_base_low"] >= 0.0 and rows["wrong"]["p_worse"] > 0.5
