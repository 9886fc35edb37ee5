"""Sentences from Debian's fortune files, normalised, with a count of everything left out.

Fortunes are short texts separated by lines holding a single '%'. They carry attributions
('-- Mark Twain'), dialog labels ('Q:', 'Knucklehead:'), headings, poems and ASCII art; this
module turns them into speakable sentences and says how many of each kind it dropped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from corpus.text import ABBREVIATIONS, Dropped, Normalised, normalise

FORTUNE_DIR = Path("/usr/share/games/fortunes")
SKIP_FILES = frozenset({"ascii-art"})  # pictures, not text
SKIP_DIRS = frozenset({"off"})  # Debian's offensive fortunes: never read

# '\t\t-- Groucho Marx' on its own line, or '...not.  -William Shakespeare' after the text
_ATTRIBUTION = re.compile(r"^\s*--\s*\S|(?:\s{2,}|\t)--?\s*[A-Z]")
_LABEL = re.compile(r"^\s*[A-Z][A-Za-z .']{0,20}:\s+")  # 'Q:  ', 'Pee Wee:\t'
_ART = re.compile(r"[^\w\s.!?,;:'\"()-]{3,}|[-=_~*#]{4,}|\S {5,}\S|[|\\/]{2}")
_END = re.compile(r"[.!?]+[\"')\]]*\s+(?=[\"'(\[]*[A-Z0-9])")


@dataclass(frozen=True)
class TextConfig:
    min_words: int = 3  # shorter sentences give too little speech to learn from
    max_words: int = 30  # longer ones make utterances over ~12 s that pad batches badly

    def __post_init__(self) -> None:
        if not 1 <= self.min_words <= self.max_words:
            raise ValueError("need 1 <= min_words <= max_words in TextConfig")


def fortune_files(root: Path = FORTUNE_DIR) -> list[Path]:
    """Every plain fortune file under `root`, skipping index (.dat), .u8 links and offensive."""
    if not root.is_dir():
        raise FileNotFoundError(f"{root} does not exist; install Debian's fortunes package")
    files = [
        p
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and not p.is_symlink()
        and p.suffix not in (".dat", ".u8")
        and p.name not in SKIP_FILES
        and not SKIP_DIRS & set(p.relative_to(root).parts[:-1])
    ]
    return files


def entries(path: Path) -> Iterator[str]:
    """The fortunes in one file, overstriking ('_\\bA') removed."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    raw = re.sub(r".\x08", "", raw)
    chunk: list[str] = []
    for line in raw.splitlines():
        if line.strip() == "%":
            yield "\n".join(chunk)
            chunk = []
        else:
            chunk.append(line)
    if chunk:
        yield "\n".join(chunk)


def is_art(entry: str) -> bool:
    """Pictures, tables and code: runs of symbols or columns of spaces."""
    return any(_ART.search(line.strip()) for line in entry.splitlines())


def blocks(entry: str) -> list[str]:
    """Paragraphs, headings and dialog turns, attribution cut off; sentences never cross a
    block. A change of indentation starts a block ('marriage, n.:' then its indented text)."""
    out: list[list[str]] = []
    indent = ""
    for line in entry.splitlines():
        attribution = _ATTRIBUTION.search(line)
        if attribution:
            line = line[: attribution.start()]
        label = _LABEL.match(line)
        text = line[label.end() :] if label else line
        this_indent = line[: len(line) - len(line.lstrip())]
        if not line.strip():
            out.append([])
        elif label or this_indent != indent or not out:
            out.append([text.strip()])
        else:
            out[-1].append(text.strip())
        indent = this_indent if line.strip() else indent
        if attribution:
            break
    return [" ".join(b) for b in out if b]


def split_sentences(block: str) -> list[str]:
    """Split at . ! ? before a capital, but not after an abbreviation or an initial."""
    sentences, start = [], 0
    for m in _END.finditer(block):
        word = block[: m.start() + 1].rsplit(None, 1)[-1].lstrip("\"'(")
        if word.lower() in ABBREVIATIONS or re.fullmatch(r"[A-Z]\.", word):
            continue
        sentences.append(block[start : m.end()].strip())
        start = m.end()
    sentences.append(block[start:].strip())
    return [s for s in sentences if s]


def collect(files: list[Path], cfg: TextConfig) -> tuple[list[Normalised], Counter[str]]:
    """Unique normalised sentences of all files, in file order, and counts of what was dropped."""
    counts: Counter[str] = Counter()
    seen: dict[str, Normalised] = {}
    for path in files:
        for entry in entries(path):
            counts["entries"] += 1
            if is_art(entry):
                counts["dropped_entry_art_or_code"] += 1
                continue
            for block in blocks(entry):
                for raw in split_sentences(block):
                    _keep(raw, cfg, counts, seen)
    counts["kept"] = len(seen)
    return list(seen.values()), counts


def collect_lines(files: list[Path], cfg: TextConfig) -> tuple[list[Normalised], Counter[str]]:
    """Like `collect`, for plain text of one sentence a line (`harken lm-text`'s output, say):
    more sentences for a corpus once the fortunes are spent."""
    counts: Counter[str] = Counter()
    seen: dict[str, Normalised] = {}
    for path in files:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    _keep(line.strip(), cfg, counts, seen)
    counts["kept"] = len(seen)
    return list(seen.values()), counts


def _keep(raw: str, cfg: TextConfig, counts: Counter[str], seen: dict[str, Normalised]) -> None:
    counts["sentences"] += 1
    try:
        sentence = normalise(raw)
    except Dropped as e:
        counts[f"dropped_{e.reason}"] += 1
        return
    if sentence.words < cfg.min_words:
        counts["dropped_too_short"] += 1
    elif sentence.words > cfg.max_words:
        counts["dropped_too_long"] += 1
    elif sentence.text in seen:
        counts["dropped_duplicate"] += 1
    else:
        seen[sentence.text] = sentence
