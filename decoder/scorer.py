"""The non-acoustic part of Q for prefixes: LM, insertion bonus, penalties, hotwords.

Q(y) = log p_ctc(y|x) + alpha log p_lm(y) + beta count(y), where count is the number of
words for a word LM (and without an LM) and of characters for a character LM (DS2 §3.8,
§3.9); plus a penalty for words outside the LM's vocabulary, a penalty while the partial
word is no prefix of any unigram (growing with the word's length past AVG_WORD, so that
a run of garbage cannot postpone its LM cost for free), and the hotword bonuses.

Most extensions of a word-level search add a letter to a partial word: their scores need
only trie lookups, done for all beams at once with numpy (`extend`). Extensions that reach
the LM (a space for a word LM, every symbol for a character LM) go one prefix at a time
(`boundary`); the prefix tree caches the result for the stream's life.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet
from decoder.hotwords import Hotwords, build_hotwords
from decoder.lm import CHAR_SPACE, LanguageModel
from decoder.prefixes import PrefixTree
from decoder.tries import Trie

AVG_WORD = 6.0  # characters; longer impossible partial words pay proportionally more
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
    ):
        self.alphabet = alphabet
        self.weights = weights
        self.lm = lm
        self.unigrams = unigrams
        self.hot = hotwords or build_hotwords((), alphabet, 1.0)
        self.char_level = lm is not None and lm.unit == "char"
        space = alphabet.space
        ids = np.arange(1, alphabet.size)
        self.boundary_ids = ids if self.char_level else np.array([space])
        self.is_boundary = np.isin(np.arange(alphabet.size), self.boundary_ids)

    def root_state(self) -> Hashable:
        return self.lm.begin() if self.lm is not None else None

    def extend(
        self, tree: PrefixTree, parents: I64, chars: I64
    ) -> dict[str, npt.NDArray[np.generic]]:
        """Columns of the children of `parents` by non-boundary `chars` (same shapes)."""
        cols = tree.cols
        w = cols["w"][parents]
        h2 = self.hot.trie.next[cols["h"][parents], chars].astype(np.int64)
        w2 = np.zeros_like(w) if self.unigrams is None else self.unigrams.next[w, chars]
        w2 = w2.astype(np.int64)
        wlen2 = cols["wlen"][parents] + 1
        scale = np.maximum(1.0, wlen2 / AVG_WORD)
        pen2 = np.where((w2 < 0) & (h2 <= 0), self.weights.prefix_penalty * scale, 0.0)
        hotb2 = self.hot.partial[h2]
        old = cols["score"][parents] - cols["pen"][parents] - cols["hotb"][parents]
        return {
            "score": old + pen2 + hotb2,
            "w": w2,
            "wlen": wlen2,
            "h": h2,
            "pen": pen2,
            "hotb": hotb2,
        }

    def boundary(self, tree: PrefixTree, parents: I64, chars: I64) -> I64:
        """Build the children of `parents` by boundary `chars` (a space, or any symbol for a
        character LM), scoring each completed token with the LM; returns their ids."""
        cols = tree.cols
        end = self._token_ends(tree, parents, chars)
        h2, bank = self._hot_step(cols["h"][parents], chars)
        hotb2 = self.hot.partial[h2]
        base = cols["score"][parents] - cols["pen"][parents] - cols["hotb"][parents]
        ids = tree.add_many(
            parents,
            chars,
            score=base + end.score + bank + hotb2,
            lm=cols["lm"][parents] + end.lm,
            count=cols["count"][parents] + 1,
            w=0,
            wlen=0,
            h=h2,
            pen=0.0,
            hotb=hotb2,
        )
        cols["lmnode"][ids] = ids
        tree.states.update(zip(ids.tolist(), end.states, strict=True))
        return ids

    def token_bound(self, tree: PrefixTree, parents: I64) -> F64:
        """An upper bound on the score of any boundary child of `parents` (what `boundary`
        would give it): ln p_lm <= 0 and the unknown-word penalty <= 0, so only beta and
        the largest hotword bonuses can raise it."""
        if self.weights.alpha < 0:
            return np.full(len(parents), np.inf)
        cols = tree.cols
        base = cols["score"][parents] - cols["pen"][parents] - cols["hotb"][parents]
        bound: F64 = base + (self.weights.beta + self.hot.full.max() + self.hot.partial.max())
        return bound

    def final(self, tree: PrefixTree, node: int) -> tuple[float, float]:
        """(score, lm) of a prefix taken as the whole utterance: the last word completed,
        tentative hotword bonus dropped (or kept whole if the phrase is complete), </s>."""
        cols = tree.cols
        if self.char_level and node and cols["char"][node] == self.alphabet.space:
            node = int(cols["parent"][node])  # a trailing space is no part of the text
        h = int(cols["h"][node])
        score = float(cols["score"][node] - cols["hotb"][node]) + float(self.hot.full[h])
        lm = float(cols["lm"][node])
        state = tree.state(node)
        if cols["wlen"][node] and not self.char_level:
            end = self._token_ends(tree, np.array([node]), np.array([self.alphabet.space]))
            score += float(end.score[0]) - float(cols["pen"][node])
            lm += float(end.lm[0])
            state = end.states[0]
        if self.lm is not None:
            eos = self.lm.finish(state)
            score += self.weights.alpha * eos
            lm += eos
        return score, lm

    def _token_ends(self, tree: PrefixTree, nodes: I64, chars: I64) -> _TokenEnds:
        """Scores the tokens that `chars` complete after `nodes` (one LM query each)."""
        wts, lm = self.weights, self.lm
        if self.char_level:
            symbols = ("", *self.alphabet.symbols)
            space = self.alphabet.space
            tokens = [CHAR_SPACE if c == space else symbols[c] for c in chars.tolist()]
        else:
            tokens = [tree.word(n) for n in nodes.tolist()]
        if lm is not None:
            pairs = zip(nodes.tolist(), tokens, strict=True)
            scored = [lm.score(tree.state(n), t) for n, t in pairs]
            lms = np.array([s[0] for s in scored])
            states = [s[1] for s in scored]
            known = np.array([s[2] for s in scored], dtype=bool)
        else:
            lms, states = np.zeros(len(nodes)), [None] * len(nodes)
            w = tree.cols["w"][nodes]
            known = np.ones(len(nodes), bool) if self.unigrams is None else self.unigrams.ends[w]
        known |= self.hot.trie.ends[tree.cols["h"][nodes]]
        unk = np.where(known, 0.0, wts.unk_penalty)
        return _TokenEnds(wts.alpha * lms + wts.beta + unk, lms, states)

    def _hot_step(self, h: I64, chars: I64) -> tuple[I64, F64]:
        """Hotword-trie moves on boundary `chars`: (next nodes, bonuses banked by phrases
        that a space completes; such a match restarts at the root)."""
        h2 = self.hot.trie.next[h, chars].astype(np.int64)
        done = (chars == self.alphabet.space) & (h2 < 0)
        bank = np.where(done, self.hot.full[h], 0.0)
        return np.where(done, 0, h2), bank
