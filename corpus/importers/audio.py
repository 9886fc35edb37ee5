"""Source audio to 16 kHz mono 16-bit WAVs: decoded once per recording, cut, resampled and
written atomically, on a pool of processes.

Any format soundfile reads is read directly; the rest (mp3, m4a, raw G.722, wav.scp pipes)
goes through ffmpeg. A recording that cannot be used becomes an `Outcome` with a drop reason,
never an exception, so one bad file costs one utterance, not the run. WAVs a previous run
finished are reused, which is what lets an interrupted run resume.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import soundfile as sf
import soxr
from tqdm import tqdm

from corpus.importers.candidates import Item

SAMPLE_RATE = 16000
MIN_SECONDS = 0.1  # shorter audio holds no word
SEGMENT_SLACK = 0.1  # Kaldi segments may end this far past the recording (rounding); clipped
PIPE_TIMEOUT = 600.0  # seconds a wav.scp command may run
F32 = npt.NDArray[np.float32]

Piece = tuple[int, str, float, float | None]  # (item index, output WAV, start, end)
Outcome = tuple[int, float | None, str, str]  # (item index, duration, drop reason, detail)


class AudioError(Exception):
    """One recording that cannot be used; `reason` is its counting key."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True)
class Recording:
    """One source file (or wav.scp command) and the utterances cut from it."""

    audio: str
    codec: str | None
    pieces: tuple[Piece, ...]


def recordings(items: Iterable[Item]) -> list[Recording]:
    """Items grouped by source recording, so a long Kaldi recording is decoded once."""
    pieces: dict[tuple[str, str | None], list[Piece]] = {}
    for item in items:
        c = item.cand
        pieces.setdefault((c.audio, c.codec), []).append((item.index, c.out, c.start, c.end))
    return [Recording(a, codec, tuple(p)) for (a, codec), p in pieces.items()]


def convert_all(out_dir: Path, recs: list[Recording], workers: int) -> list[Outcome]:
    """Every recording converted on `workers` processes, with a progress bar on a terminal."""
    total = sum(len(r.pieces) for r in recs)
    results: list[Outcome] = []
    with tqdm(total=total, unit="utt", disable=None, mininterval=2.0) as bar:
        if workers <= 1:
            for rec in recs:
                results += convert(out_dir, rec)
                bar.update(len(rec.pieces))
            return results
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            jobs = [(out_dir, r) for r in recs]
            for outcome in pool.imap_unordered(_convert_job, jobs, chunksize=4):
                results += outcome
                bar.update(len(outcome))
    return results


def _convert_job(job: tuple[Path, Recording]) -> list[Outcome]:
    return convert(*job)


def convert(out_dir: Path, rec: Recording) -> list[Outcome]:
    """Write the recording's pieces as 16 kHz WAVs (reusing finished ones); never raises."""
    results: list[Outcome] = []
    todo: list[Piece] = []
    for index, out, start, end in rec.pieces:
        done = _existing_duration(out_dir / out)
        if done is not None:
            results.append((index, done, "", ""))
        else:
            todo.append((index, out, start, end))
    if not todo:
        return results
    try:
        audio, rate = load_audio(rec.audio, rec.codec)
    except AudioError as e:
        return results + [(index, None, e.reason, f"{rec.audio}: {e}") for index, *_ in todo]
    return results + [_write(out_dir, rec.audio, audio, rate, piece) for piece in todo]


def _write(out_dir: Path, source: str, audio: F32, rate: int, piece: Piece) -> Outcome:
    index, out, start, end = piece
    try:
        if not source.endswith("|") and Path(source).resolve() == (out_dir / out).resolve():
            raise AudioError("overwrites_source", "--out would overwrite the source audio")
        return (index, write_piece(audio, rate, start, end, out_dir / out), "", "")
    except AudioError as e:
        return (index, None, e.reason, f"{source}: {e}")
    except Exception as e:  # a disk or library failure on one file must not stop the run
        return (index, None, "write_failed", f"{source}: {e!r}")


def load_audio(spec: str, codec: str | None) -> tuple[F32, int]:
    """Mono float32 samples and their rate: soundfile where it can, else ffmpeg (at 16 kHz)."""
    if spec.endswith("|"):
        return _ffmpeg(["-i", "pipe:0"], _run_pipe(spec[:-1])), SAMPLE_RATE
    path = Path(spec)
    if not path.is_file():
        raise AudioError("missing_audio", "no such file")
    if codec is not None:
        return _ffmpeg(["-f", codec, "-i", str(path)]), SAMPLE_RATE
    try:
        audio, rate = sf.read(path, dtype="float32", always_2d=True)
        return audio.mean(axis=1), int(rate)
    except (sf.LibsndfileError, RuntimeError, ValueError) as e:  # m4a, opus-in-webm...
        try:
            return _ffmpeg(["-i", str(path)]), SAMPLE_RATE
        except AudioError as e2:
            raise AudioError(e2.reason, f"soundfile: {e}; ffmpeg: {e2}") from None


def _run_pipe(command: str) -> bytes:
    """stdout of a wav.scp command, run with bash as Kaldi does."""
    shell = shutil.which("bash") or "/bin/sh"
    try:
        done = subprocess.run(
            [shell, "-c", command], capture_output=True, timeout=PIPE_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired:
        raise AudioError("pipe_failed", f"command ran over {PIPE_TIMEOUT:.0f} s") from None
    if done.returncode != 0 or not done.stdout:
        err = done.stderr.decode(errors="replace").strip()[-300:]
        raise AudioError("pipe_failed", f"exit {done.returncode}, {len(done.stdout)} bytes: {err}")
    return done.stdout


def _ffmpeg(input_args: list[str], stdin: bytes | None = None) -> F32:
    """Decode anything ffmpeg reads to 16 kHz mono float32."""
    cmd = ["ffmpeg", "-nostdin", "-v", "error", *input_args, "-map", "0:a:0", "-ac", "1"]
    cmd += ["-ar", str(SAMPLE_RATE), "-f", "f32le", "pipe:1"]
    if stdin is not None:
        cmd.remove("-nostdin")
    try:
        done = subprocess.run(cmd, input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        raise AudioError("no_ffmpeg", "this format needs ffmpeg, which is not installed") from None
    if done.returncode != 0 or not done.stdout:
        err = done.stderr.decode(errors="replace").strip()[-300:]
        raise AudioError("unreadable_audio", f"ffmpeg: {err or 'no audio'}")
    return np.frombuffer(done.stdout, dtype="<f4").copy()


def write_piece(audio: F32, rate: int, start: float, end: float | None, dst: Path) -> float:
    """Cut [start, end) seconds, resample to 16 kHz, write 16-bit PCM atomically; duration."""
    total = len(audio) / rate
    if start >= total or (end is not None and end > total + SEGMENT_SLACK):
        span = f"{start:.2f}-{'end' if end is None else f'{end:.2f}'} s"
        raise AudioError("bad_segment", f"segment {span} is outside the {total:.2f} s recording")
    piece = audio[round(start * rate) : len(audio) if end is None else round(end * rate)]
    if rate != SAMPLE_RATE:
        piece = soxr.resample(piece, rate, SAMPLE_RATE, quality="HQ").astype(np.float32)
    if piece.size < MIN_SECONDS * SAMPLE_RATE:
        raise AudioError("too_short", f"{piece.size / SAMPLE_RATE:.3f} s of audio")
    if float(np.abs(piece).max()) < 1e-4:
        raise AudioError("silent_audio", "peak below -80 dBFS")
    dst.parent.mkdir(parents=True, exist_ok=True)
    part = dst.with_name(dst.name + ".part")
    sf.write(part, np.clip(piece, -1.0, 1.0), SAMPLE_RATE, subtype="PCM_16", format="WAV")
    os.replace(part, dst)
    return piece.size / SAMPLE_RATE


def _existing_duration(path: Path) -> float | None:
    """Duration of a WAV an earlier run finished, or None if it must be (re)made."""
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError):
        return None
    if info.samplerate != SAMPLE_RATE or info.channels != 1 or info.frames == 0:
        return None
    return float(info.frames / info.samplerate)
