"""A long stream keeps its decoder's memory bounded, and bounding it changes no result: the
prefix tree drops what no later frame can reach (a microphone left open for minutes once
grew it by about 1 GB in 6 minutes at the shipped 768-wide beam)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import decoder.beam
from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder
from decoder.hypothesis import Word
from decoder.loading import load_decoder
from models import DEFAULT_BUNDLE
from models.bundle import load_bundle

F64 = npt.NDArray[np.float64]


@pytest.fixture(scope="module")
def shipped() -> BeamSearchDecoder:
    config = load_bundle(Path(DEFAULT_BUNDLE)).config
    return load_decoder(
        Path(DEFAULT_BUNDLE), Alphabet.from_list(config.alphabet), config.frame_seconds
    )


def _log_probs(frames: int, vocab: int, seed: int = 0) -> F64:
    logits = np.random.default_rng(seed).normal(0.0, 3.0, (frames, vocab))
    logits[:, 0] += 3.0  # blank-heavy, as CTC outputs are
    out: F64 = logits - np.logaddexp.reduce(logits, axis=1, keepdims=True)
    return out


Final = list[tuple[str, float, float, float, tuple[Word, ...]]]
Partials = list[tuple[str, str, float]]


def _decode(decoder: BeamSearchDecoder, lp: F64, chunk: int) -> tuple[Final, Partials]:
    stream = decoder.start()
    partials: Partials = []
    for i in range(0, len(lp), chunk):
        stream.advance(lp[i : i + chunk])
        partial = stream.partial()
        partials.append((partial.text, partial.stable_text, partial.score))
    final = [(h.text, h.score, h.acoustic, h.lm, h.words) for h in stream.finalize()]
    return final, partials


def test_compacting_the_tree_changes_no_partial_or_final(
    shipped: BeamSearchDecoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    lp = _log_probs(1200, shipped.alphabet.size)
    monkeypatch.setattr(decoder.beam, "COMPACT_MIN_NODES", 1 << 40)  # never
    never = _decode(shipped, lp, 5)
    monkeypatch.setattr(decoder.beam, "COMPACT_MIN_NODES", 1500)  # every few frames
    assert _decode(shipped, lp, 5) == never
    assert _decode(shipped, lp, 7)[0] == never[0]  # and whatever the chunking


def test_a_long_stream_keeps_its_prefix_tree_small(shipped: BeamSearchDecoder) -> None:
    lp = _log_probs(6000, shipped.alphabet.size, seed=1)  # two minutes of frames
    stream, largest = shipped.start(), 0
    for i in range(0, len(lp), 5):
        stream.advance(lp[i : i + 5])
        largest = max(largest, stream.tree.size)
    assert stream.finalize()
    # about 3 million nodes (over 1 GB) without compaction
    assert largest < 200_000
