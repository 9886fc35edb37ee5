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
    """A trie of the keys; keys using symbols outside the alphabet are skipped."""
    children: list[dict[int, int]] = [{}]
    key_of: dict[int, int] = {}
    for index, key in enumerate(keys):
        if not key or any(c not in alphabet.symbols for c in key):
            continue
        node = 0
        for symbol in alphabet.encode(key).tolist():
            nxt = children[node].get(symbol)
            if nxt is None:
                nxt = len(children)
                children[node][symbol] = nxt
                children.append({})
            node = nxt
        key_of.setdefault(node, index)
    return _to_table(children, key_of, alphabet.size)


def _to_table(children: list[dict[int, int]], key_of: dict[int, int], vocab: int) -> Trie:
    table = np.full((len(children) + 1, vocab), -1, dtype=np.int32)
    for node, kids in enumerate(children):
        if kids:
            table[node, list(kids)] = list(kids.values())
    ends = np.zeros(len(children) + 1, dtype=bool)
    ends[list(key_of)] = True
    return Trie(table, ends, key_of)
