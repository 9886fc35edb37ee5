"""The other Debian texts that models/results/lm.md weighed against WordNet (not shipped).

    python models/results/lm/other_texts.py DEB_ROOT OUT_DIR HELD_OUT.jsonl...

DEB_ROOT is where the packages were unpacked without installing them (the dict-* packages
would pull in a dictd server, and fortune packages would change `harken synth`'s plan):

    apt-get download debian-handbook dict-devil dict-jargon dict-gcide fortune-anarchism \
        fortunes-bofh-excuses && for f in *.deb; do dpkg-deb -x $f DEB_ROOT; done

Each text goes through `corpus.lm_text.collect` with the same held-out filter as
`harken lm-text`, and lands in OUT_DIR/NAME.txt.
"""

from __future__ import annotations

import gzip
import re
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

from corpus.fortunes import blocks, entries, is_art
from corpus.lm_text import HeldOut, collect
from models.manifest import read_manifest

BLOCK_TAGS = {"p", "li", "div", "h1", "h2", "h3", "dd", "dt", "td"}
CODE_TAGS = {"pre", "code", "script", "style", "table"}


class Prose(HTMLParser):
    """An HTML page's running text, a block at a time; code and tables left out."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[str] = []
        self.current: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.skip += tag in CODE_TAGS
        if tag in BLOCK_TAGS:
            self.flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in CODE_TAGS:
            self.skip = max(0, self.skip - 1)
        if tag in BLOCK_TAGS:
            self.flush()

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.current.append(data)

    def flush(self) -> None:
        text = "".join(self.current).strip()
        self.current = []
        if text:
            self.blocks.append(text)


def handbook(root: Path) -> Iterator[str]:
    for page in sorted((root / "usr/share/doc/debian-handbook/html/en-US").glob("*.html")):
        parser = Prose()
        parser.feed(page.read_text(errors="replace"))
        parser.flush()
        yield from parser.blocks


def dictionary(root: Path, name: str) -> Iterator[str]:
    """A dictd database's entries (dictzip is gzip-compatible), a paragraph at a time."""
    with gzip.open(root / f"usr/share/dictd/{name}.dict.dz") as f:
        text = f.read().decode("utf-8", "replace")
    yield from re.split(r"\n\s*\n", text)


def fortunes(root: Path, name: str) -> Iterator[str]:
    for entry in entries(root / "usr/share/games/fortunes" / name):
        if not is_art(entry):
            yield from blocks(entry)


def main(root: Path, out: Path, held_out: list[str]) -> None:
    held = HeldOut([u.text for m in held_out for u in read_manifest(m)])
    sources = {
        "handbook": handbook(root),
        "devil": dictionary(root, "devil"),
        "jargon": dictionary(root, "jargon"),
        "gcide": dictionary(root, "gcide"),
        "anarchism": fortunes(root, "anarchism"),
        "bofh-excuses": fortunes(root, "bofh-excuses"),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, raw in sources.items():
        result = collect(raw, held)
        (out / f"{name}.txt").write_text("".join(s + "\n" for s in result.sentences))
        report = result.report(held_out)
        print(name, report["kept"], "sentences,", report["words"], "words")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:])
