"""Audio at the boundary: raw PCM frames and uploaded files to 16 kHz mono float32.

Every check here exists because a client got it wrong once: WAV files sent as raw frames,
odd byte counts, float frames full of NaN, stereo uploads, unknown containers.
"""

from __future__ import annotations

import io
import math
import shutil
import subprocess

import numpy as np
import numpy.typing as npt
import soundfile
import soxr

F32 = npt.NDArray[np.float32]
SAMPLE_WIDTH = {"pcm_s16le": 2, "f32le": 4}
# WAV, FLAC, Ogg, MP3 (an ID3v2.2-2.4 tag: 4 bytes, as data[:4] is compared), Matroska/WebM
_CONTAINER_MAGIC = (b"RIFF", b"fLaC", b"OggS", b"ID3\x02", b"ID3\x03", b"ID3\x04", b"\x1aE\xdf\xa3")
# Largest sample magnitude a file may hold: float files scaled to the int32 range still pass;
# from about 1e17 the power spectrum overflows float32 and the model sees NaN.
MAX_FILE_PEAK = 2.0**31
_READ_BLOCK = 1 << 20  # samples (all channels) libsndfile decodes at a time


class AudioError(ValueError):
    """Audio the server cannot use; `code` is `bad_audio`, `unsupported_format` or `too_long`."""

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


def decode_file(data: bytes, target: int, max_seconds: float = math.inf) -> F32:
    """An uploaded file -> mono float32 at `target` Hz.

    WAV, FLAC and OGG go through libsndfile; anything else through ffmpeg when it is
    installed, otherwise `AudioError(code="unsupported_format")`. Samples that are NaN,
    infinite or over `MAX_FILE_PEAK` (a misread header) are an `AudioError` too, and so is
    audio over `max_seconds` (`code="too_long"`), found while decoding: a few kB of FLAC, or a
    WAV whose header says 1 Hz, would otherwise decode or resample to gigabytes first."""
    if not data:
        raise AudioError("the uploaded file is empty")
    try:
        audio, rate = _libsndfile(data, max_seconds)
    except (soundfile.LibsndfileError, RuntimeError, TypeError):
        audio, rate = _ffmpeg(data, target, max_seconds), target
    if len(audio) > max_seconds * rate:
        raise AudioError(f"the file holds more than the {max_seconds:g} s allowed", "too_long")
    mono = np.ascontiguousarray(audio.mean(axis=1), dtype=np.float32)
    out = mono if rate == target else np.asarray(soxr.resample(mono, rate, target), np.float32)
    if not np.all(np.isfinite(out)) or (len(out) and float(np.abs(out).max()) > MAX_FILE_PEAK):
        raise AudioError(
            "the file holds samples that are NaN, infinite or over 2^31 in magnitude; "
            "is it really audio?"
        )
    return out


def _libsndfile(data: bytes, max_seconds: float) -> tuple[npt.NDArray[np.float32], int]:
    """[frames, channels] and the rate, read in blocks: a header may claim far more frames
    than the file holds (a FLAC header claiming 2**34 made one read ask for 64 GiB). Reading
    stops one block past `max_seconds`, enough for the caller to see that it is too long."""
    with soundfile.SoundFile(io.BytesIO(data)) as f:
        block, parts, frames = max(1, _READ_BLOCK // f.channels), [], 0
        while frames <= max_seconds * f.samplerate and len(
            part := f.read(block, dtype="float32", always_2d=True)
        ):
            parts.append(part)
            frames += len(part)
        audio = np.concatenate(parts) if parts else np.zeros((0, f.channels), np.float32)
        return audio, int(f.samplerate)


def _ffmpeg(data: bytes, target: int, max_seconds: float) -> npt.NDArray[np.float32]:
    binary = shutil.which("ffmpeg")
    if binary is None:
        raise AudioError(
            "the file is not WAV, FLAC or OGG, and ffmpeg (needed for MP3, M4A, WebM) is not installed",
            code="unsupported_format",
        )
    cmd = [binary, "-nostdin", "-loglevel", "error", "-i", "pipe:0", "-f", "f32le", "-ac", "1"]
    if math.isfinite(max_seconds):  # a second over the limit shows that it is too long
        cmd += ["-t", f"{max_seconds + 1:g}"]
    proc = subprocess.run(
        [*cmd, "-ar", str(target), "pipe:1"], input=data, capture_output=True, timeout=120
    )
    if proc.returncode != 0:
        reason = proc.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["unknown error"]
        raise AudioError(
            f"the file is not audio that ffmpeg can decode: {reason[0]}", code="unsupported_format"
        )
    return np.frombuffer(proc.stdout, "<f4").astype(np.float32)[:, None]
