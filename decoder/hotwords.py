"""Hotwords: phrases a request wants recognised more readily, each with a boost.

A beam whose text ends in the start of a phrase (begun at a word boundary) carries part
of its boost, in proportion to the characters matched, so that the phrase survives the
pruning while it is being spelt; the whole boost is kept once the phrase is complete and
followed by a word boundary (or the end of the utterance). A broken match gives back its
tentative bonus.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet
from decoder.tries import Trie, build_trie

F64 = npt.NDArray[np.float64]
HotwordSpec = Sequence[str | tuple[str, float]] | Mapping[str, float]


@dataclass(frozen=True)
class Hotwords:
    """Per-stream tables over a trie of the phrases; index -1 is the dead state."""

    trie: Trie
    partial: F64  # [nodes + 1]: tentative bonus of a beam whose match reached this node
    full: F64  # [nodes + 1]: bonus kept when the phrase ending here completes (0 elsewhere)


def build_hotwords(spec: HotwordSpec, alphabet: Alphabet, default_boost: float) -> Hotwords:
    """Validate and compile a request's hotwords."""
    pairs = _pairs(spec, default_boost)
    for phrase, boost in pairs:
        bad = sorted({c for c in phrase if c not in alphabet.symbols})
        if bad or not phrase:
            raise ValueError(
                f"hotword {phrase!r} must be non-empty normalised text (symbols of the "
                f"alphabet only); it has {bad!r}"
            )
        if not (np.isfinite(boost) and boost > 0):
            raise ValueError(f"hotword {phrase!r} needs a positive finite boost, got {boost}")
    trie = build_trie([p for p, _ in pairs], alphabet)
    partial = np.zeros(trie.nodes + 1)
    full = np.zeros(trie.nodes + 1)
    for phrase, boost in pairs:
        node = 0
        for depth, symbol in enumerate(alphabet.encode(phrase).tolist(), start=1):
            node = int(trie.next[node, symbol])
            partial[node] = max(partial[node], boost * depth / len(phrase))
        full[node] = max(full[node], boost)
    return Hotwords(trie, partial, full)


def _pairs(spec: HotwordSpec, default_boost: float) -> list[tuple[str, float]]:
    items = spec.items() if isinstance(spec, Mapping) else spec
    out: list[tuple[str, float]] = []
    for item in items:
        phrase, boost = (item, default_boost) if isinstance(item, str) else item
        out.append((" ".join(phrase.split()), float(boost)))
    return out
