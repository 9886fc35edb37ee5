"""The prefix tree of one stream: every prefix the search has built, as columns of arrays.

A prefix is a node id; extending prefix `p` by symbol `c` always yields the same node, so
beams that reach the same text merge by id, and whatever was computed for a node (its LM
state and score, its place in the unigram and hotword tries) is cached for the stream's
life. The beam search gathers these columns with numpy; only node creation is per node.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
ROOT = 0

# column -> dtype; "score" is the prefix's whole non-acoustic part of Q
_COLUMNS: dict[str, Any] = {
    "parent": np.int64,  # parent node (-1 for the root)
    "char": np.int64,  # last symbol id (the root counts as ending in a space)
    "depth": np.int64,  # length of the prefix's text
    "score": np.float64,  # alpha * lm + beta * count + penalties + hotword bonuses
    "lm": np.float64,  # ln p_lm of the completed tokens
    "count": np.int64,  # completed words (word LM) or characters (character LM)
    "w": np.int64,  # unigram-trie node of the partial word (0: empty, -1: no such word)
    "wlen": np.int64,  # length of the partial word
    "h": np.int64,  # hotword-trie node (0: at a boundary, -1: no match until the next one)
    "pen": np.float64,  # partial-word penalty included in score
    "hotb": np.float64,  # tentative hotword bonus included in score
    "entry": np.float64,  # best log mass seen entering it by its last symbol (for timing)
    "frame": np.int64,  # frame of that best entry (-1: never entered the beam)
    "clogp": np.float64,  # log posterior of its last symbol at that frame
}


class PrefixTree:
    """Nodes with array columns (see `_COLUMNS`) plus text, partial word and LM state."""

    def __init__(self, alphabet: Alphabet, root_state: Hashable, capacity: int = 1024):
        self.alphabet = alphabet
        self.size = 0
        self.cols: dict[str, npt.NDArray[Any]] = {
            k: np.zeros(capacity, dtype=t) for k, t in _COLUMNS.items()
        }
        self.text: list[str] = []
        self.word: list[str] = []
        self.state: list[Hashable] = []
        self._children: dict[int, int] = {}
        self._add_root(root_state)

    def _add_root(self, root_state: Hashable) -> None:
        self.size = 1
        for key in _COLUMNS:
            self.cols[key][0] = 0
        self.cols["parent"][0] = -1
        self.cols["char"][0] = self.alphabet.space
        self.cols["frame"][0] = -1
        self.cols["entry"][0] = -np.inf
        self.text.append("")
        self.word.append("")
        self.state.append(root_state)

    def find(self, parent: int, char: int) -> int:
        """The child of `parent` by `char`, or -1 if it was never built."""
        return self._children.get(parent * self.alphabet.size + char, -1)

    def add_many(
        self,
        parents: I64,
        chars: I64,
        states: list[Hashable] | None = None,
        words: list[str] | None = None,
        **cols: Any,
    ) -> I64:
        """New children of `parents` by `chars` (none may exist yet); returns their ids."""
        n = len(parents)
        self._reserve(self.size + n)
        ids = np.arange(self.size, self.size + n, dtype=np.int64)
        for key, col in self.cols.items():
            col[ids] = cols[key] if key in cols else col[parents]
        self.cols["parent"][ids] = parents
        self.cols["char"][ids] = chars
        self.cols["depth"][ids] = self.cols["depth"][parents] + 1
        self.cols["frame"][ids] = -1
        self.cols["entry"][ids] = -np.inf
        self._append_lists(parents.tolist(), chars.tolist(), states, words)
        v = self.alphabet.size
        self._children.update(zip((parents * v + chars).tolist(), ids.tolist(), strict=True))
        self.size += n
        return ids

    def _append_lists(
        self,
        parents: list[int],
        chars: list[int],
        states: list[Hashable] | None,
        words: list[str] | None,
    ) -> None:
        symbols = self.alphabet.symbols
        for i, (p, c) in enumerate(zip(parents, chars, strict=True)):
            self.text.append(self.text[p] + symbols[c - 1])
            self.word.append(words[i] if words is not None else self.word[p] + symbols[c - 1])
            self.state.append(states[i] if states is not None else self.state[p])

    def _reserve(self, needed: int) -> None:
        capacity = len(self.cols["parent"])
        if needed <= capacity:
            return
        capacity = max(needed, 2 * capacity)
        for key, col in self.cols.items():
            grown = np.zeros(capacity, dtype=col.dtype)
            grown[: self.size] = col[: self.size]
            self.cols[key] = grown

    def path(self, node: int, top: int = ROOT) -> list[int]:
        """Node ids from below `top` (an ancestor, by default the root) down to `node`."""
        out: list[int] = []
        parent = self.cols["parent"]
        while node != top and node > ROOT:
            out.append(node)
            node = int(parent[node])
        return out[::-1]

    def common_ancestor(self, nodes: I64) -> int:
        """The deepest node that is `nodes`' common ancestor (or one of them)."""
        depth, parent = self.cols["depth"], self.cols["parent"]
        nodes = np.unique(nodes)
        while len(nodes) > 1:
            d = depth[nodes]
            nodes = np.unique(np.where(d == d.max(), parent[nodes], nodes))
        return int(nodes[0])
