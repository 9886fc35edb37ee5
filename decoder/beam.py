"""Incremental, pruned CTC prefix beam search with an n-gram LM (DS2 §3.8, §7.3).

Each beam is a prefix (a node of the stream's PrefixTree) with the log probability of the
paths that reach it ending in a blank (pb) and ending in its last symbol (pnb); beams are
ranked by Q = logaddexp(pb, pnb) + the prefix's LM-side score (decoder/scorer.py).
A frame where some symbol may extend a beam is one step (decoder/step.py); a run of frames
where the blank dominates is one closed-form update (decoder/stays.py).

Spaces are normalised as the search goes: a leading space and a space after a space extend
nothing (their mass stays with the prefix), so the prefixes of the search are exactly the
texts a user can get, and a trailing space is merged away at finalisation.

A frame costs a few numpy operations over all beams x candidate symbols; Python loops run
only over LM lookups. Decoding in chunks is the same sequence of steps as decoding at
once, so it gives the same result, bit for bit: a run of blank frames at the end of a
chunk waits for the next chunk (or partial/finalize) and is applied as one run.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet
from decoder.hotwords import HotwordSpec, build_hotwords
from decoder.hypothesis import Hypothesis, Word
from decoder.lm import LanguageModel
from decoder.prefixes import PrefixTree
from decoder.pruning import candidate_mask
from decoder.scorer import PrefixScorer, Weights
from decoder.stays import blank_run
from decoder.step import Beams, Limits, step
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
        self.limits = Limits(config.beam_width, config.score_threshold)
        self.tree = PrefixTree(alphabet, scorer.root_state())
        self.beams = Beams(np.zeros(1, dtype=np.int64), np.zeros(1), np.full(1, NEG_INF))
        self.frames = 0  # frames stepped (the pending blank run not included)
        self.blanks: list[F64] = []  # a run of blank-dominated frames not applied yet
        self.finished = False
        self._frozen = _Frozen(0, (), "")

    def advance(self, log_probs: npt.ArrayLike) -> None:
        """Consume the next frames' log posteriors [T, V] (natural log, blank at 0)."""
        lp = np.asarray(log_probs, dtype=np.float64)
        self._check(lp)
        cfg = self.config
        mask = candidate_mask(lp, cfg.cutoff_prob, cfg.cutoff_top_n)
        done = 0
        for t in np.flatnonzero(mask.any(axis=1)).tolist():
            self.blanks.append(lp[done:t])
            self._apply_blanks()
            self.beams = step(
                self.tree,
                self.scorer,
                self.beams,
                lp[t],
                np.flatnonzero(mask[t]),
                self.frames,
                self.limits,
            )
            self.frames += 1
            done = t + 1
        self.blanks.append(lp[done:])
        self._freeze()

    def _apply_blanks(self) -> None:
        """Apply the pending run of blank-dominated frames (fast path)."""
        run = self._blank_rows()
        self.blanks = []
        if len(run):
            self.beams = self._after(run)
            self.frames += len(run)

    def _blank_rows(self) -> F64:
        runs = [r for r in self.blanks if len(r)]
        return runs[0] if len(runs) == 1 else np.concatenate(runs or [np.zeros((0, 1))])

    def _after(self, run: F64) -> Beams:
        """The beams after a run of blank-dominated frames [T, V]."""
        b = self.beams
        last = self.tree.cols["char"][b.nodes]
        pb, pnb = blank_run(b.pb, b.pnb, last, self.alphabet.space, run)
        return Beams(b.nodes, pb, pnb)

    def _current(self) -> Beams:
        """The beams with the pending blank run applied, without consuming it."""
        run = self._blank_rows()
        return self._after(run) if len(run) else self.beams

    def _freeze(self) -> None:
        """Move the frozen point to the last word boundary shared by all beams, so that
        finalize() and partial() only time the words after it (O(1) in the length)."""
        tree, space = self.tree, self.alphabet.space
        node = tree.common_ancestor(self.beams.nodes)
        parent, char = tree.cols["parent"], tree.cols["char"]
        while node > 0 and char[node] != space:
            node = int(parent[node])
        top, words, text = self._frozen
        if node != top:
            more = self._words_between(top, node)
            self._frozen = _Frozen(node, words + more, text + tree.text(node, top))

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

    def _text(self, node: int) -> str:
        """A beam's text (trailing space included)."""
        top, _, text = self._frozen
        return text + self.tree.text(node, top)

    def partial(self) -> Hypothesis:
        """The best hypothesis so far; `stable` is the length of the prefix shared by every
        beam, which no later frame can change."""
        if self.finished:
            raise RuntimeError("this stream was finalized; start() a new one")
        beams, score = self._current(), self.tree.cols["score"]
        total = np.logaddexp(beams.pb, beams.pnb)
        best = int(np.argmax(total + score[beams.nodes]))
        node = int(beams.nodes[best])
        text = self._text(node).rstrip()
        stable = int(self.tree.cols["depth"][self.tree.common_ancestor(beams.nodes)])
        lm = float(self.tree.cols["lm"][node])
        return Hypothesis(
            text,
            float(total[best] + score[node]),
            float(total[best]),
            lm,
            self._words(node),
            min(stable, len(text)),
        )

    def finalize(self) -> list[Hypothesis]:
        """End of the utterance: complete the last word, add </s>, merge beams that now read
        the same, and return the n best. Costs O(beams), not O(utterance length)."""
        if self.finished:
            raise RuntimeError("finalize() was already called on this stream")
        self._apply_blanks()
        self.finished = True
        total = np.logaddexp(self.beams.pb, self.beams.pnb)
        merged: dict[str, tuple[float, float, float, int]] = {}
        for node, acoustic in zip(self.beams.nodes.tolist(), total.tolist(), strict=True):
            side, lm = self.scorer.final(self.tree, node)
            text = self._text(node).rstrip()
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
        top, words, _ = self._frozen
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


class _Frozen(NamedTuple):
    """A word boundary every beam descends from: what is above it can no longer change."""

    node: int
    words: tuple[Word, ...]
    text: str  # the text down to and including node
