"""Word error rate of finals against the manifest's transcripts (a local edit distance, so
that loadtest depends on no other package of ours)."""

from __future__ import annotations

import re
from collections.abc import Iterable

_NOT_WORD = re.compile(r"[^\w' ]+")


def words(text: str) -> list[str]:
    """Lower case, punctuation other than apostrophes dropped, split on whitespace."""
    return _NOT_WORD.sub(" ", text.lower()).split()


def edit_distance(ref: list[str], hyp: list[str]) -> int:
    """Levenshtein distance over words (substitutions, insertions, deletions cost 1)."""
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        diagonal, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (r != h))
    return row[-1]


def wer(pairs: Iterable[tuple[str, str]]) -> float | None:
    """Corpus WER of (reference, hypothesis) pairs: total edits / total reference words;
    None when there are no reference words."""
    edits = total = 0
    for ref, hyp in pairs:
        r = words(ref)
        edits += edit_distance(r, words(hyp))
        total += len(r)
    return edits / total if total else None
