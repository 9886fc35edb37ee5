"""The non-acoustic part of Q for prefixes: LM, insertion bonus, penalties, hotwords.

Q(y) = log p_ctc(y|x) + alpha log p_lm(y) + beta count(y), where count is the number of
words for a word LM (and without an LM) and of characters for a character LM (DS2 §3.8,
§3.9); plus a penalty for words outside the LM's vocabulary, a penalty while the partial
word is no prefix of any unigram (growing with the word's length past AVG_WORD, so that
a run of garbage cannot postpone its LM cost for free), and the hotword bonuses. With a
look-ahead, a partial word that is a unigram's prefix pays a share of the best unigram
score it could still reach instead of nothing; both stand in the prefix's `pen` column, so
the word's real LM score replaces them when it ends.

Most extensions of a word-level search add a letter to a partial word: their scores need
only trie lookups, which the compiled step does (decoder/kernels.py) with the tables this
scorer holds. Extensions that reach the LM (a space for a word LM, every symbol for a
character LM) are looked up here, one Python call per token (`boundary`); the prefix tree
caches the result for the stream's life.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet
from decoder.hotwords import Hotwords, build_hotwords
from decoder.kernels import TOK_CHAR, TOK_PARENT, add_boundary
from decoder.lm import CHAR_SPACE, LanguageModel
from decoder.prefixes import PrefixTree
from decoder.tries import Trie

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Weights:
    """The scalars of Q other than the acoustic score (see DecoderConfig for meanings)."""

    alpha: float
    beta: float
    unk_penalty: float
    prefix_penalty: float


@dataclass(frozen=True)
class _TokenEnds:
    """What completing tokens (words, or characters for a character LM) adds, per token."""

    score: F64  # alpha * lm + beta + unknown-word penalty
    lm: F64
    states: list[Hashable]


class PrefixScorer:
    """Scores new prefixes of one stream; the LM and unigram trie are shared, hotwords not."""

    def __init__(
        self,
        alphabet: Alphabet,
        weights: Weights,
        lm: LanguageModel | None,
        unigrams: Trie | None,
        hotwords: Hotwords | None,
        look: F64 | None = None,
    ):
        self.alphabet = alphabet
        self.weights = weights
        self.lm = lm
        self.unigrams = unigrams
        self.hot = hotwords or build_hotwords((), alphabet, 1.0)
        self.char_level = lm is not None and lm.unit == "char"
        self._symbols = ("", *alphabet.symbols)
        # symbols that complete a token: every one for a character LM, else the space
        self.is_boundary = np.zeros(alphabet.size, dtype=bool)
        self.is_boundary[1:] = self.char_level
        self.is_boundary[alphabet.space] = True
        # the unigram trie's table (without unigrams, every partial word stays at node 0)
        empty = np.zeros((1, alphabet.size), dtype=np.int32)
        self.unigram_next = empty if unigrams is None else unigrams.next
        # what a partial word at each unigram-trie node adds to Q (DecoderConfig lookahead)
        self.unigram_look = np.zeros(len(self.unigram_next)) if look is None else look
        if len(self.unigram_look) != len(self.unigram_next):
            raise ValueError("look-ahead scores must have one row per unigram-trie row")
        # the most a boundary can add to its parent's score (less its penalty and tentative
        # bonus): ln p_lm <= 0 and the unknown-word penalty <= 0, so only beta and the
        # largest hotword bonuses can raise it; inf (no bound) for a negative alpha
        extra = weights.beta + self.hot.full.max() + self.hot.partial.max()
        self.bound_extra = float(extra) if weights.alpha >= 0 else np.inf

    def root_state(self) -> Hashable:
        return self.lm.begin() if self.lm is not None else None

    def boundary(self, tree: PrefixTree, tok: I64, ef: F64, ei: I64) -> None:
        """Build the boundary children a frame needs (decoder/kernels.py `tok`: a space, or
        any symbol for a character LM), scoring each completed token with the LM."""
        lms, known, states = self._lookup(tree, tok[TOK_PARENT], tok[TOK_CHAR])
        first, hot, wts = tree.size, self.hot, self.weights
        tree.size = add_boundary(
            tree.ints, tree.floats, tree.kids, tree.size, tok, lms, known, ef, ei,
            self.alphabet.space, hot.trie.next, hot.trie.ends, hot.partial, hot.full,
            wts.alpha, wts.beta, wts.unk_penalty,
        )  # fmt: skip
        tree.states.update(zip(range(first, tree.size), states, strict=True))

    def finals(self, tree: PrefixTree, nodes: I64) -> tuple[F64, F64]:
        """(score, lm) of prefixes taken as the whole utterance: the last word completed,
        tentative hotword bonus dropped (or kept whole if the phrase is complete), </s>."""
        cols, space = tree.cols, self.alphabet.space
        if self.char_level:  # a trailing space is no part of the text
            trailing = (nodes > 0) & (cols["char"][nodes] == space)
            nodes = np.where(trailing, cols["parent"][nodes], nodes)
        score = (cols["score"][nodes] - cols["hotb"][nodes]) + self.hot.full[cols["h"][nodes]]
        lm = cols["lm"][nodes]
        states = [tree.states[n] for n in cols["lmnode"][nodes].tolist()]
        ends = np.flatnonzero(cols["wlen"][nodes] > 0) if not self.char_level else nodes[:0]
        if ends.size:
            done = nodes[ends]
            end = self._token_ends(tree, done, np.full(ends.size, space))
            score[ends] += end.score - cols["pen"][done]
            lm[ends] += end.lm
            for i, state in zip(ends.tolist(), end.states, strict=True):
                states[i] = state
        if self.lm is not None:
            eos = np.array([self.lm.finish(state) for state in states])
            score += self.weights.alpha * eos
            lm += eos
        return score, lm

    def _token_ends(self, tree: PrefixTree, nodes: I64, chars: I64) -> _TokenEnds:
        """Scores the tokens that `chars` complete after `nodes` (one LM query each)."""
        wts = self.weights
        lms, known, states = self._lookup(tree, nodes, chars)
        known |= self.hot.trie.ends[tree.cols["h"][nodes]]
        unk = np.where(known, 0.0, wts.unk_penalty)
        return _TokenEnds(wts.alpha * lms + wts.beta + unk, lms, states)

    def _lookup(
        self, tree: PrefixTree, nodes: I64, chars: I64
    ) -> tuple[F64, npt.NDArray[np.bool_], list[Hashable]]:
        """(ln p_lm, known, next LM state) of the tokens `chars` complete after `nodes`;
        without an LM, known means a unigram (or anything, without unigrams)."""
        lm = self.lm
        if lm is None:
            w = tree.cols["w"][nodes]
            known = np.ones(len(nodes), bool) if self.unigrams is None else self.unigrams.ends[w]
            return np.zeros(len(nodes)), known, [None] * len(nodes)
        if self.char_level:
            symbols, space = self._symbols, self.alphabet.space
            tokens = [CHAR_SPACE if c == space else symbols[c] for c in chars.tolist()]
        else:
            tokens = tree.words(nodes)
        states = tree.states
        lmnode = tree.cols["lmnode"][nodes].tolist()
        scored = [lm.score(states[n], t) for n, t in zip(lmnode, tokens, strict=True)]
        lms = np.array([s[0] for s in scored])
        known = np.array([s[2] for s in scored], dtype=bool)
        return lms, known, [s[1] for s in scored]
