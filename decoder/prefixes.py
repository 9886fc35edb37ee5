"""The prefix tree of one stream: every prefix the search has built, as columns of arrays.

A prefix is a node id; extending prefix `p` by symbol `c` always yields the same node, so
beams that reach the same text merge by id, and whatever was computed for a node (its LM
state and score, its place in the unigram and hotword tries) is cached for the stream's
life. Children are found through a dense table `kids[node, symbol]`, and the columns are
those of two matrices (`ints`, `floats` [nodes, columns]), so the compiled step
(decoder/kernels.py) reads and grows the tree through a handful of arrays; only LM states
(one per word boundary) live in a dict. Texts are spelt on demand by walking up the parents.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet
from decoder.kernels import (
    FLOAT_COLUMNS,
    INT_COLUMNS,
    common_ancestor,
    mark_ancestors,
    path,
    spell,
)

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
ROOT = 0

# the columns (their order is decoder/kernels.py's); "score" is the prefix's whole
# non-acoustic part of Q
_MEANINGS = {
    "parent": "parent node (-1 for the root)",
    "char": "last symbol id (the root counts as ending in a space)",
    "depth": "length of the prefix's text",
    "count": "completed words (word LM) or characters (character LM)",
    "lmnode": "the node whose LM state is this one's (the last boundary)",
    "w": "unigram-trie node of the partial word (0: empty, -1: no such word)",
    "wlen": "length of the partial word",
    "h": "hotword-trie node (0: at a boundary, -1: no match until the next one)",
    "frame": "frame of the best entry (-1: never entered the beam)",
    "score": "alpha * lm + beta * count + penalties + hotword bonuses",
    "lm": "ln p_lm of the completed tokens",
    "pen": "partial-word penalty or look-ahead included in score",
    "hotb": "tentative hotword bonus included in score",
    "entry": "best log mass seen entering it by its last symbol (for timing)",
    "clogp": "log posterior of its last symbol at that frame",
}
assert set(_MEANINGS) == {*INT_COLUMNS, *FLOAT_COLUMNS}


class PrefixTree:
    """Nodes with array columns (see `_MEANINGS`), a child table and boundary LM states."""

    def __init__(self, alphabet: Alphabet, root_state: Hashable, capacity: int = 1024):
        self.alphabet = alphabet
        self._symbols = ("", *alphabet.symbols)  # by symbol id
        self._codes = np.array([0, *map(ord, alphabet.symbols)], dtype=np.int32)
        self.size = 1
        self.ints: I64 = np.zeros((capacity, len(INT_COLUMNS)), dtype=np.int64)
        self.floats: F64 = np.zeros((capacity, len(FLOAT_COLUMNS)))
        self.kids: I32 = np.full((capacity, alphabet.size), -1, dtype=np.int32)
        self.slot: I64 = np.full(capacity, -1, dtype=np.int64)  # scratch for the search:
        # a node's index among the beams while a frame is stepped, else -1
        self.cols: dict[str, npt.NDArray[Any]] = {}
        self._views()
        self.states: dict[int, Hashable] = {ROOT: root_state}  # by boundary node id
        cols = self.cols
        cols["parent"][ROOT], cols["char"][ROOT] = -1, alphabet.space
        cols["frame"][ROOT], cols["entry"][ROOT] = -1, -np.inf

    def _views(self) -> None:
        """`cols[name]`: that column of `ints` or `floats` (a view)."""
        self.cols = {k: self.ints[:, i] for i, k in enumerate(INT_COLUMNS)}
        self.cols.update({k: self.floats[:, i] for i, k in enumerate(FLOAT_COLUMNS)})

    @property
    def capacity(self) -> int:
        return len(self.ints)

    def reserve(self, extra: int) -> None:
        """Make room for `extra` more nodes (the compiled step never reallocates). The
        capacity doubles, in powers of two, so that a stream's tree meets the compaction
        threshold (decoder/beam.py COMPACT_MIN_NODES) with room to spare."""
        capacity = self.capacity
        needed = self.size + extra
        if needed <= capacity:
            return
        capacity = 1 << (max(needed, 2 * capacity) - 1).bit_length()
        n = self.size
        ints = np.zeros((capacity, len(INT_COLUMNS)), dtype=np.int64)
        floats = np.zeros((capacity, len(FLOAT_COLUMNS)))
        kids = np.full((capacity, self.alphabet.size), -1, dtype=np.int32)
        ints[:n], floats[:n], kids[:n] = self.ints[:n], self.floats[:n], self.kids[:n]
        self.ints, self.floats, self.kids = ints, floats, kids
        self.slot = np.full(capacity, -1, dtype=np.int64)
        self._views()

    def compact(self, live: I64) -> I64:
        """Drop every node no later frame can touch, and return the new ids of all nodes
        (-1: dropped). Kept: the ancestors of the `live` beams (texts, timings and commits
        walk up) and their descendants (a dropped extension of a live beam can come back, and
        keeps its history when it does), so the search goes on exactly as without this.
        Without it the tree grows with every prefix ever kept: about 1 GB in 6 minutes of
        speech at a 768-wide beam. Node 0 stays the root. Done in place, keeping the
        capacity: new arrays would cost a stream's chunk tens of ms of page faults, and the
        tree would only grow back (experiments/decoder/stalls.md)."""
        keep = np.zeros(self.size, dtype=bool)
        keep[ROOT] = True
        mark_ancestors(self.ints, np.asarray(live, dtype=np.int64), keep)
        frontier = np.unique(live)
        while frontier.size:
            below = self.kids[frontier].ravel()
            below = below[below >= 0]
            frontier = below[~keep[below]]
            keep[frontier] = True
        old = np.flatnonzero(keep)
        new_id = np.full(self.size, -1, dtype=np.int64)
        n = len(old)
        new_id[old] = np.arange(n)
        # old is ascending, so row i moves to a row <= i: gather, then clear what is left
        self.ints[:n], self.floats[:n], self.kids[:n] = (
            self.ints[old],
            self.floats[old],
            self.kids[old],
        )
        self.ints[n : self.size], self.floats[n : self.size], self.kids[n : self.size] = 0, 0, -1
        self.size = n
        kids = self.kids[:n]
        kids[kids >= 0] = new_id[kids[kids >= 0]]  # children dropped here become -1
        for name in ("parent", "lmnode"):
            ids = self.cols[name][:n]
            ids[ids >= 0] = new_id[ids[ids >= 0]]
        # tens of thousands of LM states: renumbered with numpy, not one Python int at a time
        nodes = np.fromiter(self.states, dtype=np.int64, count=len(self.states))
        alive = np.flatnonzero(keep[nodes]).tolist()
        states = list(self.states.values())
        self.states = dict(
            zip(new_id[nodes[alive]].tolist(), [states[i] for i in alive], strict=True)
        )
        return new_id

    def path(self, node: int, top: int = ROOT) -> I64:
        """Node ids from below `top` (an ancestor, by default the root) down to `node`."""
        return path(self.ints, node, top)

    def texts(self, nodes: I64, top: int = ROOT) -> list[str]:
        """The texts spelt from below `top` (an ancestor of them all) down to `nodes`."""
        depth = self.cols["depth"]
        return self._spell(nodes, depth[nodes] - depth[top])

    def words(self, nodes: I64) -> list[str]:
        """The partial words at the end of the prefixes (after their last space)."""
        return self._spell(nodes, self.cols["wlen"][nodes])

    def _spell(self, nodes: I64, lengths: I64) -> list[str]:
        codes, ends = spell(self.ints, self._codes, nodes, lengths)
        text = codes.astype("<i4", copy=False).tobytes().decode("utf-32-le")
        return [text[a:b] for a, b in zip([0, *ends[:-1].tolist()], ends.tolist(), strict=True)]

    def common_ancestor(self, nodes: I64) -> int:
        """The deepest node that is `nodes`' common ancestor (or one of them)."""
        if not len(nodes):
            raise ValueError("no nodes")
        return int(common_ancestor(self.ints, nodes))
