"""Decoding in forked workers gives each utterance the hypothesis one process gives it, in
the order the outputs came."""

from __future__ import annotations

import numpy as np

from decoder.alphabet import ENGLISH, Alphabet
from decoder.beam import BeamSearchDecoder
from evaluation.pool_decode import beam_texts
from tests.decoder.conftest import spell


def test_workers_decode_as_one_process_does_in_order() -> None:
    alphabet = Alphabet(ENGLISH)
    paths = ["c_aa_t", "d_o_g", "h_e_ll_l_o", "__", "a_b_c", "x"]
    outputs = [spell(p, alphabet).astype(np.float32) for p in paths]
    decoder = BeamSearchDecoder(alphabet)
    alone = [decoder.decode(o)[0].text for o in outputs]
    assert alone[:3] == ["cat", "dog", "hello"]
    assert beam_texts(decoder, outputs, processes=2) == alone
