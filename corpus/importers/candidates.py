"""What every importer yields, and what all of them share: input checks, the error that
stops the command, and the one transcript normalisation, so imported text follows the same
conventions as synthesised text (`corpus.text.normalise`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from corpus.importers.report import Report
from corpus.text import Dropped, normalise

_MARKUP = re.compile(r"\[[^\]]*\]|<[^>]*>")  # Kaldi-style '[noise]', '<unk>'
_NON_SPEECH = {"noise", "laughter", "laugh", "sil", "silence", "breath", "cough", "music"}


class PrepareError(Exception):
    """A missing input or a wrong layout: `harken prepare: error: ...` and exit status 2."""


@dataclass(frozen=True)
class Candidate:
    """One utterance as a source describes it, before its text is normalised."""

    key: str  # utterance id, named in reports
    text: str  # transcript as the source writes it
    audio: str  # source path, or a shell command ending in '|' (Kaldi wav.scp)
    out: str  # output WAV, relative to OUT
    voice: str | None = None
    start: float = 0.0  # seconds into the recording (Kaldi segments)
    end: float | None = None  # None: to the end
    codec: str | None = None  # raw codec ffmpeg must be told ('g722': headerless)
    split: str = "all"


@dataclass(frozen=True)
class Item:
    """A candidate whose transcript normalised; `index` keeps manifests in source order."""

    index: int
    cand: Candidate
    text: str


def normalise_all(cands: list[Candidate], report: Report) -> list[Item]:
    items: list[Item] = []
    for cand in cands:
        try:
            text = normalise(strip_markup(cand.text)).text
        except Dropped as e:
            report.drop(f"text:{e.reason}", f"{cand.key}: {cand.text}")
            continue
        items.append(Item(len(items), cand, text))
    return items


def strip_markup(text: str) -> str:
    """Remove '[noise]'-style non-speech tags; raise `Dropped` for any other tag ('<unk>',
    '[inaudible]'), where words were spoken that the transcript does not give. The normaliser
    would otherwise read the tag as a word."""
    for tag in _MARKUP.findall(text):
        if tag[1:-1].strip().lower() not in _NON_SPEECH:
            raise Dropped("markup", repr(tag))
    return _MARKUP.sub(" ", text)


def need_dir(path: Path | None, what: str) -> Path:
    if path is None:
        raise PrepareError(f"--input is required: the {what}")
    if not path.is_dir():
        raise PrepareError(f"{what} {path} is not a directory")
    return path


def need_file(path: Path | None, what: str) -> Path:
    if path is None:
        raise PrepareError(f"--input is required: the {what}")
    if not path.is_file():
        raise PrepareError(f"{what} {path} does not exist")
    return path
