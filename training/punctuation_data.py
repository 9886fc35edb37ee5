"""Written sentences as the punctuation model learns them: each word as the recogniser would
spell it, with the mark that follows it and its case.

A raw token becomes one or more transcript words through the project's normaliser
(`models/text.py`: '1961,' -> 'nineteen sixty one' + comma), so the model reads exactly the
words the recogniser writes. Marks fold to the four the model writes: '!' to '.', ';' ':'
and dashes to ','. The documents come from `harken punctuation-text` (one JSON line each:
`{"name", "sentences"}`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from models.punctuation import CASES, MARKS
from models.text import ABBREVIATIONS, fold, normalise_phrase

_LEADING = "\"'([{`"
_TRAILING_QUOTES = "\"')]}`"
_MARK_CHARS = ".,;:!?"
_DASH = re.compile(r"^-{2,}$|^\u2014$")


@dataclass(frozen=True)
class Labelled:
    """One word of written text: as the recogniser spells it, its mark and case ids."""

    word: str
    mark: int  # index into MARKS
    case: int  # index into CASES


@dataclass
class Document:
    """Consecutive sentences from one source text (a Brown sample, a fortune)."""

    name: str
    sentences: list[list[Labelled]] = field(default_factory=list)

    @property
    def words(self) -> int:
        return sum(len(s) for s in self.sentences)


@dataclass
class TextStats:
    documents: int = 0
    sentences: int = 0
    words: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    mixed: Counter[tuple[str, str]] = field(default_factory=Counter)  # ('iphone', 'iPhone')


def _mark_of(trailing: str) -> int:
    if "?" in trailing:
        return MARKS.index("?")
    if "." in trailing or "!" in trailing:
        return MARKS.index(".")
    if any(c in trailing for c in ",;:"):
        return MARKS.index(",")
    return 0


def _case_of(core: str) -> int:
    letters = [c for c in core if c.isalpha()]
    if not letters:
        return CASES.index("lower")
    if len(letters) > 1 and all(c.isupper() for c in letters):
        return CASES.index("upper")
    return CASES.index("title") if letters[0].isupper() else CASES.index("lower")


def label_sentence(raw: str, stats: TextStats) -> list[Labelled]:
    """A raw sentence as labelled transcript words; [] when it is not usable prose."""
    tokens = fold(raw).split()
    letters = [c for c in raw if c.isalpha()]
    if letters and sum(c.isupper() for c in letters) > 0.6 * len(letters):
        stats.dropped["shouting"] += 1
        return []
    out: list[Labelled] = []
    for i, token in enumerate(tokens):
        if _DASH.match(token):
            _add_mark(out, MARKS.index(","))
            continue
        core = token.lstrip(_LEADING)
        trailing = ""
        while core and (core[-1] in _MARK_CHARS or core[-1] in _TRAILING_QUOTES):
            trailing = core[-1] + trailing
            core = core[:-1]
        if core.endswith("-"):  # 'well--' glued dash
            core, trailing = core.rstrip("-"), trailing + ","
        last = i == len(tokens) - 1
        if (core + ".").lower() in ABBREVIATIONS and trailing.startswith(".") and not last:
            core, trailing = core + ".", trailing[1:]
        words = normalise_phrase(core).split() if core else []
        mark = _mark_of(trailing)
        if not words:
            _add_mark(out, mark)
            continue
        case = _case_of(core)
        simple = (core.lower(), core.capitalize(), core.upper())
        if len(words) == 1 and core.lower() == words[0] and core not in simple:  # 'McDonald'
            stats.mixed[(words[0], core)] += 1
            case = CASES.index("title")  # not lower: the mixed form is then looked up
        for j, w in enumerate(words):
            c = case if (j == 0 or case == CASES.index("upper")) else CASES.index("lower")
            out.append(Labelled(w, mark if j == len(words) - 1 else 0, c))
    if len(out) < 2:
        stats.dropped["short"] += 1
        return []
    return out


def _add_mark(out: list[Labelled], mark: int) -> None:
    """A mark with no word of its own goes on the word before (the stronger mark wins)."""
    if out and mark and _STRENGTH[mark] > _STRENGTH[out[-1].mark]:
        out[-1] = Labelled(out[-1].word, mark, out[-1].case)


_STRENGTH = {0: 0, MARKS.index(","): 1, MARKS.index("."): 2, MARKS.index("?"): 3}


def read_documents(path: Path, stats: TextStats) -> list[Document]:
    """A `harken punctuation-text` file, each sentence labelled (unusable ones counted)."""
    docs = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            raw = json.loads(line)
            doc = Document(raw["name"])
            for sentence in raw["sentences"]:
                labelled = label_sentence(sentence, stats)
                if labelled:
                    doc.sentences.append(labelled)
            if doc.sentences:
                stats.documents += 1
                stats.sentences += len(doc.sentences)
                stats.words += doc.words
                docs.append(doc)
    return docs


def mixed_forms(stats: TextStats, min_count: int = 2) -> dict[str, str]:
    """Words whose usual written form is neither lower, Title nor UPPER ('McDonald')."""
    best: dict[str, tuple[int, str]] = {}
    for (word, form), n in stats.mixed.items():
        if n >= min_count and n > best.get(word, (0, ""))[0]:
            best[word] = (n, form)
    return {w: form for w, (_, form) in best.items()}
