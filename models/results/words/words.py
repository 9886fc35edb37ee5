"""Where a model's word errors come from: substitutions, deletions, insertions, and whether
deleted words were glued onto a neighbour (a hypothesis word equal to two reference words
joined) or simply dropped. Written to check the fifteenth session's "the stage glues words".

Usage: python models/results/words/words.py MANIFEST TRANSCRIPTS.jsonl...  (README.md beside it)
TRANSCRIPTS: `harken transcribe --bundle B --decoder beam FILE...` output for MANIFEST's audio
(absolute paths, as the manifest's folder joined with its `audio`).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path


def edits(ref: Sequence[str], hyp: Sequence[str]) -> list[tuple[str, int]]:
    """One minimal alignment's edits, last first: ("sub", i) or ("del", i) at reference
    position i, ("ins", j) at hypothesis position j (ties prefer a match or substitution, then
    a deletion). Tokens may be words or letters."""
    n, m = len(ref), len(hyp)
    d = [[i + j if i == 0 or j == 0 else 0 for j in range(m + 1)] for i in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i][j] = min(
                d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]), d[i - 1][j] + 1, d[i][j - 1] + 1
            )
    out: list[tuple[str, int]] = []
    i, j = n, m
    while i > 0 or j > 0:
        if i and j and d[i][j] == d[i - 1][j - 1] + (ref[i - 1] != hyp[j - 1]):
            if ref[i - 1] != hyp[j - 1]:
                out.append(("sub", i - 1))
            i, j = i - 1, j - 1
        elif i and d[i][j] == d[i - 1][j] + 1:
            out.append(("del", i - 1))
            i -= 1
        else:
            out.append(("ins", j - 1))
            j -= 1
    return out


def alignment(ref: list[str], hyp: list[str]) -> tuple[int, int, int, list[str]]:
    """Substitutions, deletions, insertions of one minimal word alignment, and the deleted
    reference words."""
    ops = edits(ref, hyp)
    dels = [ref[i] for kind, i in ops if kind == "del"]
    subs = sum(kind == "sub" for kind, _ in ops)
    return subs, len(dels), sum(kind == "ins" for kind, _ in ops), dels


def main() -> None:
    manifest, outputs = Path(sys.argv[1]), sys.argv[2:]
    refs = {}
    for line in manifest.open():
        row = json.loads(line)
        refs[str((manifest.parent / row["audio"]).resolve())] = row["text"].split()
    print(
        "| transcripts | hyp / ref words | S | D | I | WER | joined | split | deleted, <= 3 letters | most deleted |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for path in outputs:
        s = dl = ins = words = hyp_words = joined = split = 0
        deleted: Counter[str] = Counter()
        for line in Path(path).read_text().splitlines():
            row = json.loads(line)
            ref, hyp = refs[str(Path(row["file"]).resolve())], row["text"].split()
            a, b, c, gone = alignment(ref, hyp)
            s, dl, ins, words, hyp_words = (
                s + a,
                dl + b,
                ins + c,
                words + len(ref),
                hyp_words + len(hyp),
            )
            deleted.update(gone)
            joined += sum(w in {x + y for x, y in zip(ref, ref[1:], strict=False)} for w in hyp)
            split += sum(w in {x + y for x, y in zip(hyp, hyp[1:], strict=False)} for w in ref)
        short = sum(v for k, v in deleted.items() if len(k) <= 3)
        top = ", ".join(f"{k} {v}" for k, v in deleted.most_common(5))
        print(
            f"| {Path(path).name} | {hyp_words / words:.3f} | {s / words:.2%} | {dl / words:.2%} "
            f"| {ins / words:.2%} | {(s + dl + ins) / words:.2%} | {joined} | {split} | {short} of {dl} | {top} |"
        )


if __name__ == "__main__":
    main()
