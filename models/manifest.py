"""Manifests: JSON Lines, one utterance a line, the data-set format every harken tool shares.

`{"audio": "path relative to the manifest", "text": "normalised transcript",
"duration": seconds (optional), "voice": "engine:voice" (optional)}`. The reader checks every
line and names the file, line and problem, because a corpus with one broken line should fail
loudly at load time, not hours into training.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.config import ALPHABET

_ALLOWED = frozenset(ALPHABET)
_KEYS = frozenset({"audio", "text", "duration", "voice"})


@dataclass(frozen=True)
class Utterance:
    audio: Path  # absolute (resolved against the manifest's directory when read)
    text: str  # transcript over the alphabet
    duration: float | None = None  # seconds
    voice: str | None = None  # 'engine:voice+variant' for synthetic speech


class ManifestError(ValueError):
    """A broken manifest line; the message says where and what to fix."""


def read_manifest(path: str | Path, check_audio: bool = False) -> list[Utterance]:
    """All utterances of a manifest; raises `ManifestError` naming the first broken line."""
    path = Path(path)
    base = path.resolve().parent
    out = []
    with path.open(encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                utt = _parse(line, base)
                if check_audio and not utt.audio.is_file():
                    raise ValueError(f"audio file {utt.audio} does not exist")
            except ValueError as e:
                raise ManifestError(f"{path}:{number}: {e}") from None
            out.append(utt)
    return out


def _parse(line: str, base: Path) -> Utterance:
    try:
        obj: Any = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({e.msg} at column {e.colno})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {type(obj).__name__}")
    if unknown := set(obj) - _KEYS:
        raise ValueError(f"unknown keys {sorted(unknown)}; allowed: {sorted(_KEYS)}")
    for key in ("audio", "text"):
        if not isinstance(obj.get(key), str) or not obj[key]:
            raise ValueError(f'"{key}" must be a non-empty string')
    if bad := set(obj["text"]) - _ALLOWED:
        raise ValueError(f'"text" has characters outside the alphabet: {sorted(bad)}')
    duration = obj.get("duration")
    if duration is not None and (
        isinstance(duration, bool) or not isinstance(duration, int | float) or duration <= 0
    ):
        raise ValueError(f'"duration" must be a positive number of seconds, got {duration!r}')
    voice = obj.get("voice")
    if voice is not None and not isinstance(voice, str):
        raise ValueError(f'"voice" must be a string, got {voice!r}')
    audio = base / obj["audio"]
    return Utterance(audio, obj["text"], None if duration is None else float(duration), voice)


def write_manifest(path: str | Path, utterances: Iterable[Utterance]) -> int:
    """Write atomically (temp file, then rename); audio paths are made relative to `path`."""
    path = Path(path)
    base = path.resolve().parent
    tmp = path.with_name(path.name + ".tmp")
    count = 0
    with tmp.open("w", encoding="utf-8") as f:
        for utt in utterances:
            row: dict[str, Any] = {"audio": os.path.relpath(utt.audio.resolve(), base)}
            row["text"] = utt.text
            if utt.duration is not None:
                row["duration"] = round(utt.duration, 3)
            if utt.voice is not None:
                row["voice"] = utt.voice
            f.write(json.dumps(row) + "\n")
            count += 1
    os.replace(tmp, path)
    return count
