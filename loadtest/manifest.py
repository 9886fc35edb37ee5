"""The utterances every load mode streams (sweeps, `--soak`, `--profile`), read from a
manifest of JSON Lines `{"audio": ..., "text": ...}` as mono PCM16 at their own rate."""

from __future__ import annotations

import json
from pathlib import Path

from loadtest.client import Utterance


def load_manifest(path: Path, limit: int, max_seconds: float) -> list[Utterance]:
    """Up to `limit` utterances of at most `max_seconds`, as mono PCM16 at their own rate."""
    import soundfile as sf

    if not path.is_file():
        raise ValueError(f"manifest {path} does not exist")
    utterances: list[Utterance] = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if len(utterances) >= limit:
            break
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            audio, rate = sf.read(path.parent / entry["audio"], dtype="int16", always_2d=True)
        except (ValueError, KeyError, TypeError, RuntimeError, OSError) as e:
            raise ValueError(f"{path}:{number}: cannot read this entry ({e})") from None
        mono = audio.mean(axis=1).astype("<i2") if audio.shape[1] > 1 else audio[:, 0]
        utt = Utterance(mono.astype("<i2").tobytes(), int(rate), entry["text"], entry["audio"])
        if 0 < utt.duration <= max_seconds:
            utterances.append(utt)
    if not utterances:
        raise ValueError(f"{path} has no readable utterance of at most {max_seconds:g} s")
    return utterances
