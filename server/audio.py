"""Audio at the boundary: raw PCM frames and uploaded files to 16 kHz mono float32.

Every check here exists because a client got it wrong once: WAV files sent as raw frames,
odd byte counts, float frames full of NaN, stereo uploads, unknown containers.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import math
import os
import select
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Generator, Iterator
from pathlib import Path

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
_READ_BLOCK = 1 << 20  # samples (all channels) decoded at a time: a block of a file
_FFMPEG_STALL_S = 120.0  # ffmpeg silent this long while a block is wanted: given up on


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
    """An uploaded file -> mono float32 at `target` Hz, whole (`decode_blocks` joined)."""
    blocks = list(decode_blocks(data, target, max_seconds))
    return np.concatenate(blocks) if blocks else np.zeros(0, np.float32)


def decode_blocks(
    source: bytes | Path, target: int, max_seconds: float = math.inf
) -> Generator[F32, None, None]:
    """A file (its bytes, or its path) -> mono float32 blocks at `target` Hz, in order, each
    about a minute long: a file of any length is decoded in the memory of a block.

    WAV, FLAC and OGG go through libsndfile; anything else through ffmpeg when it is
    installed, otherwise `AudioError(code="unsupported_format")`. Samples that are NaN,
    infinite or over `MAX_FILE_PEAK` (a misread header) are an `AudioError` too, and so is
    audio over `max_seconds` (`code="too_long"`), found while decoding: a few kB of FLAC, or a
    WAV whose header says 1 Hz, would otherwise decode or resample to gigabytes first. An
    error in a block comes when that block is read, after the blocks before it."""
    if isinstance(source, bytes) and not source:
        raise AudioError("the uploaded file is empty")
    if isinstance(source, Path):
        source.stat()  # a missing file is the OSError that reading it would be
    try:
        blocks, rate = _libsndfile(source, max_seconds)
    except (soundfile.LibsndfileError, RuntimeError, TypeError):
        blocks, rate = _ffmpeg(source, target, max_seconds), target
    resampler = Resampler(rate, target)
    try:
        for block in itertools.chain(blocks, [None]):
            out = resampler.push(np.zeros(0, np.float32) if block is None else block, block is None)
            if not np.all(np.isfinite(out)) or (
                len(out) and float(np.abs(out).max()) > MAX_FILE_PEAK
            ):
                raise AudioError(
                    "the file holds samples that are NaN, infinite or over 2^31 in magnitude; "
                    "is it really audio?"
                )
            if len(out):
                yield out
    finally:
        blocks.close()  # the file, or ffmpeg, as soon as the blocks are no longer wanted


class FileBlocks:
    """`decode_blocks` read from any thread: `read` gives the next block (None after the
    last), and `close`, which ends an ffmpeg still decoding, waits for a read under way."""

    def __init__(self, source: bytes | Path, target: int, max_seconds: float = math.inf) -> None:
        self._blocks = decode_blocks(source, target, max_seconds)
        self._lock = threading.Lock()

    def read(self) -> F32 | None:
        with self._lock:
            return next(self._blocks, None)

    def close(self) -> None:
        with self._lock:
            self._blocks.close()


def _too_long(max_seconds: float) -> AudioError:
    return AudioError(f"the file holds more than the {max_seconds:g} s allowed", "too_long")


def _libsndfile(source: bytes | Path, max_seconds: float) -> tuple[Generator[F32, None, None], int]:
    """Mono blocks at the file's rate, and the rate. The first block is read here, so that a
    file libsndfile cannot read goes to ffmpeg; the rest as they are taken. Read in blocks
    because a header may claim far more frames than the file holds (a FLAC header claiming
    2**34 made one read ask for 64 GiB)."""
    sound = soundfile.SoundFile(io.BytesIO(source) if isinstance(source, bytes) else str(source))
    try:
        block = max(1, _READ_BLOCK // sound.channels)
        first = sound.read(block, dtype="float32", always_2d=True)
    except BaseException:
        sound.close()
        raise
    return _sound_blocks(sound, first, block, max_seconds), int(sound.samplerate)


def _sound_blocks(
    sound: soundfile.SoundFile, part: npt.NDArray[np.float32], block: int, max_seconds: float
) -> Generator[F32, None, None]:
    with sound:
        frames = 0
        while len(part):
            frames += len(part)
            if frames > max_seconds * sound.samplerate:
                raise _too_long(max_seconds)
            yield np.ascontiguousarray(part.mean(axis=1), dtype=np.float32)
            try:
                part = sound.read(block, dtype="float32", always_2d=True)
            except (soundfile.LibsndfileError, RuntimeError) as e:
                raise AudioError(f"the file cannot be read past {frames} frames: {e}") from None


def _ffmpeg(source: bytes | Path, target: int, max_seconds: float) -> Generator[F32, None, None]:
    binary = shutil.which("ffmpeg")
    if binary is None:
        raise AudioError(
            "the file is not WAV, FLAC or OGG, and ffmpeg (needed for MP3, M4A, WebM) is not installed",
            code="unsupported_format",
        )
    piped = isinstance(source, bytes)
    cmd = [binary, "-nostdin", "-loglevel", "error", "-i", "pipe:0" if piped else str(source)]
    cmd += ["-f", "f32le", "-ac", "1", "-ar", str(target)]
    if math.isfinite(max_seconds):  # a second over the limit shows that it is too long
        cmd += ["-t", f"{max_seconds + 1:g}"]
    return _ffmpeg_blocks(
        [*cmd, "pipe:1"], source if isinstance(source, bytes) else None, target, max_seconds
    )


def _ffmpeg_blocks(
    cmd: list[str], data: bytes | None, rate: int, max_seconds: float
) -> Generator[F32, None, None]:
    """ffmpeg's output in blocks as it decodes; `data` goes to its stdin from a thread of its
    own, so that neither side waits on a full pipe. Closing the iterator ends the process."""
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL if data is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
        )
        feeder = threading.Thread(target=_feed, args=(proc, data), daemon=True)
        feeder.start()
        try:
            samples = 0
            for chunk in _pipe_chunks(proc):
                samples += len(chunk) // 4
                if samples > max_seconds * rate:
                    raise _too_long(max_seconds)
                yield np.frombuffer(chunk, "<f4").astype(np.float32)
            if proc.wait() != 0:
                errors.seek(0)
                lines = errors.read().decode(errors="replace").strip().splitlines()
                raise AudioError(
                    f"the file is not audio that ffmpeg can decode: {(lines or ['unknown error'])[-1]}",
                    code="unsupported_format",
                )
        finally:
            proc.kill()
            proc.wait()
            feeder.join()
            assert proc.stdout is not None
            proc.stdout.close()


def _feed(proc: subprocess.Popen[bytes], data: bytes | None) -> None:
    if data is None or proc.stdin is None:
        return
    with contextlib.suppress(OSError), proc.stdin:  # OSError: ffmpeg failed, or was ended
        proc.stdin.write(data)


def _pipe_chunks(proc: subprocess.Popen[bytes]) -> Iterator[bytes]:
    """ffmpeg's stdout in chunks of `_READ_BLOCK` float32 samples (whole samples; the last
    shorter); an AudioError if it sends nothing for `_FFMPEG_STALL_S` while one is wanted."""
    assert proc.stdout is not None
    fd, buf, want = proc.stdout.fileno(), bytearray(), _READ_BLOCK * 4
    while True:
        ready, _, _ = select.select([fd], [], [], _FFMPEG_STALL_S)
        if not ready:
            raise AudioError(
                f"ffmpeg decoded nothing for {_FFMPEG_STALL_S:g} s; is it really audio?",
                code="unsupported_format",
            )
        chunk = os.read(fd, 1 << 16)
        buf += chunk
        while len(buf) >= want:
            yield bytes(buf[:want])
            del buf[:want]
        if not chunk:
            if whole := len(buf) // 4 * 4:
                yield bytes(buf[:whole])
            return
