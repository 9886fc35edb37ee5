"""The speech samples of codec2, the low-bit-rate speech codec (Debian codec2-examples): Harvard
sentences read for codec tests and radio amateurs calling on the air, a few minutes from about
ten voices; headerless 16-bit little-endian PCM at 8 kHz (`raw/*.raw`) and one WAV at 16 kHz.

The directory also holds signals that are not speech (modem frames, tones) and copies
(`hts1.raw` is `hts.raw`'s first 6 s, `f2400.raw` is `forig.raw` through the codec at
2400 bit/s); `SKIP` names them. A file is one voice, named after it (a call sign, 'vk5qi');
`hts.raw`, eight sentences by the Harvard test speakers, is one group. Recordings longer than
`MAX_SECONDS` are cut in their pauses, so the recogniser hears, and the model trains on,
sentence-length pieces (one with no pause left is kept up to `LONGEST`), written as WAVs at
their own rate under OUT/source.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from corpus.importers.audio import F32
from corpus.importers.candidates import PrepareError, need_dir
from corpus.importers.pack_clips import PackClip, drop
from corpus.importers.report import Report

RAW_DIR = Path("/usr/share/codec2/raw")
SOURCE = "codec2"
RATE = 8000  # of the .raw files
SKIP = {  # file stem -> (drop reason, why)
    "700d_end_over": ("file:not_speech", "FreeDV 700D modem signal"),
    "sine1k_2Hz_spread": ("file:not_speech", "a 1 kHz tone through a fading channel"),
    "sine1k_2ms_delay_2Hz_spread": ("file:not_speech", "a 1 kHz tone through a fading channel"),
    "test_datac1_006": ("file:not_speech", "data modem signal"),
    "testframes_700d": ("file:not_speech", "FreeDV 700D test frames"),
    "hts1": ("file:copy", "hts.raw's first 6 s"),
    "hts1a": ("file:copy", "hts.raw's first 3 s"),
    "hts2": ("file:copy", "hts.raw's 6-12 s"),
    "hts2a": ("file:copy", "hts.raw's 6-9 s"),
    "ve9qrp_10s": ("file:copy", "ve9qrp.raw's first 10 s"),
    "f2400": ("file:copy", "forig.raw coded at 2400 bit/s"),
    "m2400": ("file:copy", "morig.raw coded at 2400 bit/s"),
}
MAX_SECONDS = 10.0  # longer recordings are cut in their pauses
LONGEST = 20.0  # a piece with no pause left to cut in is kept up to this long (synth's limit)
MIN_PIECE = 1.0  # seconds a cut leaves on either side, at least
MIN_PAUSE = 0.15  # seconds of quiet a cut may go in the middle of
QUIET_SHARE = 0.3  # quiet: within this share of the way (in dB) from the floor to the loud frames
FRAME = 0.01


@dataclass(frozen=True)
class Pause:
    centre: int  # sample
    length: int  # samples


def read(raw_dir: Path, out_dir: Path, report: Report) -> list[PackClip]:
    """Every speech recording, cut in its pauses where it is longer than `MAX_SECONDS`."""
    need_dir(raw_dir, "codec2 raw directory (codec2-examples' raw/)")
    files = sorted(p for p in raw_dir.iterdir() if p.suffix in (".raw", ".wav") and p.is_file())
    clips = []
    for path in files:
        if path.stem in SKIP:
            reason, why = SKIP[path.stem]
            drop(report, SOURCE, reason, f"{path.name}: {why}")
            continue
        try:
            audio, rate = load(path)
        except (ValueError, sf.LibsndfileError, RuntimeError, OSError) as e:
            drop(report, SOURCE, "audio:unreadable_audio", f"{path.name}: {e}")
            continue
        spans = pause_spans(audio, rate)
        for n, (start, end) in enumerate(spans):
            key = f"{SOURCE}-{path.stem}" + (f"-{n:02d}" if len(spans) > 1 else "")
            if end - start > LONGEST * rate:
                drop(
                    report, SOURCE, "audio:no_pause_to_cut", f"{key}: {(end - start) / rate:.1f} s"
                )
                continue
            wav = out_dir / "source" / SOURCE / f"{key}.wav"
            _write(wav, audio[start:end], rate)
            clips.append(PackClip(key, wav, (end - start) / rate, f"{SOURCE}:{path.stem}"))
    if not clips:
        raise PrepareError(f"no codec2 speech recordings (*.raw, *.wav) in {raw_dir}")
    return clips


def load(path: Path) -> tuple[F32, int]:
    """Float samples and their rate: a `.raw` as codec2's 16-bit little-endian 8 kHz mono."""
    if path.suffix == ".wav":
        audio, rate = sf.read(path, dtype="float32", always_2d=True)
        return audio.mean(axis=1).astype(np.float32), int(rate)
    data = path.read_bytes()
    if len(data) % 2:
        raise ValueError(f"{len(data)} bytes: not whole 16-bit samples")
    return (np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0), RATE


def pause_spans(audio: F32, rate: int, max_seconds: float = MAX_SECONDS) -> list[tuple[int, int]]:
    """[start, end) sample spans covering `audio`: whole when short enough, else cut in the
    middle of its longest pause (the one nearest the middle of equals) and each side again,
    until every span is at most `max_seconds` or has no pause left to cut in."""
    limit = int(max_seconds * rate)
    if audio.size <= limit:
        return [(0, audio.size)]
    return _cut(0, audio.size, pauses(audio, rate), limit, int(MIN_PIECE * rate))


def pauses(audio: F32, rate: int) -> list[Pause]:
    """Runs of quiet 10 ms frames at least `MIN_PAUSE` long. Quiet is relative to the
    recording's own noise floor, which on a radio recording is 20 dB above a studio's."""
    hop = max(1, int(FRAME * rate))
    n = audio.size // hop
    if n == 0:
        return []
    frames = audio[: n * hop].reshape(n, hop).astype(np.float64)
    rms = np.sqrt((frames**2).mean(axis=1))
    floor, loud = np.percentile(rms, [10, 95]) + 1e-9  # noise between words; speech
    quiet = rms < floor * (loud / floor) ** QUIET_SHARE
    out, start = [], None
    for i, q in enumerate([*quiet.tolist(), False]):
        if q and start is None:
            start = i
        elif not q and start is not None:
            if (i - start) * hop >= MIN_PAUSE * rate:
                out.append(Pause((start + i) * hop // 2, (i - start) * hop))
            start = None
    return out


def _cut(
    start: int, end: int, found: list[Pause], limit: int, margin: int
) -> list[tuple[int, int]]:
    if end - start <= limit:
        return [(start, end)]
    inside = [p for p in found if start + margin <= p.centre <= end - margin]
    if not inside:
        return [(start, end)]
    middle = (start + end) / 2
    best = max(inside, key=lambda p: (p.length, -abs(p.centre - middle)))
    return _cut(start, best.centre, found, limit, margin) + _cut(
        best.centre, end, found, limit, margin
    )


def _write(path: Path, audio: F32, rate: int) -> None:
    """A piece as 16-bit PCM at its own rate, atomically; one already there is kept."""
    try:
        info = sf.info(str(path))
        if info.frames == audio.size and info.samplerate == rate:
            return
    except (sf.LibsndfileError, RuntimeError, OSError):
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    sf.write(part, np.clip(audio, -1.0, 1.0), rate, subtype="PCM_16", format="WAV")
    os.replace(part, path)
