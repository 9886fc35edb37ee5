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
    """next[node, symbol_id] -> node or -1; node 0 is the root; ends[node] marks whole keys.
    Nodes are numbered level by level (every parent before its children): the nodes at depth
    d are `levels[d - 1]` up to `levels[d]`, ordered by parent."""

    next: I32  # [nodes + 1, V]; the last row is all -1 (the dead state)
    ends: npt.NDArray[np.bool_]  # [nodes + 1]; ends[-1] is False
    key_of: dict[int, int]  # end node -> index of the key (in the input order) ending there
    levels: tuple[int, ...]  # first node of each depth from 1, then the node count

    @property
    def nodes(self) -> int:
        return int(self.next.shape[0]) - 1


def build_trie(keys: Iterable[str], alphabet: Alphabet) -> Trie:
    """A trie of the keys; keys using symbols outside the alphabet are skipped. Every decoder
    process builds its lexicons' at start (63,750 and 72,270 words for models/default), so
    it is built a level at a time on arrays: the keys' symbols in one array, and per depth
    one `np.unique` of (parent, symbol) pairs, instead of a Python step per character."""
    keys = list(keys)
    size = alphabet.size
    lengths = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
    # a lone surrogate in a key becomes a code point outside any alphabet: that key is skipped
    text = "".join(keys).encode("utf-32-le", errors="surrogatepass")
    codes = np.frombuffer(text, dtype=np.uint32)
    ids = np.full(max(int(codes.max(initial=0)), *map(ord, alphabet.symbols)) + 1, -1, np.int64)
    ids[[ord(s) for s in alphabet.symbols]] = [alphabet.id_of(s) for s in alphabet.symbols]
    symbols_of = ids[codes]
    starts = np.cumsum(lengths) - lengths
    unknown = np.concatenate([[0], np.cumsum(symbols_of < 0)])
    spelt = np.nonzero((lengths > 0) & (unknown[starts + lengths] == unknown[starts]))[0]
    length, start = lengths[spelt], starts[spelt]
    node = np.zeros(len(spelt), dtype=np.int64)  # each spellable key's node at this depth
    parents: list[npt.NDArray[np.int64]] = []
    symbols: list[npt.NDArray[np.int64]] = []
    levels = [1]
    for depth in range(int(length.max(initial=0))):
        going = np.nonzero(length > depth)[0]
        pairs, into = np.unique(
            node[going] * size + symbols_of[start[going] + depth], return_inverse=True
        )
        parents.append(pairs // size)
        symbols.append(pairs % size)
        node[going] = levels[-1] + into
        levels.append(levels[-1] + len(pairs))
    count = levels[-1]  # nodes, the root included
    table = np.full((count + 1, size), -1, dtype=np.int32)
    if parents:
        table[np.concatenate(parents), np.concatenate(symbols)] = np.arange(1, count)
    ends_at, first = np.unique(node, return_index=True)  # spelt is ascending: the first key
    order = np.argsort(first, kind="stable")
    key_of = dict(zip(ends_at[order].tolist(), spelt[first[order]].tolist(), strict=True))
    ends = np.zeros(count + 1, dtype=bool)
    ends[ends_at] = True
    return Trie(table, ends, key_of, tuple(levels))


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
    # a level at a time from the deepest: its nodes are ordered by parent, so each parent's
    # children are one run, and the best of a run is one reduceat
    for lo, hi in reversed(list(zip(trie.levels[:-1], trie.levels[1:], strict=True))):
        up = parent[lo:hi]
        runs = np.concatenate([[0], np.nonzero(np.diff(up))[0] + 1])
        heads = up[runs]
        best[heads] = np.maximum(best[heads], np.maximum.reduceat(best[lo:hi], runs))
    best[n] = floor
    return best
