"""A real server on the shared tiny random bundle (tests/conftest.py), and a small manifest for it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import soundfile as sf

from server.config import ServerConfig
from tests.server.serving import Running, make_audio, running

# (seconds, sample rate, seed, text): short utterances at rates the server resamples
UTTERANCES = [
    (1.0, 16000, 0, "the thought police are here"),
    (0.8, 22050, 1, "what are you doing"),
    (1.2, 8000, 2, "look what a lot of things there are to learn"),
]


@pytest.fixture(scope="session")
def manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("manifest")
    lines = []
    for i, (seconds, rate, seed, text) in enumerate(UTTERANCES):
        sf.write(root / f"u{i}.wav", make_audio(seconds, rate, seed), rate, subtype="PCM_16")
        lines.append(json.dumps({"audio": f"u{i}.wav", "text": text, "duration": seconds}))
    path = root / "test.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def server(tiny_bundle: Path) -> Iterator[Running]:  # noqa: F811
    """Room for every test's streams; tests that need rejections start their own."""
    with running(
        ServerConfig(dtype="fp32", bundle=str(tiny_bundle), chunk_ms=80, max_streams=8)
    ) as r:
        yield r
