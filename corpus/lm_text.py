"""`harken lm-text`: general English for the language model, beside the corpus's own sentences.

The corpus's `lm_text.txt` holds the fortune sentences that dev and test do not use, about
300,000 words and 22,000 distinct ones, so every other word a person says is out of the LM's
vocabulary and the decoder can only spell it. WordNet's glosses and usage examples (Debian's
`wordnet-base`, 1.5 million words of plain definitions like "a person who is fond of
company") widen the vocabulary roughly fivefold. `harken build-lm --text lm_text.txt*3
wordnet.txt` keeps the in-domain sentences the heavier side of the mixture.

Every sentence goes through `corpus.text.normalise`, as transcripts do. A sentence that shares
any run of `NGRAM` words with a held-out transcript (`--held-out`: the dev and test manifests),
or that contains a whole shorter one, is dropped: the LM must not have read the test. The
report beside the output counts what was kept and dropped, and why.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from corpus.fortunes import split_sentences
from corpus.text import Dropped, normalise
from models.manifest import read_manifest

WORDNET_DIR = Path("/usr/share/wordnet")  # Debian's wordnet-base
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
NGRAM = 6  # shared word runs this long or longer count as the held-out text itself
MIN_WORDS, MAX_WORDS = 3, 40


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="text file to write")
    parser.add_argument(
        "--wordnet",
        type=Path,
        default=WORDNET_DIR,
        help=f"WordNet database directory (Debian's wordnet-base: {WORDNET_DIR})",
    )
    parser.add_argument(
        "--held-out",
        nargs="+",
        default=[],
        metavar="MANIFEST",
        help="manifests whose transcripts the LM must not read (dev and test sets)",
    )


def main(args: argparse.Namespace) -> int:
    files = [args.wordnet / name for name in WORDNET_FILES]
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise SystemExit(
            f"WordNet's database is missing ({', '.join(missing)}); install Debian's "
            "wordnet-base (scripts/setup.sh --synth does) or pass --wordnet"
        )
    held: list[str] = []
    for manifest in args.held_out:
        try:
            held += [u.text for u in read_manifest(manifest)]
        except (OSError, ValueError) as e:
            raise SystemExit(f"--held-out {manifest}: {e}") from None
    result = collect(wordnet_glosses(files), HeldOut(held))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(s + "\n" for s in result.sentences), encoding="utf-8")
    report = report_path(args.out)
    report.write_text(json.dumps(result.report(args.held_out), indent=2) + "\n")
    words = sum(len(s.split()) for s in result.sentences)
    print(
        f"wrote {args.out}: {len(result.sentences)} sentences, {words} words, "
        f"{result.vocabulary} distinct; what was dropped and why: {report}"
    )
    return 0


def report_path(out: Path) -> Path:
    return out.with_name(out.stem + ".report.json")


def wordnet_glosses(files: Iterable[Path]) -> Iterator[str]:
    """Each definition and quoted example of every synset, raw.

    A synset line ends in ' | ' and its gloss: definitions and "examples" separated by ';'.
    The licence header's lines start with spaces."""
    for path in files:
        with path.open(encoding="latin-1") as f:  # WordNet 3.0's files are Latin-1
            for line in f:
                if line.startswith(" ") or " | " not in line:
                    continue
                for part in line.split(" | ", 1)[1].split(";"):
                    part = part.strip().strip('"').strip()
                    if part:
                        yield part


class HeldOut:
    """Held-out transcripts, to recognise text that contains or overlaps them."""

    def __init__(self, transcripts: Iterable[str], n: int = NGRAM) -> None:
        self.n = n
        self.grams: set[tuple[str, ...]] = set()
        short: set[str] = set()
        for t in transcripts:
            words = t.split()
            if len(words) < n:
                short.add(" ".join(words))
            self.grams.update(_ngrams(words, n))
        pattern = "|".join(re.escape(f" {s} ") for s in sorted(short) if s)
        self.short = re.compile(pattern) if pattern else None

    def overlaps(self, sentence: str) -> bool:
        if any(g in self.grams for g in _ngrams(sentence.split(), self.n)):
            return True
        return bool(self.short and self.short.search(f" {sentence} "))


def _ngrams(words: list[str], n: int) -> Iterator[tuple[str, ...]]:
    return (tuple(words[i : i + n]) for i in range(len(words) - n + 1))


@dataclass
class Collected:
    sentences: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    @property
    def vocabulary(self) -> int:
        return len({w for s in self.sentences for w in s.split()})

    def report(self, held_out: list[str]) -> dict[str, object]:
        return {
            "kept": len(self.sentences),
            "words": sum(len(s.split()) for s in self.sentences),
            "vocabulary": self.vocabulary,
            "counts": dict(sorted(self.counts.items())),
            "held_out": held_out,
            "ngram": NGRAM,
        }


def collect(raw: Iterable[str], held: HeldOut) -> Collected:
    """Normalised, de-duplicated sentences of `raw`, none overlapping the held-out text."""
    out = Collected()
    seen: set[str] = set()
    for text in raw:
        for sentence in split_sentences(" ".join(text.split())):
            out.counts["sentences"] += 1
            try:
                s = normalise(sentence).text
            except Dropped as e:
                out.counts[f"dropped_{e.reason}"] += 1
                continue
            words = len(s.split())
            if words < MIN_WORDS:
                out.counts["dropped_too_short"] += 1
            elif words > MAX_WORDS:
                out.counts["dropped_too_long"] += 1
            elif s in seen:
                out.counts["dropped_duplicate"] += 1
            elif held.overlaps(s):
                out.counts["dropped_held_out_overlap"] += 1
            else:
                seen.add(s)
                out.sentences.append(s)
    return out
