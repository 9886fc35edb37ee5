"""Incremental, pruned CTC prefix beam search with an n-gram LM (DS2 §3.8, §7.3).

Each beam is a prefix (a node of the stream's PrefixTree) with the log probability of the
paths that reach it ending in a blank (pb) and ending in its last symbol (pnb); beams are
ranked by Q = logaddexp(pb, pnb) + the prefix's LM-side score (decoder/scorer.py).

Spaces are normalised as the search goes: a leading space and a space after a space extend
nothing (their mass stays with the prefix), so the prefixes of the search are exactly the
texts a user can get, and a trailing space is merged away at finalisation.

A frame costs a few numpy operations over all beams x candidate symbols; Python loops run
only over LM lookups and the few new prefixes that survive. Decoding in chunks is the same
sequence of frame steps as decoding at once, so it gives the same result.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from decoder.alphabet import BLANK, Alphabet
from decoder.hotwords import HotwordSpec, build_hotwords
from decoder.hypothesis import Hypothesis, Word
from decoder.lm import LanguageModel
from decoder.prefixes import PrefixTree
from decoder.pruning import candidate_symbols
from decoder.scorer import PrefixScorer, Weights
from decoder.tries import Trie, build_trie

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
NEG_INF = -np.inf


@dataclass(frozen=True)
class DecoderConfig:
    """Search hyperparameters; a bundle's decoder.json holds the tuned ones."""

    alpha: float = 0.5  # LM weight (on natural-log LM probabilities)
    beta: float = 1.0  # bonus per word (word LM, or no LM) or per character (character LM)
    beam_width: int = 64  # beams kept after each frame
    cutoff_prob: float = 0.99  # DS2 p: extend by the fewest symbols whose mass reaches it
    cutoff_top_n: int = 40  # DS2 K: and by at most this many symbols per frame
    score_threshold: float = 25.0  # drop beams whose Q is more than this below the best
    unk_penalty: float = -10.0  # added to Q per word outside the LM's vocabulary
    prefix_penalty: float = -10.0  # while the partial word starts no unigram (x len/6 past 6)
    hotword_boost: float = 8.0  # boost of a hotword given without its own
    nbest: int = 5  # hypotheses returned by finalize()
    frame_seconds: float = 0.02  # seconds per model output frame (10 ms hop x stride 2)

    def __post_init__(self) -> None:
        checks = [
            (self.beam_width >= 1, "beam_width must be >= 1"),
            (0.0 < self.cutoff_prob <= 1.0, "cutoff_prob must be in (0, 1]; 1 disables it"),
            (self.cutoff_top_n >= 1, "cutoff_top_n must be >= 1"),
            (self.score_threshold > 0, "score_threshold must be > 0 (use inf to disable)"),
            (self.nbest >= 1, "nbest must be >= 1"),
            (self.frame_seconds > 0, "frame_seconds must be > 0"),
            (self.unk_penalty <= 0 and self.prefix_penalty <= 0, "penalties must be <= 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise ValueError(f"DecoderConfig: {message}")


class BeamSearchDecoder:
    """Shared, read-only parts of the search (alphabet, config, LM, unigram trie);
    `start()` makes a stream per utterance."""

    def __init__(
        self,
        alphabet: Alphabet,
        config: DecoderConfig | None = None,
        lm: LanguageModel | None = None,
        unigrams: Iterable[str] | None = None,
    ):
        self.alphabet = alphabet
        self.config = config or DecoderConfig()
        self.lm = lm
        word_level = lm is None or lm.unit == "word"
        self.unigrams: Trie | None = None
        if unigrams is not None and word_level:
            self.unigrams = build_trie(unigrams, alphabet)
        c = self.config
        self.weights = Weights(c.alpha, c.beta, c.unk_penalty, c.prefix_penalty)

    def with_config(self, **changes: float | int) -> BeamSearchDecoder:
        """A decoder with some config fields changed, sharing this one's LM and tries
        (cheap: for tuning and benchmarks)."""
        other = copy.copy(self)
        other.config = dataclasses.replace(self.config, **changes)  # type: ignore[arg-type]
        c = other.config
        other.weights = Weights(c.alpha, c.beta, c.unk_penalty, c.prefix_penalty)
        return other

    def start(self, hotwords: HotwordSpec = ()) -> BeamStream:
        """A new stream; hotwords are phrases, or (phrase, boost) pairs, or {phrase: boost}."""
        hot = build_hotwords(hotwords, self.alphabet, self.config.hotword_boost)
        scorer = PrefixScorer(self.alphabet, self.weights, self.lm, self.unigrams, hot)
        return BeamStream(self.alphabet, self.config, scorer)

    def decode(self, log_probs: npt.ArrayLike, hotwords: HotwordSpec = ()) -> list[Hypothesis]:
        """The n-best list of a whole utterance's log-probs [T, V]."""
        stream = self.start(hotwords)
        stream.advance(log_probs)
        return stream.finalize()


class BeamStream:
    """One utterance: `advance` with log-probs [T, V] as they arrive, `partial` at any time,
    `finalize` once at the end."""

    def __init__(self, alphabet: Alphabet, config: DecoderConfig, scorer: PrefixScorer):
        self.alphabet = alphabet
        self.config = config
        self.scorer = scorer
        self.tree = PrefixTree(alphabet, scorer.root_state())
        self.nodes: I64 = np.zeros(1, dtype=np.int64)
        self.pb: F64 = np.zeros(1)
        self.pnb: F64 = np.full(1, NEG_INF)
        self.frames = 0
        self.finished = False
        self._frozen: tuple[int, tuple[Word, ...]] = (0, ())  # a boundary node every beam
        # descends from, and its words: they can no longer change, so they are kept

    def advance(self, log_probs: npt.ArrayLike) -> None:
        """Consume the next frames' log posteriors [T, V] (natural log, blank at 0)."""
        lp = np.asarray(log_probs, dtype=np.float64)
        self._check(lp)
        cfg = self.config
        for row, cand in zip(
            lp, candidate_symbols(lp, cfg.cutoff_prob, cfg.cutoff_top_n), strict=True
        ):
            self._frame(row, cand)
        self._freeze()

    def _freeze(self) -> None:
        """Move the frozen point to the last word boundary shared by all beams, so that
        finalize() and partial() only time the words after it (O(1) in the length)."""
        tree, space = self.tree, self.alphabet.space
        node = tree.common_ancestor(self.nodes)
        parent, char = tree.cols["parent"], tree.cols["char"]
        while node > 0 and char[node] != space:
            node = int(parent[node])
        top, words = self._frozen
        if node != top:
            self._frozen = (node, words + self._words_between(top, node))

    def _check(self, lp: F64) -> None:
        if self.finished:
            raise RuntimeError("this stream was finalized; start() a new one")
        if lp.ndim != 2 or lp.shape[1] != self.alphabet.size:
            raise ValueError(f"log_probs must be [T, {self.alphabet.size}], got {lp.shape}")
        if np.isnan(lp).any() or (lp > 1e-3).any() or not np.isfinite(lp.max(axis=1)).all():
            raise ValueError(
                "log_probs must be log posteriors: no NaN, none above 0, "
                "and at least one finite value per frame"
            )

    def _frame(self, lp: F64, cand: I64) -> None:
        """One frame: stay (blank or repeat), extend by the candidates, merge, prune."""
        space = self.alphabet.space
        last = self.tree.cols["char"][self.nodes]
        total = np.logaddexp(self.pb, self.pnb)
        ends_space = last == space
        stay_pb = total + lp[BLANK]
        # a space after a space (or at the start) is absorbed: it keeps the prefix
        stay_pnb = np.where(ends_space, total + lp[space], self.pnb + lp[last])
        self.frames += 1
        if cand.size == 0:  # blank-dominated frame: nothing new, nothing to rank
            self.pb, self.pnb = stay_pb, stay_pnb
            return
        ext = np.where(cand == last[:, None], self.pb[:, None], total[:, None]) + lp[cand]
        ext[ends_space[:, None] & (cand == space)] = NEG_INF
        self._merge_into_stays(ext, stay_pnb, cand, lp)
        child, child_score = self._children(ext, cand)
        stay_q = np.logaddexp(stay_pb, stay_pnb) + self.tree.cols["score"][self.nodes]
        q = np.concatenate([stay_q, (ext + child_score).ravel()])
        self._select(q, stay_pb, stay_pnb, ext, child, cand, lp)

    def _merge_into_stays(self, ext: F64, stay_pnb: F64, cand: I64, lp: F64) -> None:
        """An extension that lands on a live beam (beam j = beam i + c) adds its mass to
        beam j's pnb instead of making a second copy of the prefix."""
        cols = self.tree.cols
        parents = cols["parent"][self.nodes]
        column = np.full(self.alphabet.size, -1, dtype=np.int64)
        column[cand] = np.arange(cand.size)
        k = column[cols["char"][self.nodes]]
        order = np.argsort(self.nodes)
        pos = np.minimum(np.searchsorted(self.nodes[order], parents), len(order) - 1)
        i = order[pos]
        hit = np.flatnonzero((self.nodes[i] == parents) & (k >= 0))
        if hit.size:
            src_i, src_k = i[hit], k[hit]
            stay_pnb[hit] = np.logaddexp(stay_pnb[hit], ext[src_i, src_k])
            self._stamp(self.nodes[hit], ext[src_i, src_k], lp)
            ext[src_i, src_k] = NEG_INF

    def _children(self, ext: F64, cand: I64) -> tuple[I64, F64]:
        """Child ids (-1: not built yet) and LM-side scores of every extension [B, k]."""
        scorer, tree = self.scorer, self.tree
        child = np.full(ext.shape, -1, dtype=np.int64)
        score = np.zeros(ext.shape)
        is_lm = scorer.is_boundary[cand]
        plain = np.flatnonzero(~is_lm)
        if plain.size:
            cols = scorer.extend(tree, self.nodes[:, None], cand[plain][None, :])
            score[:, plain] = cols["score"]
        bi, bj = np.nonzero(np.isfinite(ext) & is_lm)
        if bi.size:
            parents, chars = self.nodes[bi], cand[bj]
            found = np.array(
                [tree.find(p, c) for p, c in zip(parents.tolist(), chars.tolist(), strict=True)]
            )
            new = np.flatnonzero(found < 0)
            if new.size:
                found[new] = scorer.boundary(tree, parents[new], chars[new])
            child[bi, bj] = found
        lm_cols = np.flatnonzero(is_lm)
        built = child[:, lm_cols]
        score[:, lm_cols] = np.where(built >= 0, tree.cols["score"][built], 0.0)
        return child, score

    def _select(
        self, q: F64, stay_pb: F64, stay_pnb: F64, ext: F64, child: I64, cand: I64, lp: F64
    ) -> None:
        """Keep the best `beam_width` of stays + extensions within `score_threshold`."""
        cfg, n = self.config, len(self.nodes)
        keep = np.flatnonzero(q > q.max() - cfg.score_threshold)
        if keep.size > cfg.beam_width:
            keep = keep[np.argpartition(-q[keep], cfg.beam_width - 1)[: cfg.beam_width]]
        keep = keep[np.argsort(-q[keep], kind="stable")]
        stays = keep < n
        bi, kj = np.divmod(keep[~stays] - n, cand.size)
        nodes = np.empty(keep.size, dtype=np.int64)
        nodes[stays] = self.nodes[keep[stays]]
        nodes[~stays] = self._built(child[bi, kj], self.nodes[bi], cand[kj])
        self.pb = np.where(stays, stay_pb[np.minimum(keep, n - 1)], NEG_INF)
        self.pnb = np.empty(keep.size)
        self.pnb[stays] = stay_pnb[keep[stays]]
        self.pnb[~stays] = ext[bi, kj]
        self.nodes = nodes
        self._stamp(nodes[~stays], self.pnb[~stays], lp)

    def _built(self, child: I64, parents: I64, chars: I64) -> I64:
        """Ids for the surviving extensions, building the prefixes not in the tree yet."""
        tree = self.tree
        for j in np.flatnonzero(child < 0).tolist():
            child[j] = tree.find(int(parents[j]), int(chars[j]))
        new = np.flatnonzero(child < 0)
        if new.size:
            cols = self.scorer.extend(tree, parents[new], chars[new])
            child[new] = tree.add_many(parents[new], chars[new], None, None, **cols)
        return child

    def _stamp(self, nodes: I64, entry: F64, lp: F64) -> None:
        """Time a prefix's last symbol at the frame where entering it was most probable
        (the best path's choice), with that frame's posterior as its confidence."""
        cols = self.tree.cols
        better = entry > cols["entry"][nodes]
        nodes = nodes[better]
        cols["entry"][nodes] = entry[better]
        cols["frame"][nodes] = self.frames - 1
        cols["clogp"][nodes] = lp[cols["char"][nodes]]

    def partial(self) -> Hypothesis:
        """The best hypothesis so far; `stable` is the length of the prefix shared by every
        beam, which no later frame can change."""
        if self.finished:
            raise RuntimeError("this stream was finalized; start() a new one")
        total = np.logaddexp(self.pb, self.pnb)
        best = int(np.argmax(total + self.tree.cols["score"][self.nodes]))
        node = int(self.nodes[best])
        text = self.tree.text[node].rstrip()
        stable = int(self.tree.cols["depth"][self.tree.common_ancestor(self.nodes)])
        score = float(total[best] + self.tree.cols["score"][node])
        lm = float(self.tree.cols["lm"][node])
        return Hypothesis(
            text, score, float(total[best]), lm, self._words(node), min(stable, len(text))
        )

    def finalize(self) -> list[Hypothesis]:
        """End of the utterance: complete the last word, add </s>, merge beams that now read
        the same, and return the n best. Costs O(beams), not O(utterance length)."""
        if self.finished:
            raise RuntimeError("finalize() was already called on this stream")
        self.finished = True
        total = np.logaddexp(self.pb, self.pnb)
        merged: dict[str, tuple[float, float, float, int]] = {}
        for node, acoustic in zip(self.nodes.tolist(), total.tolist(), strict=True):
            side, lm = self.scorer.final(self.tree, node)
            text = self.tree.text[node].rstrip()
            if text in merged:  # "ab" and "ab ": one text, their CTC masses add up
                ac0, side0, lm0, node0 = merged[text]
                best = (side, lm, node) if acoustic + side > ac0 + side0 else (side0, lm0, node0)
                merged[text] = (float(np.logaddexp(ac0, acoustic)), *best)
            else:
                merged[text] = (acoustic, side, lm, node)
        ranked = sorted(merged.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))
        return [
            Hypothesis(text, ac + side, ac, lm, self._words(node))
            for text, (ac, side, lm, node) in ranked[: self.config.nbest]
        ]

    def _words(self, node: int) -> tuple[Word, ...]:
        """Words of a beam's prefix: the frozen ones, then those after the frozen point."""
        top, words = self._frozen
        return words + self._words_between(top, node)

    def _words_between(self, top: int, node: int) -> tuple[Word, ...]:
        """Words spelt from below `top` (a boundary node or the root) down to `node`, timed
        from their symbols' frames, with the geometric mean posterior as confidence."""
        cols, fs, space = self.tree.cols, self.config.frame_seconds, self.alphabet.space
        path = self.tree.path(node, top)
        chars, frames, clogp = (cols[k][path].tolist() for k in ("char", "frame", "clogp"))
        words: list[Word] = []
        start = 0
        for i in range(len(path) + 1):
            if i < len(path) and chars[i] != space:
                continue
            if i > start:
                text = self.alphabet.decode(chars[start:i])
                conf = float(np.exp(np.mean(clogp[start:i])))
                words.append(Word(text, frames[start] * fs, (frames[i - 1] + 1) * fs, conf))
            start = i + 1
        return tuple(words)
