"""Which letters does the network miss for one held-out voice more than for another?

Usage (repository root, after rescore/nbest.py WORK):
    python models/results/confidence/letters.py WORK VOICE OTHER

Greedy transcripts of the shipped pair's cached TTS dev outputs, aligned to their references
letter by letter; prints the error rate (substituted or deleted) of vowels, consonants and
spaces per voice, then the ten letters VOICE misses most more often than OTHER.
"""

from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

from models.metrics import greedy_decode
from models.results.rescore.nbest import load_outputs
from models.results.words.words import edits

VOWELS = set("aeiouy")


def kind(ch: str) -> str:
    return "space" if ch == " " else "vowel" if ch in VOWELS else "consonant"


def main(work: Path, voice: str, other: str) -> None:
    out = load_outputs(work)["tts_dev"]
    alphabet = list(out.config.alphabet)
    voices = [
        json.loads(line)["voice"] for line in Path("data/corpus/dev.jsonl").read_text().splitlines()
    ]
    seen: dict[str, Counter[str]] = defaultdict(Counter)
    miss: dict[str, Counter[str]] = defaultdict(Counter)
    for lp, ref, v in zip(out.log_probs, out.references, voices, strict=True):
        seen[v].update(ref)
        hyp = greedy_decode(lp, alphabet)
        miss[v].update(ref[i] for op, i in edits(ref, hyp) if op != "ins")
    for v in sorted(seen):
        rates = {}
        for k in ("vowel", "consonant", "space"):
            n = sum(c for ch, c in seen[v].items() if kind(ch) == k)
            rates[k] = round(100 * sum(c for ch, c in miss[v].items() if kind(ch) == k) / n, 1)
        print(json.dumps({"voice": v, **rates}))
    rows = []
    for ch in sorted(set(seen[voice]) - {" "}):
        a = miss[voice][ch] / seen[voice][ch]
        b = miss[other][ch] / max(1, seen[other][ch])
        rows.append((a - b, ch, a, b, seen[voice][ch]))
    for diff, ch, a, b, n in sorted(rows, reverse=True)[:10]:
        print(
            json.dumps(
                {
                    "letter": ch,
                    voice: round(100 * a, 1),
                    other: round(100 * b, 1),
                    "extra": round(100 * diff, 1),
                    "n": n,
                }
            )
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3])
