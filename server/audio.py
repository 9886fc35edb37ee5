"""Audio at the boundary: raw PCM frames and uploaded files to 16 kHz mono float32.

Every check here exists because a client got it wrong once: WAV files sent as raw frames,
odd byte counts, float frames full of NaN, stereo uploads, unknown containers.
"""

from __future__ import annotations

import io
import shutil
import subprocess

import numpy as np
import numpy.typing as npt
import soundfile
import soxr

F32 = npt.NDArray[np.float32]
SAMPLE_WIDTH = {"pcm_s16le": 2, "f32le": 4}
_CONTAINER_MAGIC = (b"RIFF", b"fLaC", b"OggS", b"ID3", b"\x1aE\xdf\xa3")


class AudioError(ValueError):
    """Audio the server cannot use; `code` is `bad_audio` or `unsupported_format`."""

    def __init__(self, message: str, code: str = "bad_audio") -> None:
        super().__init__(message)
        self.code = code


def decode_pcm(data: bytes, encoding: str) -> F32:
    """Raw little-endian PCM bytes -> float32 samples in [-1, 1]."""
    width = SAMPLE_WIDTH[encoding]
    if len(data) % width:
        raise AudioError(
            f"{encoding} frames must hold whole {width}-byte samples, got {len(data)} bytes"
        )
    if data[:4] in _CONTAINER_MAGIC:
        raise AudioError(
            f"this is an audio file, not raw {encoding}; strip the header or use the REST endpoint"
        )
    if encoding == "pcm_s16le":
        return np.frombuffer(data, "<i2").astype(np.float32) / np.float32(32768.0)
    samples = np.frombuffer(data, "<f4").astype(np.float32)
    if not np.all(np.isfinite(samples)) or (len(samples) and float(np.abs(samples).max()) > 4.0):
        raise AudioError(
            "f32le samples must be finite floats in [-1, 1]; is this really f32le audio?"
        )
    return samples


class Resampler:
    """Streaming resampler to `target` Hz; chunks of any size, output as if done at once."""

    def __init__(self, rate: int, target: int) -> None:
        self.rate, self.target = rate, target
        self._stream = (
            None if rate == target else soxr.ResampleStream(rate, target, 1, dtype="float32")
        )

    def push(self, samples: F32, last: bool = False) -> F32:
        if self._stream is None:
            return samples
        out = self._stream.resample_chunk(samples, last=last)
        return np.asarray(out, dtype=np.float32).reshape(-1)


def decode_file(data: bytes, target: int) -> F32:
    """An uploaded file -> mono float32 at `target` Hz.

    WAV, FLAC and OGG go through libsndfile; anything else through ffmpeg when it is
    installed, otherwise `AudioError(code="unsupported_format")`."""
    if not data:
        raise AudioError("the uploaded file is empty")
    try:
        audio, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (soundfile.LibsndfileError, RuntimeError, TypeError):
        audio, rate = _ffmpeg(data, target), target
    mono = np.ascontiguousarray(audio.mean(axis=1), dtype=np.float32)
    return mono if rate == target else np.asarray(soxr.resample(mono, rate, target), np.float32)


def _ffmpeg(data: bytes, target: int) -> npt.NDArray[np.float32]:
    binary = shutil.which("ffmpeg")
    if binary is None:
        raise AudioError(
            "the file is not WAV, FLAC or OGG, and ffmpeg (needed for MP3, M4A, WebM) is not installed",
            code="unsupported_format",
        )
    cmd = [binary, "-nostdin", "-loglevel", "error", "-i", "pipe:0", "-f", "f32le", "-ac", "1"]
    proc = subprocess.run(
        [*cmd, "-ar", str(target), "pipe:1"], input=data, capture_output=True, timeout=120
    )
    if proc.returncode != 0:
        reason = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["unknown error"]
        raise AudioError(
            f"the file is not audio that ffmpeg can decode: {reason[0]}", code="unsupported_format"
        )
    return np.frombuffer(proc.stdout, "<f4").astype(np.float32)[:, None]
