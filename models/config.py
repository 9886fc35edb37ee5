"""Every architecture and feature parameter of a harken acoustic model, in frozen dataclasses.

A bundle's `config.json` is exactly `ModelConfig.to_dict()`; nothing about the network lives
anywhere else, so a bundle fully describes how to rebuild and feed its model.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

# The English output alphabet (DS2 §3.1). Output index 0 is the CTC blank, index i + 1 is
# ALPHABET[i]; the decoder reads the alphabet from the bundle, never from here.
ALPHABET: tuple[str, ...] = (" ", "'", *"abcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True)
class FeatureConfig:
    sample_rate: int = 16000  # Hz; every input is resampled to this before featurising
    window_ms: float = 20.0  # analysis window (DS2 §3.1: 20 ms)
    hop_ms: float = 10.0  # frame step (10 ms)
    eps: float = 1e-10  # floor inside the log
    adaptive_gain: bool = True  # causal level normalisation so quiet and loud speech match
    gain_time_constant_s: float = 1.0  # how fast the level tracker adapts
    gain_target_db: float = -20.0  # level the tracker steers every stream towards (dBFS)
    # Hold frames back until speech starts (models/onset.py): seconds of leading silence or
    # noise otherwise drive the recurrent state and the level tracker where training never did.
    onset_gate: bool = True
    # Cepstral liftering: keep only quefrencies below this many samples (0: off), so each
    # frame is the smooth spectral envelope without the voice's pitch harmonics. 48 at 16 kHz
    # removes every pitch under 333 Hz while keeping formant detail (~330 Hz resolution).
    cepstral_lifter: int = 0
    # Log-mel filterbank channels instead of the linear bins (0: linear, window // 2 + 1 bins).
    # DS2 §3.6: 80 mel bins make the first layer half as wide as 161 linear ones and spend the
    # resolution where speech differs; above ~1 kHz a voice's harmonics blur into its formants.
    n_mels: int = 0

    def __post_init__(self) -> None:
        _check(
            0 <= self.cepstral_lifter <= self.window // 2,
            f"cepstral_lifter must be 0 (off) to {self.window // 2} (half the window)",
        )
        _check(
            self.n_mels == 0 or 8 <= self.n_mels <= self.window // 2 + 1,
            f"n_mels must be 0 (linear bins) or 8 to {self.window // 2 + 1}",
        )

    @property
    def window(self) -> int:
        """Samples per analysis window."""
        return int(round(self.sample_rate * self.window_ms / 1000))

    @property
    def hop(self) -> int:
        """Samples per frame step."""
        return int(round(self.sample_rate * self.hop_ms / 1000))

    @property
    def n_fft_bins(self) -> int:
        """Linear spectrum bins: window // 2 + 1 (161 at 16 kHz and 20 ms)."""
        return self.window // 2 + 1

    @property
    def n_bins(self) -> int:
        """Feature bins the model reads: n_mels, or the linear bins when n_mels is 0."""
        return self.n_mels or self.n_fft_bins


# ModelConfig fields that only inference reads: training neither sets nor compares them.
INFERENCE_ONLY = ("warp_factors", "warp_decide_frames", "warp_merge")
WarpMerge = Literal["choose", "mean"]
WARP_MERGES: tuple[WarpMerge, ...] = ("choose", "mean")


@dataclass(frozen=True)
class ModelConfig:
    features: FeatureConfig = field(default_factory=FeatureConfig)
    alphabet: tuple[str, ...] = ALPHABET  # output symbols, blank excluded (blank is index 0)
    conv_type: Literal["2d", "1d"] = "2d"  # over frequency and time (DS2 Table 4) or time only
    conv_layers: int = 2  # 1 to 3
    conv_channels: int = 32  # channels of each 2D conv, or width of each 1D conv
    conv_time_kernel: int = 11  # context in frames, centred; the right half is look-ahead
    conv_freq_kernel: int = 41  # 2D only: kernel height over frequency (first layer)
    conv_freq_stride: int = 2  # 2D only: frequency stride of each layer
    time_stride: int = 2  # total stride in time, applied by the first conv layer
    rnn_type: Literal["gru", "rnn"] = "gru"  # DS2 §3.4
    rnn_layers: int = 3  # unidirectional recurrent layers
    rnn_hidden: int = 512  # width of each recurrent layer
    row_conv_tau: int = 10  # future output steps the row convolution sees (DS2 §3.7)
    # The top N recurrent layers add their input to their output scaled per unit by a learnt
    # gain (ReZero): at gain zero such a layer passes its input through, so a trained network
    # could grow deeper as the same function (deepening was tried and not adopted, its code is
    # at commit 13cc3b3: experiments/deep.md).
    rnn_residual_layers: int = 0
    clip: float = 20.0  # clipped ReLU ceiling: min(max(x, 0), clip)
    # Speaker adaptation at inference (models/warp.py; training ignores it): each stream is
    # run on these frequency-warp factors of its input, merged by warp_merge; () is off.
    warp_factors: tuple[float, ...] = ()
    warp_decide_frames: int = 100  # "choose": output frames after which the warp is fixed
    # "choose": keep the most confident copy (one network step per chunk once decided);
    # "mean": average every copy's probabilities for the whole stream (an ensemble over warped
    # inputs: hears better, and costs the factors' count in network steps to the end)
    warp_merge: WarpMerge = "choose"

    def __post_init__(self) -> None:
        _check(1 <= self.conv_layers <= 3, "conv_layers must be 1, 2 or 3")
        _check(self.conv_type in ("2d", "1d"), "conv_type must be '2d' or '1d'")
        _check(self.rnn_type in ("gru", "rnn"), "rnn_type must be 'gru' or 'rnn'")
        _check(self.conv_time_kernel % 2 == 1, "conv_time_kernel must be odd (centred context)")
        _check(self.time_stride >= 1 and self.rnn_layers >= 1, "time_stride and rnn_layers >= 1")
        _check(self.row_conv_tau >= 0, "row_conv_tau must be >= 0")
        _check(
            0 <= self.rnn_residual_layers < self.rnn_layers,
            "rnn_residual_layers must be 0 to rnn_layers - 1 (the first layer's input is the "
            "convolutions', of another width)",
        )
        _check(min(self.rnn_hidden, self.conv_channels) >= 1, "rnn_hidden and conv_channels >= 1")
        _check(
            self.conv_time_kernel >= 2 * self.time_stride - 1,
            "conv_time_kernel must be >= 2 * time_stride - 1 so streaming buffers hold its context",
        )
        _check(len(set(self.alphabet)) == len(self.alphabet), "alphabet has duplicate symbols")
        _check(
            all(0.5 <= a <= 2.0 for a in self.warp_factors)
            and len(set(self.warp_factors)) == len(self.warp_factors),
            "warp_factors must be distinct numbers from 0.5 to 2.0 (1.0: unwarped)",
        )
        _check(self.warp_decide_frames >= 1, "warp_decide_frames must be >= 1")
        _check(self.warp_merge in WARP_MERGES, f"warp_merge must be one of {WARP_MERGES}")

    @property
    def vocab_size(self) -> int:
        """Outputs of the softmax: the alphabet plus the blank."""
        return len(self.alphabet) + 1

    @property
    def blank(self) -> int:
        return 0

    @property
    def frame_seconds(self) -> float:
        """Seconds per output frame (hop times time stride)."""
        return self.features.hop_ms / 1000 * self.time_stride

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["alphabet"] = list(self.alphabet)
        d["warp_factors"] = list(self.warp_factors)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ModelConfig:
        """Rebuild from `to_dict()` output; unknown keys are an error, not silently ignored."""
        d = dict(d)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        _check(not unknown, f"unknown model config keys: {sorted(unknown)}")
        feats = d.pop("features", {})
        fknown = {f.name for f in dataclasses.fields(FeatureConfig)}
        _check(not (set(feats) - fknown), f"unknown feature keys: {sorted(set(feats) - fknown)}")
        for key in ("alphabet", "warp_factors"):
            if key in d:
                d[key] = tuple(d[key])
        return cls(features=FeatureConfig(**feats), **d)


def parse_bool(raw: object) -> bool:
    """true/false, yes/no, on/off, 1/0 from a flag or environment variable.

    Plain bool() would take "false" as True; this refuses anything else with a reason.
    """
    text = str(raw).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {raw!r}")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)
