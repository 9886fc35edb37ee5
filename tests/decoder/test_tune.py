"""Tuning the search on a dev set: the weight/bonus search and the blank-penalty sweep pick
the settings that read the references best."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from decoder.beam import BeamSearchDecoder, DecoderConfig
from decoder.tune import sweep_setting, tune
from tests.decoder.conftest import TINY, log_softmax, rare_word_louder, spell


def _narrow_blank() -> np.ndarray:
    """'a', then a frame 60% blank / 40% 'b', then blank: plain CTC reads "a"."""
    probs = np.array([[0.05, 0.0, 0.9, 0.05], [0.6, 0.0, 0.0, 0.4]]) + 1e-9
    return np.vstack([log_softmax(np.log(probs)), spell("_", TINY)])


def test_the_blank_penalty_sweep_keeps_the_penalty_that_reads_the_references() -> None:
    decoder = BeamSearchDecoder(TINY)
    lps, refs = [_narrow_blank()] * 3, ["ab"] * 3
    best, table = sweep_setting(decoder, "blank_penalty", lps, refs, [0.0, 1.0, 3.0])
    assert best == 1.0
    assert [p for p, _ in table] == [0.0, 1.0, 3.0]
    assert dict(table)[0.0] == 1.0 and dict(table)[1.0] == 0.0
    with pytest.raises(ValueError, match="at least one"):
        sweep_setting(decoder, "blank_penalty", lps, refs, [])


def test_the_bonus_search_finds_the_word_count_the_references_have() -> None:
    """A frame that is half space, half blank: a negative bonus reads "ab", a positive one
    "a b". The search starts from the decoder's own setting and keeps the best it tried."""
    lp = np.vstack(
        [spell("a", TINY), log_softmax(np.log([0.5, 0.5, 1e-9, 1e-9])), spell("b", TINY)]
    )
    decoder = BeamSearchDecoder(TINY, DecoderConfig(alpha=0.5, beta=-2.0))
    assert decoder.decode(lp)[0].text == "ab"
    result = tune(decoder, [lp] * 2, ["a b"] * 2, trials=12, beta_range=(-3.0, 3.0))
    assert (result.trials[0].alpha, result.trials[0].beta) == (0.5, -2.0)
    assert result.best.wer == 0.0 and result.best.beta > 0
    assert result.best.wer == min(t.wer for t in result.trials)


def test_the_look_ahead_sweep_keeps_the_share_that_reads_the_references(tmp_path: Path) -> None:
    """One beam, a rare word's first letter a little louder than a common one's: only a
    look-ahead keeps the common word, and the sweep finds that."""
    alphabet, lm, lp = rare_word_louder(tmp_path)
    cfg = DecoderConfig(alpha=1.0, beta=0.0, beam_width=1, cutoff_prob=1.0)
    decoder = BeamSearchDecoder(alphabet, cfg, lm, ["ac", "bc"])
    best, table = sweep_setting(decoder, "lookahead", [lp] * 2, ["ac"] * 2, [0.0, 1.0])
    assert best == 1.0 and dict(table) == {0.0: 1.0, 1.0: 0.0}
