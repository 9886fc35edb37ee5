"""The first 200 training sentences spoken by the three held-out voices, in turn, for
evaluation only (models/results/voicegap.md): is the held-out voices' error the voices or the
new text?

Usage: python models/results/voicegap/render.py OUT_DIR
then   harken eval --bundle models/default --manifest OUT_DIR/manifest.jsonl --out REPORT.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from corpus.voices import HELD_OUT, Prosody, render


def main() -> None:
    out = Path(sys.argv[1])
    (out / "wav").mkdir(parents=True, exist_ok=True)
    with open("data/corpus/train.jsonl") as f:
        rows = [json.loads(line) for line, _ in zip(f, range(200), strict=False)]
    with open(out / "manifest.jsonl", "w") as manifest:
        for i, row in enumerate(rows):
            voice = HELD_OUT[i % len(HELD_OUT)]
            wav = out / "wav" / f"{i:03d}_{voice.engine}_{voice.name}.wav"
            render(voice, row["text"], Prosody(), wav)
            line = {"audio": str(wav), "text": row["text"], "voice": f"{voice.engine}:{voice.name}"}
            manifest.write(json.dumps(line) + "\n")
    print(f"{len(rows)} utterances in {out / 'manifest.jsonl'}")


if __name__ == "__main__":
    main()
