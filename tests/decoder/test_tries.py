"""Lexicon tries: every key is found whole, nothing else is, and keys the alphabet cannot
spell are left out (the beam search's word constraint and hotwords rely on this)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from decoder.alphabet import Alphabet
from decoder.tries import Trie, build_trie, smear_max

ALPHABET = Alphabet.from_list([" ", "'", "a", "b", "c"])
WORDS = st.lists(st.text(alphabet="abc'x", max_size=5), max_size=30)


def walk(trie: Trie, text: str) -> int:
    node = 0
    for symbol in text:
        node = int(trie.next[node, ALPHABET.id_of(symbol)])
    return node


@settings(max_examples=200, deadline=None)
@given(WORDS, st.lists(st.text(alphabet="abc'", min_size=1, max_size=5), max_size=20))
def test_a_trie_finds_its_keys_and_nothing_else(keys: list[str], probes: list[str]) -> None:
    trie = build_trie(keys, ALPHABET)
    spellable = [k for k in keys if k and "x" not in k]  # "x" is outside the alphabet
    for key in spellable:
        end = walk(trie, key)
        assert end >= 0 and trie.ends[end]
        assert trie.key_of[end] == keys.index(key)  # the first of duplicates
    for probe in probes:
        end = walk(trie, probe)
        assert (end >= 0 and bool(trie.ends[end])) == (probe in spellable)
    prefixes = {k[:i] for k in spellable for i in range(1, len(k) + 1)}
    assert trie.nodes == 1 + len(prefixes)  # the root and one node per distinct prefix
    for prefix in prefixes:  # smear_max relies on the levels: a prefix of d symbols is at d
        depth = len(prefix)
        assert trie.levels[depth - 1] <= walk(trie, prefix) < trie.levels[depth]
    assert trie.levels[-1] == trie.nodes
    assert (trie.next[-1] == -1).all() and not trie.ends[-1]  # the dead state stays dead


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="abc", min_size=1, max_size=5), min_size=1, max_size=30), st.data()
)
def test_smearing_gives_each_prefix_its_best_completion(
    keys: list[str], data: st.DataObject
) -> None:
    """The look-ahead of a partial word is the best value of the keys it can still become."""
    values = data.draw(st.lists(st.floats(-30, 0), min_size=len(keys), max_size=len(keys)))
    trie = build_trie(keys, ALPHABET)
    best = smear_max(trie, values)
    first = {k: values[keys.index(k)] for k in keys}  # a duplicate key keeps its first value
    for prefix in {k[:i] for k in keys for i in range(1, len(k) + 1)}:
        below = [v for k, v in first.items() if k.startswith(prefix)]
        assert best[walk(trie, prefix)] == max(below)
    assert best[0] == max(first.values())  # the root: any word at all
    assert best[-1] == min(first.values())  # the dead state: no better than the least key
    assert np.isfinite(best).all()
