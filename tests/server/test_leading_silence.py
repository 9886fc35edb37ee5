"""A pause before speaking changes nothing: with the bundled default model (speaker adaptation
on), 3 s of digital silence and faint noise before a sentence give the transcript of the
sentence alone, and the words keep their times in the stream."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from server.config import DEFAULT_BUNDLE, ServerConfig
from server.engine import running_engine
from server.recording import transcribe
from tests.server.serving import speak

SENTENCE = "please call stella and ask her to bring these things with her from the store"
RATE = 16000


def faint_noise(seconds: float, db: float = -54.0, seed: int = 3) -> np.ndarray:
    n = int(seconds * RATE)
    return (np.random.default_rng(seed).standard_normal(n) * 10 ** (db / 20)).astype(np.float32)


async def _transcribe_all(clips: list[np.ndarray]) -> list[dict]:
    async with running_engine(ServerConfig(dtype="fp32", bundle=DEFAULT_BUNDLE)) as engine:
        return [(await transcribe(engine, clip))[1].model_dump() for clip in clips]


@pytest.fixture(scope="module")
def finals() -> tuple[dict, dict, dict]:
    speech, lead = speak(SENTENCE), faint_noise(1.5)
    # what a recording that starts speaking at once sounds like: a breath of room noise first
    prompt = np.concatenate([lead[-RATE // 5 :], speech])
    paused = np.concatenate([np.zeros(int(1.5 * RATE), np.float32), lead, speech])
    silent = np.concatenate([np.zeros(RATE, np.float32), faint_noise(2.0)])
    first, second, third = asyncio.run(_transcribe_all([prompt, paused, silent]))
    return first, second, third


def test_leading_silence_and_noise_give_the_same_words(finals: tuple[dict, dict, dict]) -> None:
    prompt, paused, _ = finals
    assert len(prompt["text"].split()) >= 10, prompt  # the model hears the sentence at all
    assert paused["text"] == prompt["text"]


def test_words_keep_their_time_in_the_stream(finals: tuple[dict, dict, dict]) -> None:
    prompt, paused, _ = finals
    shift = 3.0 - 0.2  # the paused clip's speech starts this much later
    for a, b in zip(prompt["words"], paused["words"], strict=True):
        assert b["start"] == pytest.approx(a["start"] + shift, abs=0.03)
        assert b["end"] == pytest.approx(a["end"] + shift, abs=0.03)


def test_silence_alone_gives_an_empty_final(finals: tuple[dict, dict, dict]) -> None:
    silent = finals[2]
    assert silent["text"] == "" and silent["words"] == [] and silent["duration"] == 3.0
