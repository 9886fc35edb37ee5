"""`stable` in partials on real speech (espeak-ng, the default bundle): it never takes a word
back, and it keeps up with the audio instead of waiting for the end."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from websockets.sync.client import connect

from models.bundle import load_bundle
from models.features import featurize
from models.warp import adapted_forward
from server.config import DEFAULT_BUNDLE, ServerConfig
from server.decoding import build_decoder
from tests.server.serving import F32, pcm16, running, speak

TEXT = (
    "the weather is nice today so we will go for a long walk by the river "
    "and then we will have lunch at the old mill"
)
CHUNK = 8  # output frames per decoder step: the server's 160 ms chunk


@pytest.fixture(scope="module")
def speech() -> F32:
    """TEXT read by espeak-ng, then half a second of silence."""
    return np.concatenate([speak(TEXT), np.zeros(8000, np.float32)])


@pytest.fixture(scope="module")
def log_probs(speech: F32) -> F32:
    """The default model's outputs [T, V] over `speech` (what streaming steps add up to)."""
    model = load_bundle(Path(DEFAULT_BUNDLE))
    feats = torch.from_numpy(featurize(speech, model.config.features))[None]
    lp, n = adapted_forward(model, feats, torch.tensor([feats.shape[1]]))
    return np.asarray(lp[0, : int(n[0])].numpy())


def test_stable_over_a_stream_never_retracts_and_covers_most_words_before_eos(
    speech: F32,
) -> None:
    with (
        running(
            ServerConfig(dtype="fp32", bundle=DEFAULT_BUNDLE, decoder_processes=False)
        ) as server,
        connect(f"{server.ws}/v1/stream") as ws,
    ):
        ws.send(json.dumps({"type": "config", "sample_rate": 16000}))
        audio = pcm16(speech)
        for i in range(0, len(audio), 3200):
            ws.send(audio[i : i + 3200])
        ws.send(json.dumps({"type": "eos"}))
        *partials, final = [json.loads(m) for m in ws]
    stables = [p["stable"] for p in partials]
    assert len(set(final["text"].split()) & set(TEXT.split())) >= 12, final["text"]
    for earlier, later in itertools.pairwise(stables):
        assert later.startswith(earlier), (earlier, later)
    assert all(final["text"].startswith(s) for s in stables)
    words = final["text"].split()
    assert len(stables[-1].split()) >= 0.6 * len(words), (stables[-1], words)


def test_each_word_is_stable_soon_after_it_is_spoken(log_probs: F32) -> None:
    decoder = build_decoder(Path(DEFAULT_BUNDLE), load_bundle(Path(DEFAULT_BUNDLE)).config)
    stream, stable_at = decoder.start(), []  # (seconds decoded, words stable)
    seconds = decoder.config.frame_seconds  # type: ignore[attr-defined]
    for lo in range(0, len(log_probs), CHUNK):
        stream.advance(log_probs[lo : lo + CHUNK])
        stable_at.append((min(lo + CHUNK, len(log_probs)) * seconds, stream.partial().stable_text))
    [best, *_] = stream.finalize()
    spoken_until = best.words[-1].end
    late = [
        (w.word, w.end)
        for i, w in enumerate(best.words)
        if w.end < spoken_until - 1.25
        and not any(len(s.split()) > i and t <= w.end + 1.25 for t, s in stable_at)
    ]
    assert not late, f"stable lagged more than 1.25 s behind {late}"


def test_decoding_in_chunks_still_equals_decoding_at_once(log_probs: F32) -> None:
    decoder = build_decoder(Path(DEFAULT_BUNDLE), load_bundle(Path(DEFAULT_BUNDLE)).config)
    whole = decoder.start()
    whole.advance(log_probs)
    rng = np.random.default_rng(0)
    cuts = sorted(rng.choice(len(log_probs), 12, replace=False).tolist())
    chunked = decoder.start()
    for lo, hi in itertools.pairwise([0, *cuts, len(log_probs)]):
        chunked.advance(log_probs[lo:hi])
        chunked.partial()
    assert chunked.finalize() == whole.finalize()
