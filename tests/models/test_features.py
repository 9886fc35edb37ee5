"""Features: shapes users rely on, streaming equals whole, gain evens out loudness."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.config import FeatureConfig
from models.features import StreamingFeaturizer, featurize, num_frames

CFG = FeatureConfig()


def speechlike(seconds: float, level: float, seed: int = 0) -> np.ndarray:
    """Harmonic bursts with pauses: something with a speech-like envelope."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * CFG.sample_rate)) / CFG.sample_rate
    f0 = 120 + 30 * np.sin(2 * np.pi * 0.7 * t)
    voiced = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / CFG.sample_rate) / k for k in range(1, 8))
    envelope = (np.sin(2 * np.pi * 2.5 * t) > -0.3).astype(float)
    x = voiced * envelope + 0.01 * rng.standard_normal(len(t))
    return (level * x / np.max(np.abs(x))).astype(np.float32)


def test_shape_is_161_bins_at_100_frames_per_second() -> None:
    feats = featurize(np.zeros(16000, np.float32), CFG)
    assert CFG.n_bins == 161
    assert feats.shape == (num_frames(16000, CFG), 161) == (99, 161)
    assert featurize(np.zeros(100, np.float32), CFG).shape == (0, 161)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 2000), min_size=1, max_size=30), st.booleans())
def test_streaming_equals_whole_for_any_chunking(sizes: list[int], gain: bool) -> None:
    cfg = FeatureConfig(adaptive_gain=gain)
    audio = speechlike(sum(sizes) / cfg.sample_rate + 0.01, 0.3)[: sum(sizes)]
    fz, parts, i = StreamingFeaturizer(cfg), [], 0
    for n in sizes:
        parts.append(fz.push(audio[i : i + n]))
        i += n
    whole = featurize(audio, cfg)
    np.testing.assert_allclose(np.concatenate(parts), whole, atol=1e-4)


def test_adaptive_gain_makes_quiet_and_loud_alike() -> None:
    loud, quiet = speechlike(3.0, 0.9), speechlike(3.0, 0.009)  # 40 dB apart

    def voiced_mean(audio: np.ndarray, cfg: FeatureConfig) -> float:
        feats = featurize(audio, cfg)
        energy = featurize(audio, FeatureConfig(adaptive_gain=False)).mean(axis=1)
        return float(feats[energy > np.median(energy)].mean())  # speech frames, not pauses

    off = FeatureConfig(adaptive_gain=False)
    raw_gap = voiced_mean(loud, off) - voiced_mean(quiet, off)
    gap = voiced_mean(loud, CFG) - voiced_mean(quiet, CFG)
    assert raw_gap > 8.0  # 40 dB is ~9.2 in natural-log power
    assert abs(gap) < 0.5


@pytest.mark.parametrize("bad", [np.zeros((2, 100), np.float32), np.zeros(100, np.int16)])
def test_rejects_non_mono_or_integer_audio(bad: np.ndarray) -> None:
    with pytest.raises(ValueError, match="mono|float"):
        featurize(bad, CFG)
