"""How the shipped network hears Kokoro's 28 English voices (npm kokoro-js), on sentences it has
trained on: the voice gap alone (as `voicegap/render.py` measured the held-out voices).

    .venv/bin/python models/results/kokoro_en/probe.py OUT [SENTENCES]

renders the first SENTENCES (default 8) sentences of data/corpus/train.jsonl in every English
voice at 16 kHz into OUT/wav and writes OUT/manifest.jsonl; `harken eval --bundle models/default
--manifest OUT/manifest.jsonl` then reads them (its report breaks the error down by voice).
"""

from __future__ import annotations

import json
import sys
from multiprocessing import Pool
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from corpus import kokoro


def _render(job: tuple[str, str, str]) -> dict[str, str | float]:
    voice, text, wav = job
    audio = kokoro.synthesize(voice, text)
    audio = soxr.resample(audio, kokoro.SAMPLE_RATE, 16000).astype(np.float32)
    sf.write(wav, audio, 16000, subtype="PCM_16")
    return {
        "audio": wav,
        "text": text,
        "duration": round(len(audio) / 16000, 3),
        "voice": f"kokoro-en:{voice}",
    }


def main() -> None:
    out = Path(sys.argv[1]).resolve()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    with open("data/corpus/train.jsonl") as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(n), f, strict=False)]
    (out / "wav").mkdir(parents=True, exist_ok=True)
    jobs = [
        (v, t, str(out / "wav" / f"{v}_{i:03d}.wav"))
        for v in kokoro.EN_VOICES
        for i, t in enumerate(texts)
    ]
    with Pool(2) as pool:
        rows = pool.map(_render, jobs)
    with open(out / "manifest.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    minutes = sum(float(r["duration"]) for r in rows) / 60
    print(f"{len(rows)} clips, {minutes:.1f} min -> {out}")


if __name__ == "__main__":
    main()
