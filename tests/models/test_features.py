"""Features: shapes users rely on, streaming equals whole, gain evens out loudness."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from models.config import FeatureConfig
from models.features import StreamingFeaturizer, bin_positions, featurize, num_frames

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
    ungated = FeatureConfig(onset_gate=False)
    feats = featurize(np.zeros(16000, np.float32), ungated)
    assert CFG.n_bins == 161
    assert feats.shape == (num_frames(16000, ungated), 161) == (99, 161)
    assert featurize(np.zeros(100, np.float32), ungated).shape == (0, 161)


def test_log_mel_has_80_bins_and_puts_a_tone_in_the_filter_centred_on_it() -> None:
    mel = FeatureConfig(n_mels=80, onset_gate=False, adaptive_gain=False)
    centres = np.asarray(bin_positions(mel)) * mel.sample_rate / 2
    assert mel.n_bins == 80 and np.all(np.diff(centres) > 0)
    t = np.arange(16000) / mel.sample_rate
    for hz in (300.0, 1000.0, 4000.0):
        feats = featurize((0.3 * np.sin(2 * np.pi * hz * t)).astype(np.float32), mel)
        assert feats.shape == (99, 80)
        assert int(np.argmax(feats.mean(axis=0))) == int(np.argmin(abs(centres - hz)))


def test_n_mels_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="n_mels"):
        FeatureConfig(n_mels=400)


def with_lead(audio: np.ndarray, silence_s: float, noise_db: float, seed: int = 1) -> np.ndarray:
    """`audio` after `silence_s` of digital silence and then as long of faint noise."""
    n = int(silence_s * CFG.sample_rate)
    noise = np.random.default_rng(seed).standard_normal(n) * 10 ** (noise_db / 20)
    return np.concatenate([np.zeros(n), noise, audio]).astype(np.float32)


def test_the_onset_gate_drops_leading_silence_and_noise_and_counts_it() -> None:
    speech = speechlike(1.0, 0.3)
    assert featurize(np.zeros(48000, np.float32), CFG).shape == (0, 161)
    assert featurize(with_lead(np.zeros(0), 1.0, -54), CFG).shape == (0, 161)
    fz = StreamingFeaturizer(CFG)
    feats = fz.push(with_lead(speech, 1.5, -54))
    assert 2.7 <= fz.skipped_s <= 3.0  # all of the lead but a fifth of a second of pre-roll
    assert len(feats) == num_frames(len(speech), CFG) + round((3.0 - fz.skipped_s) * 100)
    # the same frames as the speech alone, up to the level tracker's start (< 1 dB)
    np.testing.assert_allclose(feats[-50:], featurize(speech, CFG)[-50:], atol=0.2)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(1, 2000), min_size=1, max_size=30),
    st.booleans(),
    st.booleans(),
    st.sampled_from([0.0, 0.1, 0.6]),
    st.sampled_from([0, 80]),
)
def test_streaming_equals_whole_for_any_chunking(
    sizes: list[int], gain: bool, lift: bool, lead_s: float, n_mels: int
) -> None:
    cfg = FeatureConfig(adaptive_gain=gain, cepstral_lifter=48 if lift else 0, n_mels=n_mels)
    audio = with_lead(speechlike(sum(sizes) / cfg.sample_rate + 0.01, 0.3), lead_s, -54)
    audio = audio[: sum(sizes)]
    fz, parts, i = StreamingFeaturizer(cfg), [], 0
    gated = StreamingFeaturizer(dataclasses.replace(cfg, onset_gate=False))
    for n in sizes:
        # what the server asks before it featurizes: frames that n more samples complete
        assert gated.frames_after(n) == len(gated.push(audio[i : i + n]))
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


def vowel(f0: float, seconds: float = 0.5) -> np.ndarray:
    """A pulse train at pitch `f0` through two fixed formant resonances (an 'ah')."""
    sr = CFG.sample_rate
    x = np.zeros(int(seconds * sr))
    x[:: int(round(sr / f0))] = 1.0
    for freq, bw in ((700.0, 110.0), (1220.0, 120.0)):  # two-pole resonators
        r, theta = np.exp(-np.pi * bw / sr), 2 * np.pi * freq / sr
        y = np.zeros_like(x)
        for n in range(len(x)):
            y[n] = x[n] + 2 * r * np.cos(theta) * y[n - 1] - r * r * y[n - 2]
        x = y
    return (0.3 * x / np.max(np.abs(x))).astype(np.float32)


def test_cepstral_lifter_makes_a_low_and_a_high_voice_alike() -> None:
    """The same vowel from a low (110 Hz) and a high (220 Hz) voice: the liftered envelopes
    agree far better than the raw spectra, and both keep the first formant's peak."""
    low, high = vowel(110.0), vowel(220.0)
    lifted = FeatureConfig(cepstral_lifter=48)

    def profile(audio: np.ndarray, cfg: FeatureConfig) -> np.ndarray:
        f = featurize(audio, cfg)[10:-10].mean(axis=0)
        return f - f.mean()

    raw_gap = np.abs(profile(low, CFG) - profile(high, CFG))[:80].mean()
    lifted_gap = np.abs(profile(low, lifted) - profile(high, lifted))[:80].mean()
    assert lifted_gap < raw_gap / 2
    for audio in (low, high):
        peak_hz = np.argmax(profile(audio, lifted)[:40]) * CFG.sample_rate / CFG.window
        assert 550 <= peak_hz <= 850


def test_cepstral_lifter_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="cepstral_lifter"):
        FeatureConfig(cepstral_lifter=200)
