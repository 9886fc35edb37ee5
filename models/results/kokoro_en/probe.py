"""How the shipped network hears Kokoro's 28 English voices (npm kokoro-js), on sentences it has
trained on: the voice gap alone (as `voicegap/render.py` measured the held-out voices).

    .venv/bin/python models/results/kokoro_en/probe.py OUT [SENTENCES] [mix]

renders the first SENTENCES (default 8) sentences of data/corpus/train.jsonl in every English
voice (with `mix`: every mix of them, engine kokoro-en-mix) at 16 kHz into OUT/wav and writes OUT/manifest.jsonl; `harken eval --bundle models/default
--manifest OUT/manifest.jsonl` then reads them (its report breaks the error down by voice).

    .venv/bin/python models/results/kokoro_en/probe.py groups EVAL.json

prints that report's greedy CER (and a peer's WER, where it has one) by group (af, am, bf, bm)
and kind (pack or mix).
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


def _render(job: tuple[str, str, str, str]) -> dict[str, str | float]:
    engine, voice, text, wav = job
    audio = kokoro.synthesize(voice, text)
    audio = soxr.resample(audio, kokoro.SAMPLE_RATE, 16000).astype(np.float32)
    sf.write(wav, audio, 16000, subtype="PCM_16")
    return {
        "audio": wav,
        "text": text,
        "duration": round(len(audio) / 16000, 3),
        "voice": f"{engine}:{voice}",
    }


def groups(report: Path) -> None:
    """Errors summed by (group, kind): the group is the name's first two letters."""
    per = json.loads(report.read_text())["per_utterance"]
    peers = [k for k in per if k not in ("audio", "greedy")]
    sums: dict[tuple[str, str], list[int]] = {}
    for i, audio in enumerate(per["audio"]):
        name = Path(audio).stem.rsplit("_", 1)[0]
        kind = "mix" if "_mix" in name else "pack"
        for key in ((name[:2], kind), ("all", kind)):
            row = sums.setdefault(key, [0] * 4)
            greedy = per["greedy"][i]  # word errors, words, char errors, chars
            row[0] += greedy[2]
            row[1] += greedy[3]
            if peers:
                row[2] += per[peers[0]][i][0]
                row[3] += per[peers[0]][i][1]
    peer = f" {peers[0]} WER |" if peers else ""
    print(f"| group | kind | utterance-summed greedy CER |{peer}")
    print("| --- | --- | ---: |" + (" ---: |" if peers else ""))
    for (group, kind), row in sorted(sums.items()):
        cells = f" {100 * row[2] / row[3]:.2f}% |" if peers else ""
        print(f"| {group} | {kind} | {100 * row[0] / row[1]:.2f}% |{cells}")


def main() -> None:
    if sys.argv[1] == "groups":
        groups(Path(sys.argv[2]))
        return
    out = Path(sys.argv[1]).resolve()
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    mix = len(sys.argv) > 3 and sys.argv[3] == "mix"
    engine, names = ("kokoro-en-mix", kokoro.EN_MIXES) if mix else ("kokoro-en", kokoro.EN_VOICES)
    with open("data/corpus/train.jsonl") as f:
        texts = [json.loads(line)["text"] for _, line in zip(range(n), f, strict=False)]
    (out / "wav").mkdir(parents=True, exist_ok=True)
    jobs = [
        (engine, v, t, str(out / "wav" / f"{v}_{i:03d}.wav"))
        for v in names
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
