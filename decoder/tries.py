"""Character tries as dense transition tables, so the beam search can step every beam
through them with one numpy gather instead of a Python loop.

A table has one row per trie node plus a last row of -1: the dead state is -1, and
numpy's `table[-1]` is that row, so dead stays dead without a branch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet

I32 = npt.NDArray[np.int32]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Trie:
    """next[node, symbol_id] -> node or -1; node 0 is the root; ends[node] marks whole keys."""

    next: I32  # [nodes + 1, V]; the last row is all -1 (the dead state)
    ends: npt.NDArray[np.bool_]  # [nodes + 1]; ends[-1] is False
    key_of: dict[int, int]  # end node -> index of the key (in the input order) ending there

    @property
    def nodes(self) -> int:
        return int(self.next.shape[0]) - 1


def build_trie(keys: Iterable[str], alphabet: Alphabet) -> Trie:
    """A trie of the keys; keys using symbols outside the alphabet are skipped. Nodes are
    numbered in the order keys first reach them. Every decoder process builds its lexicons'
    at start (63,750 and 72,270 words for models/default), so the loop is kept lean: one dict
    lookup per character, the table filled in one numpy assignment (0.2 s a lexicon, from 1.1:
    experiments/loadtest/warmup)."""
    ids = {symbol: alphabet.id_of(symbol) for symbol in alphabet.symbols}
    children: list[dict[int, int]] = [{}]
    parents: list[int] = []  # per node after the root: its parent, and the symbol into it
    symbols: list[int] = []
    key_of: dict[int, int] = {}
    for index, key in enumerate(keys):
        try:
            path = [ids[c] for c in key]
        except KeyError:
            continue
        if not path:
            continue
        node = 0
        for symbol in path:
            kids = children[node]
            nxt = kids.get(symbol)
            if nxt is None:
                nxt = kids[symbol] = len(children)
                children.append({})
                parents.append(node)
                symbols.append(symbol)
            node = nxt
        key_of.setdefault(node, index)
    table = np.full((len(children) + 1, alphabet.size), -1, dtype=np.int32)
    table[parents, symbols] = np.arange(1, len(children), dtype=np.int32)
    ends = np.zeros(len(children) + 1, dtype=bool)
    ends[list(key_of)] = True
    return Trie(table, ends, key_of)


def smear_max(trie: Trie, key_values: npt.ArrayLike) -> F64:
    """Per node, the largest value among the keys below it (itself included), from
    `key_values` in the order the keys were given to `build_trie`; the dead row gets the
    smallest of them all (a prefix of no key is worth no more than the least key).
    A partial word's LM look-ahead: the best any completion of it could score. Every node
    of a trie has a key below it, so every value is one of the keys'."""
    values = np.asarray(key_values, dtype=np.float64)
    n = trie.nodes
    best = np.full(n + 1, -np.inf)
    ends = np.fromiter(trie.key_of, dtype=np.int64, count=len(trie.key_of))
    best[ends] = values[np.fromiter(trie.key_of.values(), dtype=np.int64, count=len(ends))]
    floor = best[ends].min() if ends.size else 0.0
    parent = np.full(n, -1, dtype=np.int64)
    rows, symbols = np.nonzero(trie.next[:n] >= 0)
    parent[trie.next[rows, symbols]] = rows
    # build_trie numbers a node after its parent, so one pass from the last node up suffices
    for node in range(n - 1, 0, -1):
        up = parent[node]
        if best[node] > best[up]:
            best[up] = best[node]
    best[n] = floor
    return best
