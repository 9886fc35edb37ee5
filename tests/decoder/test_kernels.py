"""The compiled search against its numpy reference, bit for bit, and the compiled pieces
that mirror numpy (sums, logaddexp, the choice of the best beams)."""

from __future__ import annotations

import contextlib
import itertools
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import decoder.beam as beam
from decoder import kernels, stays
from decoder.alphabet import ENGLISH, Alphabet
from decoder.beam import BeamSearchDecoder, DecoderConfig, warm_up
from decoder.jit import array_sum, kernel, logaddexp
from decoder.lm import KenLM
from decoder.step import Limits, best
from decoder.synthetic import synthetic_log_probs
from tests.decoder.conftest import TINY, log_softmax
from tests.decoder.reference_step import reference_blank_run, reference_step

HOT = [("ab ba", 3.0), ("b", 1.5)]


def _run(decoder: BeamSearchDecoder, lp: np.ndarray, cuts: list[int], reference: bool) -> list:
    """Partials at each cut, then the n-best, with the compiled or the reference step."""
    patches = contextlib.ExitStack()
    if reference:
        patches.enter_context(mock.patch.object(beam, "step", reference_step))
        patches.enter_context(mock.patch.object(beam, "blank_run", reference_blank_run))
    with patches:
        stream, out = decoder.start(hotwords=HOT), []
        for lo, hi in itertools.pairwise([0, *cuts, len(lp)]):
            stream.advance(lp[lo:hi])
            out.append(stream.partial())
        return out + stream.finalize()


# log-probs with many exact ties (a few distinct logits) or none (continuous ones)
_logits = st.one_of(st.floats(-5, 5), st.sampled_from([-4.0, -1.0, 0.0, 2.0]))
_lp = arrays(np.float64, st.tuples(st.integers(1, 50), st.just(TINY.size)), elements=_logits)


@pytest.mark.parametrize("which", ["none", "word", "char"])
@settings(max_examples=40, deadline=None)
@given(
    logits=_lp,
    data=st.data(),
    width=st.sampled_from([1, 2, 3, 8, 1000]),
    threshold=st.sampled_from([2.0, 8.0, np.inf]),
    alpha=st.sampled_from([0.7, -0.4]),
    cutoff=st.sampled_from([0.9, 1.0]),
    lookahead=st.sampled_from([0.0, 0.8]),
)
def test_compiled_search_equals_numpy_reference(
    which: str,
    logits: np.ndarray,
    data: st.DataObject,
    width: int,
    threshold: float,
    alpha: float,
    cutoff: float,
    lookahead: float,
    request: pytest.FixtureRequest,
) -> None:
    lm = None if which == "none" else request.getfixturevalue(f"{which}_lm")
    cfg = DecoderConfig(
        alpha=alpha,
        beam_width=width,
        cutoff_prob=cutoff,
        score_threshold=threshold,
        lookahead=lookahead,
    )
    decoder = BeamSearchDecoder(TINY, cfg, lm, unigrams=["a", "ab", "ba"])
    lp = log_softmax(logits * 2)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(lp)), max_size=4)))
    assert _run(decoder, lp, cuts, reference=False) == _run(decoder, lp, cuts, reference=True)


@pytest.mark.parametrize("seed", range(3))
def test_compiled_search_equals_reference_on_english(seed: int, word_lm: KenLM) -> None:
    alphabet, rng = Alphabet(ENGLISH), np.random.default_rng(seed)
    text = "a ba ab the quick brown fox jumps over ab ba"
    lp = synthetic_log_probs(text, alphabet, rng, confusion=0.3, peak=4.0)
    for lookahead in (0.0, 0.7):
        cfg = DecoderConfig(beam_width=16, lookahead=lookahead)
        decoder = BeamSearchDecoder(alphabet, cfg, word_lm, text.split())
        assert _run(decoder, lp, [40], reference=False) == _run(decoder, lp, [40], reference=True)


def test_select_chooses_as_numpy_does_or_defers_to_it() -> None:
    rng, chosen = np.random.default_rng(0), 0
    for trial in range(3000):
        n, width = int(rng.integers(1, 300)), int(rng.integers(1, 70))
        q = rng.normal(0, 5, n) if trial % 2 else rng.integers(-20, 3, n).astype(float)
        q[rng.random(n) < 0.2] = -np.inf
        q[0] = 0.0
        threshold = float(rng.choice([5.0, np.inf]))
        keep = kernels.select(q, width, threshold)
        if keep.size:  # empty: ties, where the caller asks numpy
            np.testing.assert_array_equal(keep, best(q, Limits(width, threshold)))
            chosen += 1
    assert chosen > 1000


def test_numeric_helpers_match_numpy_bit_for_bit() -> None:
    rng = np.random.default_rng(1)
    for n in [*range(40), 127, 128, 129, 1000, 8192, 8193, 20001]:
        a = rng.normal(size=n) * 10 ** rng.uniform(-3, 3, size=n)
        assert array_sum(a) == a.sum()
    x, y = rng.normal(0, 30, 2000), rng.normal(0, 30, 2000)
    x[:5], y[:5] = [-np.inf, 0.0, 3.0, -np.inf, 1.0], [-np.inf, 0.0, -np.inf, 2.0, 1.0]
    assert [logaddexp(a, b) for a, b in zip(x, y, strict=True)] == np.logaddexp(x, y).tolist()


def test_blank_run_equals_reference() -> None:
    rng = np.random.default_rng(2)
    for t in (1, 2, 5, 40):
        lp = log_softmax(rng.normal(size=(t, TINY.size)) * 3)
        pb, pnb = rng.normal(-5, 2, 6), rng.normal(-5, 2, 6)
        pnb[0] = -np.inf
        last = np.array([1, 1, 2, 3, 1, 2])
        got = stays.blank_run(pb, pnb, last, TINY.space, lp)
        want = reference_blank_run(pb, pnb, last, TINY.space, lp)
        assert all((g == w).all() for g, w in zip(got, want, strict=True))


def test_warm_up_compiles_everything_a_stream_needs(word_lm: KenLM, char_lm: KenLM) -> None:
    """After warm_up(), no stream compiles a kernel again (no first-request stall)."""
    entry = [
        *(getattr(kernels, n) for n in ("extend", "take", "add_boundary", "spell", "path")),
        kernels.common_ancestor,
        array_sum,
        stays._exponents,
        stays._apply,
    ]
    warm_up()
    before = [len(k.signatures) for k in entry]
    lp = log_softmax(np.random.default_rng(3).normal(size=(30, TINY.size)) * 3)
    for lm in (None, word_lm, char_lm):
        stream = BeamSearchDecoder(TINY, DecoderConfig(beam_width=4), lm, ["ab"]).start(HOT)
        stream.advance(lp[:10].astype(np.float32))
        stream.partial()
        stream.advance(lp[10:])
        stream.finalize()
    assert [len(k.signatures) for k in entry] == before


def test_a_kernel_without_a_writable_cache_still_compiles() -> None:
    namespace: dict = {}
    exec("def double(x):\n    return 2 * x\n", namespace)  # no source file: no cache place
    assert kernel(namespace["double"])(21) == 42
