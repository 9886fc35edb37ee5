"""Dictations for a load test of streams that adapt to their speakers (models/results/speaker.md).

Usage: python models/results/speaker/long.py MANIFEST OUT_DIR

A load-test stream is one manifest line; a TTS dev utterance (3.6 s on average) never reaches
the 15 s at which a stream fits its first profile. So each voice's utterances, in manifest
order, are joined with 0.5 s of silence into dictations of just over a minute (the last
shorter rest of each voice is left out); their text is the utterances' texts joined.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import numpy.typing as npt
import soundfile as sf

from models.manifest import Utterance, read_manifest

RATE, GAP_S, MIN_S = 16000, 0.5, 62.0


def main() -> None:
    manifest, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    by_voice: dict[str | None, list[Utterance]] = defaultdict(list)
    for u in read_manifest(manifest):
        by_voice[u.voice].append(u)
    gap = np.zeros(int(GAP_S * RATE), np.float32)
    lines: list[str] = []
    for voice, utts in by_voice.items():
        pieces: list[npt.NDArray[np.float32]] = []
        texts: list[str] = []
        for u in utts:
            audio, rate = sf.read(str(u.audio), dtype="float32")
            if rate != RATE:
                raise SystemExit(f"{u.audio}: {rate} Hz, expected {RATE}")
            pieces += [audio, gap]
            texts.append(u.text)
            seconds = sum(len(p) for p in pieces) / RATE
            if seconds >= MIN_S:
                path = out / f"{str(voice).replace(':', '_')}_{len(lines)}.wav"
                sf.write(path, np.concatenate(pieces), RATE, subtype="PCM_16")
                line = {"audio": str(path), "text": " ".join(texts), "duration": seconds}
                lines.append(json.dumps({**line, "voice": voice}))
                pieces, texts = [], []
    (out / "long.jsonl").write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} dictations in {out / 'long.jsonl'}")


if __name__ == "__main__":
    main()
