"""On-the-fly augmentation: speed, reverberation, additive noise and gain on the audio, then
optionally its band narrowed (low-pass, telephone channel, 8-bit); vocal-tract-length warping
and SpecAugment masks on the features.

Synthetic voices are clean and identical on every render; a model trained on them alone
learns the engines, not speech. The natural-sounding training voices are mostly male (pico's
two women are the exception), so a frequency warp (Jaitly & Hinton's VTLP) that moves
formants and harmonics up by up to a quarter stands in for the speakers the engines lack; the
`formant` preset also moves each formant region by its own factor, a vowel space that no one
factor gives.
Real recordings are often band-limited (11,025 Hz files, some 8-bit; phones at 8 kHz through
G.711) where the synthetic voices are 16 kHz wideband: the band effects make wideband audio
sound like them, so the network does not learn "wideband = one kind of speech".
Each example is perturbed afresh every epoch, in data-loader worker processes (seeds/000 §2:
features are computed next to the trainer, not stored), from a generator seeded by (seed,
epoch, index) so a resumed run sees exactly the same audio.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import soxr

from models.config import FeatureConfig
from models.features import bin_positions
from models.warp import piecewise_warp_matrix, warp_frequencies

F32 = npt.NDArray[np.float32]
SAMPLE_RATE = 16000
BabbleSource = Callable[[np.random.Generator], F32]  # returns another utterance's audio


@dataclass(frozen=True)
class AugmentConfig:
    p_speed: float = 0.5  # probability of speed perturbation
    speed: tuple[float, float] = (0.9, 1.1)  # tempo factor range (>1 is faster)
    p_reverb: float = 0.3  # probability of a synthetic room
    rt60_s: tuple[float, float] = (0.15, 0.7)  # time for the room's echo to decay by 60 dB
    p_noise: float = 0.6  # probability of additive noise
    snr_db: tuple[float, float] = (5.0, 30.0)  # signal-to-noise ratio range
    p_babble: float = 0.3  # share of noisy examples whose noise is babble (other utterances)
    p_gain: float = 0.5  # probability of a level change
    gain_db: tuple[float, float] = (-12.0, 6.0)  # level change range
    p_lowpass: float = 0.0  # probability of a band-limited recording (a random low-pass)
    lowpass_hz: tuple[float, float] = (3400.0, 7000.0)  # its cut-off range
    p_telephone: float = 0.0  # probability of the telephone channel (300-3400 Hz, mu-law)
    p_8bit: float = 0.0  # probability of linear 8-bit quantisation
    p_warp: float = 0.0  # probability of a vocal-tract-length (frequency) warp
    warp: tuple[float, float] = (0.85, 1.25)  # warp factor range (>1 moves formants up)
    p_formant: float = 0.0  # probability of a per-region warp (each formant region its own)
    formant_warp: tuple[float, float] = (0.85, 1.18)  # each knot's factor range
    p_colour: float = 0.0  # probability of a random smooth equaliser curve on the spectrum
    colour_db: float = 4.0  # standard deviation of each of its cosine terms, in dB
    freq_masks: int = 0  # SpecAugment: frequency bands masked per utterance
    # widest masked band, in linear-spectrogram bins (of 161); mel features mask the same share
    freq_mask_bins: int = 20
    time_masks: int = 0  # SpecAugment: time spans masked per utterance
    time_mask_frames: int = 30  # longest masked span, in frames
    time_mask_share: float = 0.15  # masked spans cover at most this share of the frames

    def __post_init__(self) -> None:
        for name in (
            "p_speed",
            "p_reverb",
            "p_noise",
            "p_babble",
            "p_gain",
            "p_warp",
            "p_formant",
            "p_colour",
            "p_lowpass",
            "p_telephone",
            "p_8bit",
        ):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"AugmentConfig.{name} must be a probability in [0, 1]")
        for name in ("speed", "rt60_s", "snr_db", "gain_db", "warp", "formant_warp", "lowpass_hz"):
            low, high = getattr(self, name)
            if low > high:
                raise ValueError(f"AugmentConfig.{name} must be (low, high) with low <= high")
        if min(self.speed[0], self.rt60_s[0], self.warp[0], self.formant_warp[0]) <= 0:
            raise ValueError("AugmentConfig.speed, rt60_s, warp and formant_warp must be positive")
        if not 0 < self.lowpass_hz[0] <= self.lowpass_hz[1] <= SAMPLE_RATE / 2:
            raise ValueError(
                f"AugmentConfig.lowpass_hz must lie in (0, {SAMPLE_RATE // 2}] Hz, "
                f"got {self.lowpass_hz}"
            )
        if self.colour_db < 0:
            raise ValueError("AugmentConfig.colour_db must be >= 0")
        if min(self.freq_masks, self.freq_mask_bins, self.time_masks, self.time_mask_frames) < 0:
            raise ValueError("AugmentConfig mask counts and sizes must be >= 0")
        if not 0.0 <= self.time_mask_share <= 1.0:
            raise ValueError("AugmentConfig.time_mask_share must be in [0, 1]")

    def describe(self) -> str:
        """The perturbations switched on, in a line (for a model's provenance)."""
        parts = [
            (self.p_speed, f"speed {self.speed[0]}-{self.speed[1]}"),
            (self.p_reverb, f"reverberation RT60 {self.rt60_s[0]}-{self.rt60_s[1]} s"),
            (self.p_noise, f"noise {self.snr_db[0]:g}-{self.snr_db[1]:g} dB SNR"),
            (self.p_gain, f"gain {self.gain_db[0]:g} to {self.gain_db[1]:g} dB"),
            (self.p_lowpass, f"low-pass {self.lowpass_hz[0]:g}-{self.lowpass_hz[1]:g} Hz"),
            (self.p_telephone, "telephone 300-3400 Hz mu-law"),
            (self.p_8bit, "8-bit"),
            (self.p_warp, f"frequency warp {self.warp[0]}-{self.warp[1]}"),
            (self.p_formant, f"per-region warp {self.formant_warp[0]}-{self.formant_warp[1]}"),
            (self.p_colour, f"random equaliser {self.colour_db:g} dB"),
        ]
        out = [f"{text} (p {p:g})" for p, text in parts if p > 0]
        if self.freq_masks or self.time_masks:
            out.append(
                f"SpecAugment {self.freq_masks} x <= {self.freq_mask_bins} bins, "
                f"{self.time_masks} x <= {self.time_mask_frames} frames"
            )
        return "; ".join(out) or "none"


# What training uses: the audio perturbations plus warping and masking on the features.
TRAINING_AUGMENT = AugmentConfig(p_warp=0.8, p_colour=0.5, freq_masks=2, time_masks=2)
# For a late stage aimed at clean speech: the perturbations that stand in for new voices
# (speed, warp, colour, gain, masks) as before, noise and rooms a quarter as often and never
# below 10 dB, so a small network spends less of itself on conditions the voices lack.
LIGHT_AUGMENT = replace(TRAINING_AUGMENT, p_noise=0.15, p_reverb=0.075, snr_db=(10.0, 30.0))
# The light stage plus, on half the utterances, a warp that moves each formant region by its
# own factor: a new vowel space per utterance, which one global factor cannot give
# (experiments/formant.md).
FORMANT_AUGMENT = replace(LIGHT_AUGMENT, p_formant=0.5)
AUGMENT_PRESETS = {"full": TRAINING_AUGMENT, "light": LIGHT_AUGMENT, "formant": FORMANT_AUGMENT}


def augment(
    audio: F32, cfg: AugmentConfig, rng: np.random.Generator, babble: BabbleSource | None = None
) -> F32:
    """Perturb one utterance (float32, 16 kHz); length changes only by the speed factor."""
    if rng.random() < cfg.p_speed:
        audio = change_speed(audio, rng.uniform(*cfg.speed))
    if rng.random() < cfg.p_reverb:
        audio = reverberate(audio, rng.uniform(*cfg.rt60_s), rng)
    if rng.random() < cfg.p_noise:
        use_babble = babble is not None and rng.random() < cfg.p_babble
        noise = babble_noise(len(audio), babble, rng) if babble and use_babble else None
        if noise is None:
            noise = coloured_noise(len(audio), rng.uniform(0.0, 2.0), rng)
        audio = add_noise(audio, noise, rng.uniform(*cfg.snr_db))
    if rng.random() < cfg.p_gain:
        audio = audio * np.float32(10 ** (rng.uniform(*cfg.gain_db) / 20))
    audio = np.clip(audio, -1.0, 1.0).astype(np.float32)
    # The band effects come last, as the recorder or the phone hears the room and the noise.
    # A probability of 0 draws nothing: the generator then feeds augment_features exactly
    # what it did before these existed, so earlier recipes see the same examples.
    if cfg.p_lowpass > 0 and rng.random() < cfg.p_lowpass:
        audio = lowpass(audio, rng.uniform(*cfg.lowpass_hz))
    if cfg.p_telephone > 0 and rng.random() < cfg.p_telephone:
        audio = telephone(audio)
    if cfg.p_8bit > 0 and rng.random() < cfg.p_8bit:
        audio = quantise_8bit(audio)
    return np.clip(audio, -1.0, 1.0).astype(np.float32)


def augment_features(
    logspec: F32, cfg: AugmentConfig, rng: np.random.Generator, features: FeatureConfig
) -> F32:
    """Warp and mask [T, F] log features of `features`' kind (a new array; the input is kept)."""
    out = np.array(logspec, dtype=np.float32, copy=True)
    if out.size == 0:
        return out
    if rng.random() < cfg.p_warp:
        out = warp_frequencies(out, rng.uniform(*cfg.warp), features)
    if rng.random() < cfg.p_formant:
        out = out @ formant_matrix(cfg.formant_warp, rng, features)
    if rng.random() < cfg.p_colour:
        out += colour_curve(out.shape[1], cfg.colour_db, rng)
    fill = out.mean(axis=0)  # per-bin mean: a masked cell reads as average, not as silence
    n_frames, n_bins = out.shape
    widest = min(round(cfg.freq_mask_bins * n_bins / features.n_fft_bins), n_bins)
    for _ in range(cfg.freq_masks):
        width = int(rng.integers(0, widest + 1))
        start = int(rng.integers(0, n_bins - width + 1))
        out[:, start : start + width] = fill[start : start + width]
    budget = int(cfg.time_mask_share * n_frames)
    for _ in range(cfg.time_masks):
        width = int(rng.integers(0, min(cfg.time_mask_frames, budget) + 1))
        budget -= width
        start = int(rng.integers(0, n_frames - width + 1))
        out[start : start + width] = fill
    return out


# Where the per-region warp's knots sit, in Hz: around the first three formants' ranges, so
# that F1, F2 and F3 of one vowel can move by different amounts; 0 and Nyquist stay put.
FORMANT_KNOTS_HZ = (300.0, 700.0, 1200.0, 1800.0, 2600.0, 3500.0, 5000.0)


def formant_matrix(
    factors: tuple[float, float], rng: np.random.Generator, features: FeatureConfig
) -> F32:
    """A random per-region warp's [F, F] matrix: each knot moves by its own log-uniform factor
    in `factors`, kept in order (a knot never passes the next one)."""
    nyquist = features.sample_rate / 2
    knots = np.array(FORMANT_KNOTS_HZ) / nyquist
    moved = knots * np.exp(rng.uniform(np.log(factors[0]), np.log(factors[1]), len(knots)))
    moved = np.minimum(np.maximum.accumulate(moved), 0.98)
    moved = moved + 1e-4 * np.arange(len(moved))  # strictly increasing for the interpolation
    return piecewise_warp_matrix(bin_positions(features), [0.0, *knots, 1.0], [0.0, *moved, 1.0])


def colour_curve(n_bins: int, std_db: float, rng: np.random.Generator) -> F32:
    """A smooth random equaliser (four cosines over the band) in natural-log power: engines
    and microphones differ in timbre, which the model should not key on."""
    k = np.arange(1, 5)[:, None]
    amplitudes = rng.normal(0.0, std_db, size=(4, 1)) * (np.log(10.0) / 10.0)
    curve = (amplitudes * np.cos(np.pi * k * np.arange(n_bins) / (n_bins - 1))).sum(axis=0)
    return np.asarray(curve, dtype=np.float32)


def change_speed(audio: F32, factor: float) -> F32:
    """Play `factor` times faster (pitch moves too, as in Kaldi's speed perturbation)."""
    out = soxr.resample(audio, SAMPLE_RATE, SAMPLE_RATE / factor, quality="HQ")
    return np.asarray(out, dtype=np.float32)


def reverberate(audio: F32, rt60_s: float, rng: np.random.Generator) -> F32:
    """Convolve with exponentially decaying noise (a diffuse room) plus the direct path."""
    n = max(1, int(rt60_s * SAMPLE_RATE))
    t = np.arange(n) / SAMPLE_RATE
    ir = rng.standard_normal(n) * np.exp(-6.9 * t / rt60_s)  # e^-6.9 = -60 dB
    ir[0] = 0.0
    ir *= 0.5 / max(float(np.sqrt(np.sum(ir**2))), 1e-9)  # reverberant energy below direct
    ir[0] = 1.0
    size = 1 << int(np.ceil(np.log2(len(audio) + n)))
    wet = np.fft.irfft(np.fft.rfft(audio, size) * np.fft.rfft(ir, size), size)[: len(audio)]
    return _match_rms(wet, audio)


def coloured_noise(n: int, exponent: float, rng: np.random.Generator) -> F32:
    """Noise with power spectrum 1/f^exponent: 0 white, 1 pink, 2 brown; unit RMS."""
    spectrum = np.fft.rfft(rng.standard_normal(n))
    freqs = np.fft.rfftfreq(n)
    freqs[0] = freqs[1] if n > 1 else 1.0
    noise = np.fft.irfft(spectrum / freqs ** (exponent / 2), n)
    return (noise / max(float(np.std(noise)), 1e-9)).astype(np.float32)


def babble_noise(n: int, source: BabbleSource, rng: np.random.Generator) -> F32 | None:
    """Three to six other utterances summed at random offsets: crowd-like speech noise."""
    total = np.zeros(n, dtype=np.float32)
    for _ in range(int(rng.integers(3, 7))):
        other = source(rng)
        if other.size == 0:
            continue
        reps = int(np.ceil(n / other.size)) + 1
        shift = int(rng.integers(0, other.size))
        total += np.tile(other, reps)[shift : shift + n]
    rms = float(np.sqrt(np.mean(total**2))) if n else 0.0
    return None if rms < 1e-6 else total / np.float32(rms)


def add_noise(audio: F32, noise: F32, snr_db: float) -> F32:
    """Mix `noise` in at `snr_db` below the speech's RMS."""
    speech_rms = float(np.sqrt(np.mean(audio**2))) if audio.size else 0.0
    noise_rms = float(np.sqrt(np.mean(noise**2))) if noise.size else 0.0
    if speech_rms < 1e-9 or noise_rms < 1e-9:
        return audio
    scale = speech_rms / noise_rms / 10 ** (snr_db / 20)
    return (audio + noise * np.float32(scale)).astype(np.float32)


def lowpass(audio: F32, cutoff_hz: float) -> F32:
    """What a recording made at twice `cutoff_hz` (11,025 Hz files: 5.5 kHz) holds once
    played at 16 kHz: resampled down to that rate and back, so nothing above the cut-off
    survives (soxr's steep anti-alias filter) and the band below is kept."""
    if cutoff_hz >= SAMPLE_RATE / 2:
        return audio.astype(np.float32, copy=True)
    low = soxr.resample(audio, SAMPLE_RATE, 2 * cutoff_hz, quality="HQ")
    back = soxr.resample(low, 2 * cutoff_hz, SAMPLE_RATE, quality="HQ")
    return _fit_length(np.asarray(back, dtype=np.float32), len(audio))


TELEPHONE_RATE = 8000
MU = 255.0  # G.711 mu-law


def telephone(audio: F32) -> F32:
    """The telephone channel callers send: 8 kHz, band-passed to 300-3400 Hz (edges falling
    to nothing by 250 and 3600 Hz, as G.712's mask), 8-bit mu-law (G.711), back to 16 kHz."""
    narrow = np.asarray(
        soxr.resample(audio, SAMPLE_RATE, TELEPHONE_RATE, quality="HQ"), dtype=np.float64
    )
    n = len(narrow)
    size = 1 << int(np.ceil(np.log2(n + TELEPHONE_RATE // 8)))  # room for the filter's tails
    freqs = np.fft.rfftfreq(size, 1 / TELEPHONE_RATE)
    rise = np.clip((freqs - 250.0) / 50.0, 0.0, 1.0)  # 250 -> 300 Hz
    fall = np.clip((3600.0 - freqs) / 200.0, 0.0, 1.0)  # 3400 -> 3600 Hz
    gain = np.sin(np.pi / 2 * rise) ** 2 * np.sin(np.pi / 2 * fall) ** 2  # raised cosines
    band = np.fft.irfft(np.fft.rfft(narrow, size) * gain, size)[:n]
    coded = mu_law(np.clip(band, -1.0, 1.0))
    back = soxr.resample(coded.astype(np.float32), TELEPHONE_RATE, SAMPLE_RATE, quality="HQ")
    return _fit_length(np.asarray(back, dtype=np.float32), len(audio))


def mu_law(x: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float64]:
    """Compress x in [-1, 1] by the mu-law curve (which G.711's segments approximate),
    quantise to 8 bits (255 values: G.711's 256 codes hold a zero of each sign), expand: fine
    steps for quiet samples, coarse for loud ones."""
    y = np.sign(x) * np.log1p(MU * np.abs(x)) / np.log1p(MU)
    q = np.round(y * 127.0) / 127.0
    return np.asarray(np.sign(q) * np.expm1(np.abs(q) * np.log1p(MU)) / MU, dtype=np.float64)


def quantise_8bit(audio: F32) -> F32:
    """Linear 8-bit samples (256 levels, as old samplers, games and 8-bit WAVs stored them):
    scaled so the peak is at full scale, as such recordings were, rounded, scaled back."""
    peak = float(np.max(np.abs(audio))) if audio.size else 0.0
    if peak < 1e-9:
        return audio.astype(np.float32, copy=True)
    levels = np.clip(np.round(audio.astype(np.float64) * (128.0 / peak)), -128, 127)
    return np.asarray(levels * (peak / 128.0), dtype=np.float32)


def _fit_length(x: F32, n: int) -> F32:
    """`x` cut or zero-padded to n samples (a round trip through another rate may be off by
    one)."""
    if len(x) >= n:
        return x[:n]
    out = np.zeros(n, dtype=np.float32)
    out[: len(x)] = x
    return out


def _match_rms(x: npt.NDArray[np.floating[Any]], reference: F32) -> F32:
    ref = float(np.sqrt(np.mean(reference**2))) if reference.size else 0.0
    cur = float(np.sqrt(np.mean(x**2))) if x.size else 0.0
    return (x * (ref / cur if cur > 1e-9 else 1.0)).astype(np.float32)
