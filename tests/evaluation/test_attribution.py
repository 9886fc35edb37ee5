"""Error attribution: a text's acoustic mass counted as the search counts it, Q as the search
scores it, and each wrong transcript owed to the part that chose it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings

from decoder.beam import BeamSearchDecoder, DecoderConfig, penalise_blank
from decoder.lm import KenLM
from evaluation.attribution import attribute, objective, shares, text_log_prob
from tests.decoder.conftest import (
    TINY,
    WIDE,
    WORD_BIGRAMS,
    WORDS,
    brute_force,
    rare_word_louder,
    tiny_log_probs,
    write_arpa,
)

NO_BONUS = DecoderConfig(beta=0.0)


@pytest.fixture(scope="module")
def word_lm(tmp_path_factory: pytest.TempPathFactory) -> KenLM:
    return KenLM(write_arpa(tmp_path_factory.mktemp("lm") / "word.arpa", WORDS, WORD_BIGRAMS))


@settings(max_examples=20, deadline=None)
@given(lp=tiny_log_probs)
def test_a_texts_mass_sums_every_alignment_that_reads_as_it(lp: np.ndarray) -> None:
    """Against every path of five frames: leading, trailing and repeated spaces read as one
    text, and each text's mass is the sum of its paths'."""
    for text, mass in brute_force(lp, None, NO_BONUS).items():
        assert text_log_prob(lp, text, TINY) == pytest.approx(mass, abs=1e-9)
        assert text_log_prob(lp, f"  {text} ", TINY) == pytest.approx(mass, abs=1e-9)


@pytest.mark.parametrize("penalty", [0.0, 0.7])
@settings(max_examples=15, deadline=None)
@given(lp=tiny_log_probs)
def test_q_is_what_the_search_scores_its_hypotheses(
    penalty: float, lp: np.ndarray, word_lm: KenLM
) -> None:
    """With nothing pruned, every hypothesis the search returns scores exactly its Q."""
    cfg = dataclasses.replace(WIDE, blank_penalty=penalty)
    decoder = BeamSearchDecoder(TINY, cfg, word_lm)
    penalised = penalise_blank(lp, penalty)
    for hyp in decoder.decode(lp):
        assert objective(decoder, penalised, hyp.text).total == pytest.approx(hyp.score, abs=1e-6)


def test_each_kind_of_error_is_told_apart(tmp_path: Path) -> None:
    """ "ac" is common and "bc" rare; the log-probs hear "bc" a little louder."""
    alphabet, lm, lp = rare_word_louder(tmp_path)
    one_beam = DecoderConfig(alpha=1.0, beta=0.0, beam_width=1, cutoff_prob=1.0)
    narrow = BeamSearchDecoder(alphabet, one_beam, lm, ["ac", "bc"])
    assert narrow.decode(lp)[0].text == "bc"
    # a wide enough search reads "ac": the narrow one lost what its own score prefers
    assert attribute(narrow, lp, "ac", "bc") == "search"
    # had the speaker said "bc", the LM would have talked the search out of what it heard
    assert attribute(narrow, lp, "bc", "ac") == "lm"
    # with the LM barely heard, "ac" read as "bc" is the network's own mistake
    faint = BeamSearchDecoder(alphabet, dataclasses.replace(one_beam, alpha=0.001), lm)
    assert attribute(faint, lp, "ac", "bc") == "network"
    assert attribute(narrow, lp, "bc", " bc ") == "right"


def test_shares_add_up_per_kind() -> None:
    got = shares(["right", "search", "network", "network", "lm"], [0, 1, 2, 5, 2])
    assert got == {
        "search": {"utterances": 1, "share": 0.1},
        "lm": {"utterances": 1, "share": 0.2},
        "network": {"utterances": 2, "share": 0.7},
    }
