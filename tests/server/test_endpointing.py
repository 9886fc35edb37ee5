"""Endpointing with the bundled default model: trailing silence ends a segment, so a long
stream gets several finals, timed from the start of the stream."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from websockets.sync.client import connect

from server.config import DEFAULT_BUNDLE, ServerConfig
from tests.server.serving import Running, pcm16, reference_text, running, speak, vosk_session

FIRST = "the weather is nice today"
SECOND = "we will go for a long walk"


@pytest.fixture(scope="module")
def default_server() -> Iterator[Running]:
    with running(ServerConfig(dtype="fp32", bundle=DEFAULT_BUNDLE, vosk_endpoint_ms=600)) as r:
        yield r


@pytest.fixture(scope="module")
def two_sentences() -> tuple[bytes, float, list[str]]:
    """FIRST, 1.5 s of silence, SECOND; where the pause ends; the offline words of the first
    half and of the whole stream."""
    pause = np.zeros(24000, np.float32)
    first, second = speak(FIRST), speak(SECOND)
    audio = np.concatenate([pause[:4000], first, pause, second, pause[:8000]])
    pause_end = 4000 + len(first) + len(pause)
    bundle = Path(DEFAULT_BUNDLE)
    heard = [reference_text(bundle, a) for a in (audio[:pause_end], audio)]
    return pcm16(audio), pause_end / 16000, heard


def assert_heard(segments: list[str], heard: list[str]) -> None:
    """Two segments: the first says what the first half says offline, and together they say
    what the whole stream does offline. The recurrent state, the gain and the speaker warp
    carry over from the first half into the second (so the second half alone is not the
    reference), while the LM's context restarts at the pause, so a word at the edge may
    differ."""
    assert len(segments) == 2, segments
    for said, ref in zip([segments[0], " ".join(segments)], heard, strict=True):
        common = set(said.split()) & set(ref.split())
        assert len(common) >= 0.7 * len(set(ref.split())), (said, ref)


def test_a_pause_ends_a_segment_with_a_final(
    default_server: Running, two_sentences: tuple[bytes, float, list[str]]
) -> None:
    audio, pause_end, heard = two_sentences
    with connect(f"{default_server.ws}/v1/stream") as ws:
        ws.send(json.dumps({"type": "config", "sample_rate": 16000, "endpoint_ms": 500}))
        for i in range(0, len(audio), 3200):
            ws.send(audio[i : i + 3200])
        ws.send(json.dumps({"type": "eos"}))
        finals = [m for m in map(json.loads, ws) if m["type"] == "final"]
    spoken = [f for f in finals if f["text"]]
    assert len(spoken) == 2, finals
    assert_heard([f["text"] for f in spoken], heard)
    first, second = spoken
    assert first["start"] == 0.0 and 0 < second["start"] < pause_end
    assert first["words"][-1]["end"] <= second["start"] < second["words"][0]["start"]
    assert second["words"][0]["start"] >= pause_end - 0.3  # stream time, not segment time
    # each final's duration is its segment's length: they follow each other, not overlap,
    # and the last ends with the stream
    segments = [f for f in finals if f["duration"] > 0]
    for earlier, later in zip(segments, segments[1:], strict=False):
        assert later["start"] == pytest.approx(earlier["start"] + earlier["duration"], abs=1e-6)
    assert first["duration"] <= second["start"] and second["duration"] < len(audio) / 32000 - 1
    end = finals[-1]["start"] + finals[-1]["duration"]
    assert end == pytest.approx(len(audio) / 32000, abs=1e-3)  # times are in whole ms


def test_vosk_sends_a_result_at_the_pause(
    default_server: Running, two_sentences: tuple[bytes, float, list[str]]
) -> None:
    audio, _, heard = two_sentences
    replies = vosk_session(default_server.ws, audio)
    results = [r["text"] for r in replies if "result" in r and r["text"]]
    assert_heard(results, heard)
    assert len(replies) == -(-len(audio) // 8000) + 1  # one reply per frame, and one at eof
