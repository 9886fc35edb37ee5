"""Beneath a Steel Sky's speech extractor on a tiny sky.dnr/sky.dsk pair in the game's format."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from corpus.importers.audio import AudioError
from corpus.importers.candidates import PrepareError
from corpus.importers.report import Report

propack = pytest.importorskip("propack")
sky = pytest.importorskip("corpus.importers.sky")

RATE = 11025


def _wave() -> np.ndarray:
    """A tone, a pause, a louder tone: 0.7 s as the game's unsigned 8-bit samples."""
    t = np.arange(int(0.4 * RATE)) / RATE
    tone = 0.5 * np.sin(2 * np.pi * 300 * t)
    x = np.concatenate([tone, np.zeros(int(0.1 * RATE)), 1.6 * tone[: int(0.2 * RATE)]])
    return np.clip(np.round(128 + 127 * x), 0, 255).astype(np.uint8)


def _clip(pcm: bytes, packed: bool) -> bytes:
    """A speech file: the 22-byte header (flag, size counting the header), then the samples."""
    total = len(pcm) + 22
    flag = (total >> 16) << 8 | (0x81 if packed else 0x01)
    header = struct.pack("<H10xH8x", flag, total & 0xFFFF)
    return header + (propack.pack(pcm) if packed else pcm)


def _game(tmp_path: Path, files: dict[int, bytes]) -> Path:
    """sky.dnr and sky.dsk holding `files`, each at a 16-byte boundary so that odd numbers can
    use the offset format that counts 16-byte units."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    dsk, entries = b"", b""
    for number, data in files.items():
        dsk += b"\0" * (-len(dsk) % 16)
        offset = (len(dsk) >> 4) | 0x800000 if number % 2 else len(dsk)
        entries += struct.pack("<H", number) + offset.to_bytes(3, "little")
        entries += len(data).to_bytes(3, "little")
        dsk += data
    (tmp_path / "sky.dnr").write_bytes(struct.pack("<I", len(files)) + entries)
    (tmp_path / "sky.dsk").write_bytes(dsk)
    return tmp_path


def test_extract_sky(tmp_path: Path) -> None:
    wave = _wave()
    corrupt = bytearray(_clip(wave.tobytes(), packed=True))
    corrupt[60:70] = b"\xff" * 10
    data = _game(
        tmp_path / "game",
        {
            100: b"not speech, below 50000",
            50001: _clip(wave.tobytes(), packed=True),
            50002: _clip(wave.tobytes(), packed=False),
            50003: bytes(corrupt),
            50004: _clip(wave[:1000].tobytes(), packed=False),  # 0.09 s
            50006: _clip(bytes([128, 129, 127] * 2000), packed=True),  # silence
            60001: _clip(wave.tobytes(), packed=True),  # a sound, but not speech
        },
    )
    out = tmp_path / "out"
    report = Report()
    clips = sky.extract_sky(data, out, report)

    assert [c.number for c in clips] == [50001, 50002]
    assert report.dropped == {"audio:unpack_failed": 1, "audio:too_short": 1, "audio:silent": 1}
    assert report.examples["audio:unpack_failed"][0].startswith("50003: ")
    expected = (wave.astype(np.float32) - 128) / 128
    for c in clips:
        assert c.path == out / "source" / "sky" / f"{c.number}.wav"
        info = sf.info(str(c.path))
        assert (info.samplerate, info.channels, info.subtype) == (RATE, 1, "PCM_16")
        assert c.seconds == pytest.approx(len(wave) / RATE)
        got = sf.read(c.path, dtype="float32")[0]
        np.testing.assert_allclose(got, expected, atol=1 / 256)
    assert sorted(p.name for p in (out / "source" / "sky").iterdir()) == ["50001.wav", "50002.wav"]

    # a second run reuses the WAVs instead of unpacking again
    stamp = clips[0].path.stat().st_mtime_ns
    (data / "sky.dsk").write_bytes(b"\0" * (data / "sky.dsk").stat().st_size)
    again = sky.extract_sky(data, out, Report())
    assert again == clips
    assert clips[0].path.stat().st_mtime_ns == stamp


def test_speech_pcm_refuses_bad_bytes() -> None:
    wave = _wave()
    assert np.array_equal(
        sky.speech_pcm(_clip(wave.tobytes(), packed=False))[:3],
        (wave[:3].astype(np.float32) - 128) / 128,
    )
    for raw, reason in [
        (b"\x81\x00", "truncated"),
        (_clip(wave.tobytes(), packed=False)[:-5], "truncated"),
        (_clip(wave.tobytes(), packed=True)[:-5], "unpack_failed"),
        (_clip(wave.tobytes(), packed=False).replace(b"\x01", b"\x81", 1), "unpack_failed"),
    ]:
        with pytest.raises(AudioError) as e:
            sky.speech_pcm(raw)
        assert e.value.reason == reason


def test_truncated_index(tmp_path: Path) -> None:
    data = _game(tmp_path, {50001: _clip(_wave().tobytes(), packed=False)})
    dnr = data / "sky.dnr"
    dnr.write_bytes(dnr.read_bytes()[:-3])
    with pytest.raises(PrepareError, match="not a whole sky.dnr"):
        sky.read_index(dnr)
    with pytest.raises(PrepareError, match="does not exist"):
        sky.extract_sky(tmp_path / "nowhere", tmp_path / "out", Report())
