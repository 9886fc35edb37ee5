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

from decoder.alphabet import BLANK
from decoder.metrics import edit_distance
from evaluation.model_outputs import F32
from models.results.rescore.nbest import load_outputs

VOWELS = set("aeiouy")


def greedy(log_probs: F32, alphabet: list[str]) -> str:
    """Best path, repeats merged and blanks dropped."""
    out, prev = [], -1
    for i in log_probs.argmax(axis=1).tolist():
        if i != prev and i != BLANK:
            out.append(alphabet[i - 1])
        prev = i
    return "".join(out).strip()


def missed(ref: str, hyp: str) -> list[int]:
    """Positions of `ref` that a minimal alignment substitutes or deletes."""
    n, m = len(ref), len(hyp)
    d = [[i + j if i == 0 or j == 0 else 0 for j in range(m + 1)] for i in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(
                d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1])
            )
    assert d[n][m] == edit_distance(list(ref), list(hyp))
    i, j, out = n, m, []
    while i > 0 or j > 0:
        if i > 0 and j > 0 and d[i][j] == d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            if ref[i - 1] != hyp[j - 1]:
                out.append(i - 1)
            i, j = i - 1, j - 1
        elif i > 0 and d[i][j] == d[i - 1][j] + 1:
            out.append(i - 1)
            i -= 1
        else:
            j -= 1
    return out


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
        miss[v].update(ref[i] for i in missed(ref, greedy(lp, alphabet)))
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
