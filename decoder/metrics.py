"""Word and character error rates (Levenshtein distance over tokens), shared by every
package that reports accuracy."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def edit_distance(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Minimum substitutions + insertions + deletions turning `ref` into `hyp`."""
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, start=1):
        diag, row[0] = row[0], i
        for j, h in enumerate(hyp, start=1):
            diag, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diag + (r != h))
    return row[-1]


@dataclass(frozen=True)
class ErrorRate:
    errors: int
    length: int  # reference tokens

    @property
    def rate(self) -> float:
        """errors / reference length (0 for an empty reference with no errors)."""
        return self.errors / self.length if self.length else float(self.errors > 0)


def wer(pairs: Iterable[tuple[str, str]]) -> ErrorRate:
    """Corpus WER over (reference, hypothesis) pairs: total errors / total words."""
    return _rate((r.split(), h.split()) for r, h in pairs)


def cer(pairs: Iterable[tuple[str, str]]) -> ErrorRate:
    """Corpus CER over (reference, hypothesis) pairs, spaces normalised."""
    return _rate((list(" ".join(r.split())), list(" ".join(h.split()))) for r, h in pairs)


def _rate(pairs: Iterable[tuple[Sequence[str], Sequence[str]]]) -> ErrorRate:
    errors = length = 0
    for ref, hyp in pairs:
        errors += edit_distance(ref, hyp)
        length += len(ref)
    return ErrorRate(errors, length)
