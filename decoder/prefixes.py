"""The prefix tree of one stream: every prefix the search has built, as columns of arrays.

A prefix is a node id; extending prefix `p` by symbol `c` always yields the same node, so
beams that reach the same text merge by id, and whatever was computed for a node (its LM
state and score, its place in the unigram and hotword tries) is cached for the stream's
life. Children are found through a dense table `kids[node, symbol]`, so the search looks
up every beam's every candidate with one numpy gather, and new nodes are added in bulk
without a Python object per node: only LM states (one per word boundary) live in a dict.
Texts are spelt on demand by walking up the parents.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet

I32 = npt.NDArray[np.int32]
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
    "lmnode": np.int64,  # the node whose LM state is this one's (the last boundary)
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
    """Nodes with array columns (see `_COLUMNS`), a child table and boundary LM states."""

    def __init__(self, alphabet: Alphabet, root_state: Hashable, capacity: int = 1024):
        self.alphabet = alphabet
        self._symbols = ("", *alphabet.symbols)  # by symbol id
        self.size = 1
        self.cols: dict[str, npt.NDArray[Any]] = {
            k: np.zeros(capacity, dtype=t) for k, t in _COLUMNS.items()
        }
        self.kids: I32 = np.full((capacity, alphabet.size), -1, dtype=np.int32)
        self.states: dict[int, Hashable] = {ROOT: root_state}  # by boundary node id
        self.slot: I64 = np.full(capacity, -1, dtype=np.int64)  # scratch for the search:
        # a node's index among the beams while a frame is stepped, else -1
        cols = self.cols
        cols["parent"][ROOT], cols["char"][ROOT] = -1, alphabet.space
        cols["frame"][ROOT], cols["entry"][ROOT] = -1, -np.inf

    def children(self, parents: I64, chars: I64) -> I64:
        """Children of `parents` by `chars` (broadcast together); -1 where never built."""
        return self.kids[parents, chars].astype(np.int64)

    def add_many(self, parents: I64, chars: I64, **cols: Any) -> I64:
        """New children of `parents` by `chars` (none may exist yet); columns not given are
        inherited from the parent. Returns their ids."""
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
        self.kids[parents, chars] = ids
        self.size += n
        return ids

    def _reserve(self, needed: int) -> None:
        capacity = len(self.cols["parent"])
        if needed <= capacity:
            return
        capacity = max(needed, 2 * capacity)
        for key, col in self.cols.items():
            grown = np.zeros(capacity, dtype=col.dtype)
            grown[: self.size] = col[: self.size]
            self.cols[key] = grown
        kids = np.full((capacity, self.alphabet.size), -1, dtype=np.int32)
        kids[: self.size] = self.kids[: self.size]
        self.kids = kids
        self.slot = np.full(capacity, -1, dtype=np.int64)

    def state(self, node: int) -> Hashable:
        """The LM state after the prefix's completed tokens."""
        return self.states[int(self.cols["lmnode"][node])]

    def path(self, node: int, top: int = ROOT) -> list[int]:
        """Node ids from below `top` (an ancestor, by default the root) down to `node`."""
        out: list[int] = []
        parent = self.cols["parent"]
        while node != top and node > ROOT:
            out.append(node)
            node = int(parent[node])
        return out[::-1]

    def text(self, node: int, top: int = ROOT) -> str:
        """The text spelt from below `top` (an ancestor) down to `node`."""
        return "".join([self._symbols[c] for c in self.cols["char"][self.path(node, top)]])

    def word(self, node: int) -> str:
        """The partial word at the end of the prefix (after its last space)."""
        char, parent, symbols = self.cols["char"], self.cols["parent"], self._symbols
        out: list[str] = []
        for _ in range(int(self.cols["wlen"][node])):
            out.append(symbols[char[node]])
            node = parent[node]
        return "".join(reversed(out))

    def common_ancestor(self, nodes: I64) -> int:
        """The deepest node that is `nodes`' common ancestor (or one of them)."""
        depth, parent = self.cols["depth"], self.cols["parent"]
        nodes = np.unique(nodes)
        while len(nodes) > 1:
            d = depth[nodes]
            nodes = np.unique(np.where(d == d.max(), parent[nodes], nodes))
        return int(nodes[0])
