"""The greedy fallback decoder: right words and times, chunked equals whole."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from decoder.greedy import GreedyDecoder

F32 = npt.NDArray[np.float32]

ALPHABET = (" ", "'", *"abcdefghijklmnopqrstuvwxyz")


def _log_probs(path: str) -> F32:
    """Frames whose best symbol spells `path`; '_' is the blank."""
    lp = np.full((len(path), len(ALPHABET) + 1), np.log(0.01), np.float32)
    for t, ch in enumerate(path):
        lp[t, 0 if ch == "_" else ALPHABET.index(ch) + 1] = np.log(0.9)
    return lp


def test_collapses_repeats_drops_blanks_and_times_words() -> None:
    stream = GreedyDecoder(ALPHABET, frame_seconds=0.02).start()
    stream.advance(_log_probs("__hh_e_ll_lo__  _wo_rr_ld__"))
    [best] = stream.finalize()
    assert best.text == "hello world"
    assert [w.word for w in best.words] == ["hello", "world"]
    assert best.words[0].start == pytest.approx(2 * 0.02)
    assert best.words[0].end == pytest.approx(12 * 0.02)
    assert 0.85 < best.words[0].conf < 0.95


@pytest.mark.parametrize("cut", [1, 3, 4, 9, 13])
def test_chunked_equals_whole(cut: int) -> None:
    lp = _log_probs("_aa_b__b c_c _d")
    whole = GreedyDecoder(ALPHABET, 0.02).start()
    whole.advance(lp)
    chunked = GreedyDecoder(ALPHABET, 0.02).start()
    chunked.advance(lp[:cut])
    assert chunked.partial().text in whole.partial().text
    chunked.advance(lp[cut:])
    [a], [b] = chunked.finalize(), whole.finalize()
    assert (a.text, a.words) == (b.text, b.words)
    assert a.score == pytest.approx(b.score)
    assert b.text == "abb cc d"


def test_wrong_vocabulary_is_refused() -> None:
    with pytest.raises(ValueError, match=r"log_probs must be \[T, 29\]"):
        GreedyDecoder(ALPHABET, 0.02).start().advance(np.zeros((3, 5), np.float32))
