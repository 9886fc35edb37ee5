"""What each of the voice-pack layouts (`hedgewars`, `megaglest`, `kde_words`, `codec2`) yields
to `corpus.importers.packs`: one recording, its voice, and its text where the package's file
names give it. Kept apart from `packs` so the layouts do not import the command that runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import soundfile as sf

from corpus.importers.report import Report


@dataclass(frozen=True)
class PackClip:
    """One recording, before its label."""

    key: str  # unique over all packages; starts with the source ('hedgewars-Pirate-Hello')
    path: Path  # audio soundfile reads (the package's own file, or a WAV written under OUT)
    seconds: float
    voice: str  # 'source:voice'; the split moves whole voices
    text: str | None = None  # the file name's words, when they are the label


def seconds_of(path: Path) -> float | None:
    """A recording's duration from its header, or None when soundfile cannot read it."""
    try:
        return float(sf.info(str(path)).duration)
    except (sf.LibsndfileError, RuntimeError, OSError):
        return None


def drop(report: Report, source: str, reason: str, example: str) -> None:
    """Count a drop in the report and in its source's own tally (`by_source` in the report)."""
    report.drop(reason, example)
    tally = report.notes.setdefault("by_source", {}).setdefault(source, {})
    dropped = tally.setdefault("dropped", {})
    dropped[reason] = dropped.get(reason, 0) + 1
