"""The beam search: exact on tiny problems, chunked equals whole, sane streaming output."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from decoder.alphabet import ENGLISH, Alphabet
from decoder.beam import BeamSearchDecoder, DecoderConfig
from decoder.lm import KenLM
from tests.decoder.conftest import (
    TINY,
    WIDE,
    brute_force,
    log_softmax,
    rare_word_louder,
    spell,
    tiny_log_probs,
)


@pytest.mark.parametrize("which", ["none", "word", "char"])
@settings(max_examples=15, deadline=None)
@given(lp=tiny_log_probs)
def test_wide_beam_finds_the_best_text(
    which: str, lp: np.ndarray, request: pytest.FixtureRequest
) -> None:
    lm = None if which == "none" else request.getfixturevalue(f"{which}_lm")
    want = brute_force(lp, lm, WIDE)
    got = BeamSearchDecoder(TINY, WIDE, lm).decode(lp)
    best = max(want.values())
    assert got[0].score == pytest.approx(best, abs=1e-6)
    for hyp in got:  # every hypothesis is scored as the reference scores its text
        assert hyp.score == pytest.approx(want[hyp.text], abs=1e-6)


@pytest.mark.parametrize("lookahead", [0.5, 1.0])
@settings(max_examples=15, deadline=None)
@given(lp=tiny_log_probs)
def test_a_look_ahead_moves_no_finished_score(
    lookahead: float, lp: np.ndarray, word_lm: KenLM
) -> None:
    """The look-ahead is only an estimate for partial words: with nothing pruned, every
    hypothesis still scores exactly as its whole text does."""
    cfg = dataclasses.replace(WIDE, lookahead=lookahead)
    got = BeamSearchDecoder(TINY, cfg, word_lm, unigrams=["a", "b", "ab", "ba"]).decode(lp)
    want = brute_force(lp, word_lm, WIDE)
    assert got[0].score == pytest.approx(max(want.values()), abs=1e-6)
    for hyp in got:
        assert hyp.score == pytest.approx(want[hyp.text], abs=1e-6)


def test_a_look_ahead_keeps_the_likelier_word_in_a_narrow_beam(tmp_path: Path) -> None:
    """Two words differ from their first letter and sound alike until their last; the rare
    one's first letter is a little louder. A one-beam search without a look-ahead keeps the
    louder spelling and cannot go back once the common word is cut; with it, the common word
    is worth keeping from its first letter."""
    alphabet, lm, lp = rare_word_louder(tmp_path)
    cfg = DecoderConfig(alpha=1.0, beta=0.0, beam_width=1, cutoff_prob=1.0)
    words = ["ac", "bc"]
    assert BeamSearchDecoder(alphabet, cfg, lm, words).decode(lp)[0].text == "bc"
    looking = dataclasses.replace(cfg, lookahead=1.0)
    assert BeamSearchDecoder(alphabet, looking, lm, words).decode(lp)[0].text == "ac"


def _fuzzed(v: int, max_t: int = 40) -> st.SearchStrategy[np.ndarray]:
    shapes = st.integers(1, max_t).map(lambda t: (t, v))
    return arrays(np.float64, shapes, elements=st.floats(-5, 5)).map(lambda x: log_softmax(x * 3))


@pytest.mark.parametrize(("penalty", "lookahead"), [(0.0, 0.0), (0.7, 0.0), (0.0, 0.8)])
@pytest.mark.parametrize("which", ["none", "word"])
@settings(max_examples=25, deadline=None)
@given(lp=_fuzzed(TINY.size), data=st.data())
def test_chunked_equals_whole(
    which: str,
    penalty: float,
    lookahead: float,
    lp: np.ndarray,
    data: st.DataObject,
    request: pytest.FixtureRequest,
) -> None:
    lm = None if which == "none" else request.getfixturevalue(f"{which}_lm")
    cfg = DecoderConfig(
        beam_width=8,
        cutoff_prob=0.95,
        score_threshold=8.0,
        blank_penalty=penalty,
        lookahead=lookahead,
    )
    decoder = BeamSearchDecoder(TINY, cfg, lm, unigrams=["a", "ab", "ba"])
    cuts = sorted(data.draw(st.lists(st.integers(0, len(lp)), max_size=6)))
    stream = decoder.start(hotwords=[("ab ba", 3.0)])
    for lo, hi in itertools.pairwise([0, *cuts, len(lp)]):
        stream.advance(lp[lo:hi])
        stable = stream.partial().stable_text
    assert stream.finalize() == decoder.decode(lp, hotwords=[("ab ba", 3.0)])
    assert decoder.decode(lp, hotwords=[("ab ba", 3.0)])[0].text.startswith(stable.rstrip())


@settings(max_examples=25, deadline=None)
@given(lp=_fuzzed(TINY.size), narrow=st.sampled_from([0.5, 2.0, 4.0]))
def test_a_narrowed_advance_searches_as_a_narrower_config_does(
    lp: np.ndarray, narrow: float, word_lm: KenLM
) -> None:
    """A loaded server narrows the search per call (`advance(..., threshold)`): the frames so
    decoded give what a decoder configured with that score threshold gives, and a threshold
    wider than the config's changes nothing."""
    cfg = DecoderConfig(beam_width=8, cutoff_prob=0.95, score_threshold=8.0)
    decoder = BeamSearchDecoder(TINY, cfg, word_lm, unigrams=["a", "ab", "ba"])
    narrowed = decoder.start()
    narrowed.advance(lp, threshold=narrow)
    assert narrowed.finalize() == decoder.with_config(score_threshold=narrow).decode(lp)
    wider = decoder.start()
    wider.advance(lp, threshold=50.0)
    assert wider.finalize() == decoder.decode(lp)


def test_a_narrowed_search_keeps_fewer_beams() -> None:
    """Narrowing is a real cut: with a threshold of 0.5, a frame's beams within 0.5 of the best
    stay, and the others go."""
    lp = np.log(np.full((6, TINY.size), 1.0 / TINY.size))
    lp[:, 1] += 0.3  # one symbol a little likelier than the rest each frame
    lp -= np.logaddexp.reduce(lp, axis=1, keepdims=True)
    cfg = DecoderConfig(beam_width=64, cutoff_prob=1.0, score_threshold=20.0, nbest=64)
    wide, narrow = BeamSearchDecoder(TINY, cfg).start(), BeamSearchDecoder(TINY, cfg).start()
    wide.advance(lp)
    narrow.advance(lp, threshold=0.5)
    assert len(narrow.beams.nodes) < len(wide.beams.nodes)
    with pytest.raises(ValueError, match="threshold must be > 0"):
        narrow.advance(lp, threshold=0.0)


ENGLISH_ALPHABET = Alphabet(ENGLISH)


def test_words_have_times_and_confidences() -> None:
    lp = spell("__hh_e_ll_lo__  _wo_rr_ld__", ENGLISH_ALPHABET)
    [best, *_] = BeamSearchDecoder(ENGLISH_ALPHABET, DecoderConfig(frame_seconds=0.02)).decode(lp)
    assert best.text == "hello world"
    assert [w.word for w in best.words] == ["hello", "world"]
    assert best.words[0].start == pytest.approx(2 * 0.02)
    assert best.words[0].end == pytest.approx(12 * 0.02)
    assert best.words[1].start == pytest.approx(17 * 0.02)
    assert all(0.85 < w.conf <= 1.0 for w in best.words)


def test_partial_reports_a_stable_prefix_of_the_best_text() -> None:
    decoder = BeamSearchDecoder(ENGLISH_ALPHABET, DecoderConfig(beam_width=8))
    stream = decoder.start()
    lp = spell("__hh_e_ll_lo__  _wo_rr_ld__", ENGLISH_ALPHABET)
    stream.advance(lp[:16])
    partial = stream.partial()
    assert partial.text.startswith("hello")
    assert 0 <= partial.stable <= len(partial.text)
    assert partial.text.startswith(partial.stable_text)
    stream.advance(lp[16:])
    assert stream.finalize()[0].text.startswith(partial.stable_text.rstrip())


def test_hotword_boost_flips_an_ambiguous_word() -> None:
    lp = spell("__c_a_t__", ENGLISH_ALPHABET)
    b, c = ENGLISH_ALPHABET.id_of("b"), ENGLISH_ALPHABET.id_of("c")
    lp[2, b], lp[2, c] = np.log(0.45), np.log(0.5)
    decoder = BeamSearchDecoder(ENGLISH_ALPHABET)
    assert decoder.decode(lp)[0].text == "cat"
    assert decoder.decode(lp, hotwords=[("bat", 2.0)])[0].text == "bat"
    assert decoder.decode(lp, hotwords={"bat": 0.01})[0].text == "cat"


def test_word_lm_prefers_the_likelier_word(word_lm: KenLM) -> None:
    lp = spell("_a_b_", TINY)  # "ab" acoustically, but make " " between a and b plausible
    lp[2] = np.log([0.05, 0.45, 0.05, 0.45])
    cfg = DecoderConfig(alpha=2.0, beta=0.0)
    assert BeamSearchDecoder(TINY, cfg, word_lm).decode(lp)[0].text == "ab"
    assert BeamSearchDecoder(TINY, cfg).decode(lp)[0].text in ("ab", "a b")


def test_a_blank_penalty_keeps_a_symbol_the_blank_narrowly_outscores() -> None:
    """Frame 1 is 60% blank, 40% 'b': plain CTC reads "a"; with the blank's log-prob lowered
    by 1 (each frame renormalised) the 'b' survives, and the caller's array is not touched."""
    lp = log_softmax(np.log(np.array([[0.05, 0.0, 0.9, 0.05], [0.6, 0.0, 0.0, 0.4]]) + 1e-9))
    lp = np.vstack([lp, spell("_", TINY)])
    before = lp.copy()
    assert BeamSearchDecoder(TINY).decode(lp)[0].text == "a"
    penalised = BeamSearchDecoder(TINY, DecoderConfig(blank_penalty=1.0)).decode(lp)
    assert penalised[0].text == "ab"
    assert np.array_equal(lp, before)
    with pytest.raises(ValueError, match="blank_penalty"):
        DecoderConfig(blank_penalty=float("nan"))


def test_bad_input_is_rejected_with_a_reason() -> None:
    stream = BeamSearchDecoder(TINY).start()
    with pytest.raises(ValueError, match=r"\[T, 4\]"):
        stream.advance(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="NaN"):
        stream.advance(np.full((2, 4), np.nan))
    stream.finalize()
    with pytest.raises(RuntimeError, match="finalized"):
        stream.advance(np.log(np.full((1, 4), 0.25)))
    with pytest.raises(ValueError, match="beam_width"):
        DecoderConfig(beam_width=0)
    with pytest.raises(ValueError, match="lookahead"):
        DecoderConfig(lookahead=1.5)
    with pytest.raises(ValueError, match="hotword"):
        BeamSearchDecoder(TINY).start(hotwords=["abc"])
