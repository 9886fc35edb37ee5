"""The spoken lines of "Beneath a Steel Sky" (Debian package beneath-a-steel-sky, the freeware
CD version v0.0372): about two hours of actors in many voices, kept inside the game's archive.

`sky.dnr` indexes `sky.dsk`: a little-endian 32-bit count, then 8 bytes a file: its number
(16 bits), its offset (24 bits; when bit 23 is set, the low 23 bits count 16-byte units) and
24 bits of flags whose low 22 are its size (bits 22 and 23, ScummVM's 'drop the header' and
'stored', are clear on every speech file). Speech is files 50000 and up: the in-game lines
(50000 + a section's base + the line, below the intro's files) and the intro's voice-overs
(`INTRO_VOICES`); the other files up there are pictures, palettes, music, fonts and text.

A clip is a 22-byte header, then the samples RNC ProPack-packed (read as they are, the bytes
are noise). The header's first word says packed (bit 7) and holds bits 16-23 of the size in its
high byte; its seventh word, the size's low 16 bits, counts the header too. Unpacked, the
samples are unsigned 8-bit PCM at 11,025 Hz, silence at 128, as ScummVM plays them. The
header's other nine words hold sample-like bytes near 128; neither it nor the index names the
speaker, which only the game's scripts know.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import propack
import soundfile as sf

from corpus.importers.audio import F32, AudioError
from corpus.importers.candidates import PrepareError, need_file
from corpus.importers.report import Report

SKY_DIR = Path("/usr/share/scummvm/beneath-a-steel-sky")
LICENCE = (
    "Beneath a Steel Sky licence (Revolution Software: free redistribution and modification, "
    "modified versions marked as such, readme and notices kept; Debian main)"
)
SPEECH_FIRST = 50000
INTRO_FIRST = 59494  # the CD intro's sounds, pictures and voices start here
# The CD intro's voice-overs among its pictures (ScummVM engines/sky/intro.cpp, CDV_00-CDV_87).
INTRO_VOICES = frozenset(
    [59500, 59504, 59505, 59507, 59508, 59510, 59511, 59513, 59514, 59515, 59518, 59520]
    + [59523, 59525, 59527, 59528, 59531, 59534, 59535, 59536, 59539, 59541, 59545, 59546]
    + [59551, 59554, 59556, 59558, 59561, 59562, 59563, 59565, 59566, 59567, 59568, 59570]
    + [59574, 59576, 59579, 59581, 59583, 59587, 59588, 59590, 59594, 59596, 59600, 59602]
    + [59606, 59610, 59612, 59613, 59614, 59615, 59616, 59618, 59621, 59622, 59624]
    + [*range(59627, 59634), 59635, 59639, 59642, 59644, 59647, 59648, 59649, 59654, 59655]
    + [59656, 59659, 59660, *range(59663, 59673)]
)
RATE = 11025
HEADER = 22  # the game's DataFileHeader: eleven 16-bit words
PACKED = 0x80  # header flag bit: the rest is an RNC stream
MIN_SECONDS = 0.3  # shorter clips are grunts and clicks, not words
SILENT_PEAK = 2 / 128  # within 2 steps of 128 everywhere: 8-bit silence


@dataclass(frozen=True)
class SkyClip:
    """One spoken line, written out as a WAV."""

    number: int  # the dnr file number
    path: Path  # WAV at the native 11,025 Hz, 16-bit, mono
    seconds: float


def is_speech(number: int) -> bool:
    """Whether dnr file `number` is a spoken line (the rest above 50000 is
    pictures, music, sound effects and text)."""
    return SPEECH_FIRST <= number < INTRO_FIRST or number in INTRO_VOICES


def read_index(dnr: Path) -> list[tuple[int, int, int]]:
    """(number, offset in sky.dsk, size) for every file `sky.dnr` lists; a wrong or truncated
    file is refused whole, since its entries would point at the wrong bytes."""
    try:
        data = need_file(dnr, "Beneath a Steel Sky index (sky.dnr)").read_bytes()
    except OSError as e:
        raise PrepareError(f"cannot read {dnr}: {e}") from None
    count = struct.unpack_from("<I", data)[0] if len(data) >= 4 else 0
    if count == 0 or len(data) != 4 + 8 * count:
        raise PrepareError(
            f"{dnr} is not a whole sky.dnr: {len(data)} bytes, but its count says {count} "
            f"entries of 8 bytes after 4 (package beneath-a-steel-sky)"
        )
    entries = []
    for i in range(4, len(data), 8):
        offset = int.from_bytes(data[i + 2 : i + 5], "little")
        if offset & 0x800000:  # stored in 16-byte units (8 only in floppy v0.0331, no speech)
            offset = (offset & 0x7FFFFF) << 4
        size = int.from_bytes(data[i + 5 : i + 8], "little") & 0x3FFFFF
        entries.append((int.from_bytes(data[i : i + 2], "little"), offset, size))
    return entries


def speech_pcm(raw: bytes) -> F32:
    """One sky.dsk speech file as float32 samples in [-1, 1]; raises `AudioError` on bytes that
    are not a whole clip, so one damaged clip is counted instead of written as noise."""
    if len(raw) < HEADER:
        raise AudioError("truncated", f"{len(raw)} bytes, shorter than the {HEADER}-byte header")
    flag, low = struct.unpack_from("<H10xH", raw)
    size = ((flag & 0xFF00) << 8 | low) - HEADER
    if size <= 0:
        raise AudioError("bad_header", f"header gives {size + HEADER} bytes with itself")
    if flag & PACKED:
        if raw[HEADER : HEADER + 3] != b"RNC":
            raise AudioError("unpack_failed", "header says packed, but no RNC signature follows")
        try:
            pcm = bytes(propack.unpack(raw[HEADER:]))
        except Exception as e:  # propack raises ValueError, and may fail otherwise on garbage
            raise AudioError("unpack_failed", str(e) or repr(e)) from None
    else:
        pcm = raw[HEADER : HEADER + size]
    if len(pcm) != size:
        reason = "unpack_failed" if flag & PACKED else "truncated"
        raise AudioError(reason, f"{len(pcm)} bytes of samples, the header says {size}")
    samples = np.frombuffer(pcm, dtype=np.uint8).astype(np.float32)
    return (samples - 128.0) / 128.0


def extract_sky(data_dir: Path, out_dir: Path, report: Report) -> list[SkyClip]:
    """Every speech clip as `out_dir/source/sky/NUMBER.wav`; WAVs already there are reused (an
    interrupted run resumes), and a clip that cannot be used is counted in `report`."""
    index = read_index(data_dir / "sky.dnr")
    dsk = need_file(data_dir / "sky.dsk", "Beneath a Steel Sky archive (sky.dsk)")
    speech = sorted(e for e in index if is_speech(e[0]))
    report.notes["sky_speech_files"] = len(speech)
    report.notes["sky_other_files"] = len(index) - len(speech)
    clips = []
    with dsk.open("rb") as f:
        for number, offset, size in speech:
            path = out_dir / "source" / "sky" / f"{number}.wav"
            try:
                seconds = _existing_seconds(path)
                if seconds is None:
                    seconds = _write_clip(f, offset, size, path)
            except AudioError as e:
                report.drop(f"audio:{e.reason}", f"{number}: {e}")
                continue
            except Exception as e:  # a disk or library failure on one clip must not stop the run
                report.drop("audio:write_failed", f"{number}: {e!r}")
                continue
            clips.append(SkyClip(number, path, seconds))
    return clips


def _write_clip(dsk: BinaryIO, offset: int, size: int, dst: Path) -> float:
    """Read, unpack, check and write one clip as 16-bit PCM, atomically; its duration."""
    dsk.seek(offset)
    raw = dsk.read(size)
    if len(raw) != size:
        raise AudioError("truncated", f"sky.dsk ends {size - len(raw)} bytes into the clip")
    audio = speech_pcm(raw)
    if audio.size < MIN_SECONDS * RATE:
        raise AudioError("too_short", f"{audio.size / RATE:.3f} s")
    if float(np.abs(audio).max()) <= SILENT_PEAK:
        raise AudioError("silent", "every sample within 2 steps of 8-bit silence")
    dst.parent.mkdir(parents=True, exist_ok=True)
    part = dst.with_name(dst.name + ".part")
    sf.write(part, np.round(audio * 32768).astype(np.int16), RATE, "PCM_16", format="WAV")
    os.replace(part, dst)
    return audio.size / RATE


def _existing_seconds(path: Path) -> float | None:
    """Duration of a clip an earlier run finished, or None if it must be (re)made."""
    try:
        info = sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError):
        return None
    if info.samplerate != RATE or info.channels != 1 or info.frames == 0:
        return None
    return float(info.frames / RATE)
