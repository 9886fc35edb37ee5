"""Audio features: log power spectrogram (DS2 §3.1) or log-mel filterbank (§3.6) with causal
adaptive gain.

`featurize` handles a whole signal; `StreamingFeaturizer` consumes samples in chunks of any
size and yields exactly the same frames, so a server stream and an offline file agree.
Frames are complete windows only: frame t covers samples [t * hop, t * hop + window), counted
from the first frame the onset gate (`models/onset.py`) lets through.
Per-bin mean/variance normalisation lives in the model (its statistics travel with the
weights in the bundle), so features here are raw log power.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from models.config import FeatureConfig
from models.onset import OnsetGate

F32 = npt.NDArray[np.float32]

_SILENCE_DB = -60.0  # frames quieter than this do not move the level tracker
_PAUSE_DB = 20.0  # frames this far below the tracked level are pauses, not speech
_DB_TO_LOG = math.log(10.0) / 10.0  # dB of power -> natural-log power


@functools.cache
def _hann(window: int) -> F32:
    """Periodic Hann window, built once per size (every chunk of every stream uses it)."""
    w: F32 = np.hanning(window + 1)[:-1].astype(np.float32)
    w.setflags(write=False)
    return w


def _frames(audio: F32, cfg: FeatureConfig) -> F32:
    """Complete analysis windows of `audio` as a [T, window] strided view."""
    n = 0 if len(audio) < cfg.window else 1 + (len(audio) - cfg.window) // cfg.hop
    if n == 0:
        return np.zeros((0, cfg.window), np.float32)
    return np.lib.stride_tricks.as_strided(
        audio, shape=(n, cfg.window), strides=(audio.strides[0] * cfg.hop, audio.strides[0])
    )


def _log_power(frames: F32, cfg: FeatureConfig) -> tuple[F32, F32]:
    """Log power spectrum [T, F] and per-frame level in dBFS [T]."""
    spec = np.fft.rfft(frames * _hann(cfg.window), axis=-1)
    power = (spec.real**2 + spec.imag**2).astype(np.float32) / np.float32(cfg.window)
    level_db = 10.0 * np.log10(np.mean(frames.astype(np.float64) ** 2, axis=-1) + cfg.eps)
    logspec = np.log(power + np.float32(cfg.eps))
    if cfg.cepstral_lifter:
        logspec = lifter(logspec, cfg.window, cfg.cepstral_lifter)
    if cfg.n_mels:
        mel = np.exp(logspec) @ mel_filterbank(cfg.sample_rate, cfg.window, cfg.n_mels)
        logspec = np.log(mel + np.float32(cfg.eps)).astype(np.float32)
    return logspec, level_db.astype(np.float32)


def _hz_to_mel(hz: float) -> float:
    return float(2595.0 * np.log10(1.0 + hz / 700.0))


def _mel_to_hz(mel: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return np.asarray(700.0 * (10.0 ** (mel / 2595.0) - 1.0), np.float64)


def _mel_points(sample_rate: int, n_mels: int) -> npt.NDArray[np.float64]:
    """n_mels + 2 frequencies (Hz), equally spaced in mel from 0 to Nyquist: filter i rises
    from point i, peaks at i + 1 and falls to i + 2."""
    return _mel_to_hz(np.linspace(0.0, _hz_to_mel(sample_rate / 2.0), n_mels + 2))


@functools.cache
def mel_filterbank(sample_rate: int, window: int, n_mels: int) -> F32:
    """[window // 2 + 1, n_mels] triangular filters (HTK mel scale) over the power spectrum;
    built once per size. Each filter peaks at 1 and is at least one bin wide, so the narrow
    low filters never come out empty."""
    fft_hz = np.arange(window // 2 + 1) * sample_rate / window
    pts = _mel_points(sample_rate, n_mels)
    fb = np.zeros((len(fft_hz), n_mels), np.float64)
    for i in range(n_mels):
        lo, mid, hi = pts[i], pts[i + 1], pts[i + 2]
        rise = (fft_hz - lo) / (mid - lo)
        fall = (hi - fft_hz) / (hi - mid)
        fb[:, i] = np.clip(np.minimum(rise, fall), 0.0, None)
        if not fb[:, i].any():  # narrower than a bin: take the bin nearest its centre
            fb[int(np.argmin(np.abs(fft_hz - mid))), i] = 1.0
    out: F32 = fb.astype(np.float32)
    out.setflags(write=False)
    return out


def bin_positions(cfg: FeatureConfig) -> tuple[float, ...]:
    """Centre frequency of each feature bin as a share of Nyquist (0 to 1): what a frequency
    warp of the features (speaker adaptation, VTLP) moves."""
    if not cfg.n_mels:
        return tuple(np.linspace(0.0, 1.0, cfg.n_fft_bins).tolist())
    return tuple((_mel_points(cfg.sample_rate, cfg.n_mels)[1:-1] / (cfg.sample_rate / 2)).tolist())


@functools.cache
def _lifter_weights(window: int, cutoff: int) -> F32:
    """1 up to two thirds of `cutoff`, a cosine taper to 0 at `cutoff` (a hard cut would
    ripple across frequency), mirrored for the negative quefrencies; built once per size."""
    q = np.minimum(np.arange(window), window - np.arange(window)).astype(np.float64)
    start = 2 * cutoff / 3
    ramp = 0.5 * (1 + np.cos(np.pi * np.clip((q - start) / (cutoff - start), 0, 1)))
    out: F32 = ramp.astype(np.float32)
    out.setflags(write=False)
    return out


def lifter(logspec: F32, window: int, cutoff: int) -> F32:
    """The smooth envelope of each log spectrum [T, window // 2 + 1]: its real cepstrum
    with quefrencies from `cutoff` samples up removed.

    Why: pitch harmonics are the part of a spectrum that differs most between voices (a
    female voice's are twice as far apart) and says nothing about what was said; the
    envelope (formants) carries the words. A model fed envelopes generalises to unseen
    voices better than one that learnt its training voices' harmonics.
    """
    cep = np.fft.irfft(logspec, n=window, axis=-1)
    smooth = np.fft.rfft(cep * _lifter_weights(window, cutoff), axis=-1).real
    return smooth.astype(np.float32)


@dataclass
class GainState:
    """Causal level tracker: an exponential average of speech-frame levels in dB."""

    level_db: float | None = None


def apply_gain(logspec: F32, level_db: F32, state: GainState, cfg: FeatureConfig) -> F32:
    """Shift each frame so the tracked level sits at `cfg.gain_target_db` (in place).

    Only frames louder than -60 dBFS and within 20 dB of the current level update the
    tracker, so pauses do not drag the level down; the first such frame sets it directly,
    so a quiet speaker is corrected at once.
    """
    alpha = 1.0 - math.exp(-cfg.hop_ms / 1000.0 / cfg.gain_time_constant_s)
    offsets = np.empty(len(level_db), np.float32)
    level = state.level_db
    for t, e in enumerate(level_db.tolist()):
        if level is None and e > _SILENCE_DB:
            level = e
        elif level is not None and e > max(_SILENCE_DB, level - _PAUSE_DB):
            level += alpha * (e - level)
        offsets[t] = 0.0 if level is None else (level - cfg.gain_target_db) * _DB_TO_LOG
    state.level_db = level
    logspec -= offsets[:, None]
    return logspec


def _validate(audio: npt.NDArray[np.floating[Any]], cfg: FeatureConfig) -> F32:
    a = np.asarray(audio)
    if a.ndim != 1:
        raise ValueError(f"audio must be mono (1-D), got shape {a.shape}; mix channels first")
    if not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"audio must be float in [-1, 1], got {a.dtype}; divide PCM16 by 32768")
    return np.ascontiguousarray(a, dtype=np.float32)


def featurize(audio: npt.NDArray[np.floating[Any]], cfg: FeatureConfig) -> F32:
    """Log power spectrogram [T, n_bins] of mono float audio at `cfg.sample_rate` (with the
    onset gate on, T leaves out the leading silence: `StreamingFeaturizer` says how much)."""
    fz = StreamingFeaturizer(cfg)
    return fz.push(audio)


class StreamingFeaturizer:
    """Chunked `featurize`: push samples of any size, get the frames completed so far."""

    def __init__(self, cfg: FeatureConfig) -> None:
        self.cfg = cfg
        self._buf = np.zeros(0, np.float32)
        self._gain = GainState()
        self._gate = OnsetGate(cfg.hop_ms / 1000.0) if cfg.onset_gate else None
        self.frames_out = 0

    def push(self, samples: npt.NDArray[np.floating[Any]]) -> F32:
        """Append samples; return the [t, n_bins] frames that are now complete."""
        a = _validate(samples, self.cfg)
        self._buf = np.concatenate([self._buf, a]) if len(self._buf) else a.copy()
        frames = _frames(self._buf, self.cfg)
        n = len(frames)
        logspec, level = _log_power(frames, self.cfg)
        self._buf = self._buf[n * self.cfg.hop :].copy() if n else self._buf
        if self._gate is not None and not self._gate.is_open:
            logspec, level = self._gate.push(logspec, level)
            if self._gate.is_open and self._gain.level_db is None:
                self._gain.level_db = self._gate.onset_db  # not the noise before it
        if self.cfg.adaptive_gain:
            apply_gain(logspec, level, self._gain, self.cfg)
        self.frames_out += len(logspec)
        return logspec

    def frames_after(self, more_samples: int) -> int:
        """Frames that pushing `more_samples` more would complete (before the onset gate)."""
        return num_frames(len(self._buf) + more_samples, self.cfg)

    @property
    def skipped_s(self) -> float:
        """Seconds at the start that the onset gate dropped (0 once speech is heard early)."""
        return self._gate.skipped_s if self._gate is not None else 0.0


def num_frames(num_samples: int, cfg: FeatureConfig) -> int:
    """Frames that `featurize` yields for a signal of `num_samples` samples."""
    return 0 if num_samples < cfg.window else 1 + (num_samples - cfg.window) // cfg.hop
