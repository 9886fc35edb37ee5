"""Incremental, pruned CTC prefix beam search with an n-gram LM (DS2 §3.8, §7.3).

Each beam is a prefix (a node of the stream's PrefixTree) with the log probability of the
paths that reach it ending in a blank (pb) and ending in its last symbol (pnb); beams are
ranked by Q = logaddexp(pb, pnb) + the prefix's LM-side score (decoder/scorer.py).
A frame where some symbol may extend a beam is one step (decoder/step.py); a run of frames
where the blank dominates is one closed-form update (decoder/stays.py).

After each step, beams that parted from the best one more than `commit_s` ago are dropped
(the commit), so the words before that point are shared by every beam: `partial()` reports
them as stable, and they keep up with the audio instead of waiting for an old alternative
spelling to fall out of the beam.

Spaces are normalised as the search goes: a leading space and a space after a space extend
nothing (their mass stays with the prefix), so the prefixes of the search are exactly the
texts a user can get, and a trailing space is merged away at finalisation.

A frame is a few compiled loops over all beams x candidate symbols (decoder/kernels.py);
Python runs only the LM lookups and a few calls per frame. Decoding in chunks is the same
sequence of steps as decoding at once, so it gives the same result, bit for bit: a run of
blank frames at the end of a chunk waits for the next chunk (or partial/finalize) and is
applied as one run.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from decoder.alphabet import Alphabet
from decoder.hotwords import HotwordSpec, build_hotwords
from decoder.hypothesis import Hypothesis, Word
from decoder.jit import array_sum
from decoder.kernels import committed
from decoder.lm import LanguageModel, unigram_log_probs
from decoder.prefixes import PrefixTree
from decoder.pruning import candidate_mask
from decoder.scorer import PrefixScorer, Weights
from decoder.stays import blank_run
from decoder.step import Beams, Limits, step
from decoder.tries import Trie, build_trie, smear_max

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
NEG_INF = -np.inf


# a stream's prefix tree is compacted once it holds this many nodes (about 7 s of speech at
# a 768-wide beam), then at 4x the size that survived; experiments/beam.md. Three
# quarters of the 65,536 nodes (16 MB) its capacity has doubled to by then, so that it
# compacts before it must double again (experiments/decoder/stalls.md)
COMPACT_MIN_NODES = 3 << 14


@dataclass(frozen=True)
class DecoderConfig:
    """Search hyperparameters; a bundle's decoder.json holds the tuned ones."""

    alpha: float = 0.5  # LM weight (on natural-log LM probabilities)
    beta: float = 1.0  # bonus per word (word LM, or no LM) or per character (character LM)
    # beams kept after each frame; 192 and a 10-point threshold: the beam fills with
    # spellings of unknown words, and a wider, tighter beam keeps the real words in it
    # for a little more search time (experiments/decoder/gap.md). models/default's decoder.json
    # asks for 768 within 12.5: a sharper network's search still lost words there, and the
    # wider beam finds them for a few ms of median latency (experiments/beam.md)
    beam_width: int = 192
    cutoff_prob: float = 0.99  # DS2 p: extend by the fewest symbols whose mass reaches it
    cutoff_top_n: int = 40  # DS2 K: and by at most this many symbols per frame
    score_threshold: float = 10.0  # drop beams whose Q is more than this below the best
    unk_penalty: float = -10.0  # added to Q per word outside the LM's vocabulary
    prefix_penalty: float = -10.0  # while the partial word starts no unigram (x len/6 past 6)
    # unigram look-ahead: a partial word scores this share of alpha times the best unigram
    # ln p of the words it could still become, replaced by the real LM score at its end, so
    # that spellings of likely words and of rare ones no longer compete on equal terms until
    # the space. 0 disables it (a partial word then costs nothing until it ends)
    lookahead: float = 0.0
    hotword_boost: float = 8.0  # boost of a hotword given without its own
    nbest: int = 5  # hypotheses returned by finalize()
    # subtracted from every frame's blank log-prob before the search (each frame's row then
    # renormalised): the network under-emits on voices it never heard, and the search then
    # deletes their characters; a small penalty lets it keep them. 0 disables it. Scores and
    # word confidences are then of the penalised posteriors. models/default's decoder.json
    # asks for 1.25, what `harken tune-lm --blank-penalty` chose for the pair's outputs
    # (experiments/ensemble.md, experiments/blank.md)
    blank_penalty: float = 0.0
    # beams that parted from the best one more than this long ago (seconds of frames) are
    # dropped, so the best path's words before that point are final: partials call them
    # stable. With 0, stable is only what every beam shares, and an old alternative ("the
    # water" for "the weather") within the threshold holds it back for seconds; a window of
    # about a second makes words stable soon after their end at the same WER. models/default's
    # decoder.json asks for 1.0: a shorter window dropped alternatives that real speech later
    # needed, and 1.0 costs stable words only a little more lag (experiments/commit.md)
    commit_s: float = 0.75
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
            (0.0 <= self.lookahead <= 1.0, "lookahead must be in [0, 1] (0 disables it)"),
            (self.commit_s >= 0, "commit_s must be >= 0 (0 disables it)"),
            (math.isfinite(self.blank_penalty), "blank_penalty must be a finite number"),
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
        self._words: list[str] = []
        if unigrams is not None and word_level:
            self._words = list(unigrams)
            self.unigrams = build_trie(self._words, alphabet)
        # per unigram-trie node, the best unigram ln p below it: built the first time a
        # config asks for a look-ahead, into a cell every `with_config` copy shares
        self._best_below: list[F64] = []
        self._look: F64 = self._look_scores()
        c = self.config
        self.weights = Weights(c.alpha, c.beta, c.unk_penalty, c.prefix_penalty)
        warm_up()

    def _look_scores(self) -> F64:
        """What a partial word at each unigram-trie node adds to Q (its look-ahead),
        alpha * lookahead * the best unigram ln p below the node; zeros when off."""
        c, trie = self.config, self.unigrams
        if c.lookahead == 0 or trie is None or self.lm is None:
            return np.zeros(1 if trie is None else trie.nodes + 1)
        if not self._best_below:
            self._best_below.append(smear_max(trie, unigram_log_probs(self.lm, self._words)))
        return c.alpha * c.lookahead * self._best_below[0]

    def with_config(self, **changes: float | int) -> BeamSearchDecoder:
        """A decoder with some config fields changed, sharing this one's LM and tries
        (cheap: for tuning and benchmarks)."""
        other = copy.copy(self)
        other.config = dataclasses.replace(self.config, **changes)  # type: ignore[arg-type]
        c = other.config
        other.weights = Weights(c.alpha, c.beta, c.unk_penalty, c.prefix_penalty)
        other._look = other._look_scores()
        return other

    def start(self, hotwords: HotwordSpec = ()) -> BeamStream:
        """A new stream; hotwords are phrases, or (phrase, boost) pairs, or {phrase: boost}."""
        hot = build_hotwords(hotwords, self.alphabet, self.config.hotword_boost)
        scorer = PrefixScorer(self.alphabet, self.weights, self.lm, self.unigrams, hot, self._look)
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
        self.commit_frames = round(config.commit_s / config.frame_seconds)  # 0: never
        self.tree = PrefixTree(alphabet, scorer.root_state())
        self.beams = Beams(np.zeros(1, dtype=np.int64), np.zeros(1), np.full(1, NEG_INF))
        self.frames = 0  # frames stepped (the pending blank run not included)
        self.blanks: list[F64] = []  # a run of blank-dominated frames not applied yet
        self.finished = False
        self._frozen = _Frozen(0, (), "")
        self._compact_at = COMPACT_MIN_NODES

    def advance(self, log_probs: npt.ArrayLike, threshold: float | None = None) -> None:
        """Consume the next frames' log posteriors [T, V] (natural log, blank at 0).
        `threshold` narrows the search for these frames only: beams stay within the smaller
        of it and the config's score_threshold of the best (a loaded server sheds search
        work this way; None keeps the config's)."""
        lp = np.ascontiguousarray(log_probs, dtype=np.float64)
        self._check(lp)
        if threshold is not None and not threshold > 0:
            raise ValueError(f"threshold must be > 0 (or None), got {threshold}")
        cfg = self.config
        limits = self.limits
        if threshold is not None and threshold < limits.score_threshold:
            limits = Limits(limits.beam_width, threshold)
        if cfg.blank_penalty:
            lp = penalise_blank(lp, cfg.blank_penalty)
        mask = candidate_mask(lp, cfg.cutoff_prob, cfg.cutoff_top_n)
        # frame by frame, each frame's symbols ascending (contiguous, as the kernels expect)
        rows, symbols = np.divmod(np.flatnonzero(mask), mask.shape[1])
        frames, starts = np.unique(rows, return_index=True)
        bounds = [*starts.tolist(), len(symbols)]
        done = 0
        for t, lo, hi in zip(frames.tolist(), bounds[:-1], bounds[1:], strict=True):
            if t > done or self.blanks:
                self._apply_blanks(lp[done:t])
            self.beams = step(
                self.tree, self.scorer, self.beams, lp[t], symbols[lo:hi], self.frames, limits
            )
            self._commit()
            self._compact()
            self.frames += 1
            done = t + 1
        if done < len(lp):
            self.blanks.append(lp[done:])
        self._freeze()

    def _commit(self) -> None:
        """Drop the beams that part from the best one before the commit point, `commit_s`
        before the frame just stepped. Done after every step, never at a chunk's end or in
        `partial`, so it is the same whatever the chunking."""
        frame, nodes = self.frames - self.commit_frames, self.beams.nodes
        if not self.commit_frames or frame < 0 or not len(nodes):
            return
        keep = committed(self.tree.ints, nodes, frame)
        if len(keep) < len(nodes):
            b = self.beams
            self.beams = Beams(nodes[keep], b.pb[keep], b.pnb[keep])

    def _compact(self) -> None:
        """Drop the tree's unreachable nodes once it has grown to 4x its size after the last
        time (PrefixTree.compact: the search is unchanged). Checked after every step, so it
        happens at the same frames whatever the chunking."""
        if self.tree.size < self._compact_at or not len(self.beams.nodes):
            return  # (no live beam: nothing grows any more)
        new_id = self.tree.compact(self.beams.nodes)
        b, (top, words, text) = self.beams, self._frozen
        self.beams = Beams(new_id[b.nodes], b.pb, b.pnb)
        self._frozen = _Frozen(int(new_id[top]), words, text)
        self._compact_at = max(COMPACT_MIN_NODES, 4 * self.tree.size)

    def _apply_blanks(self, *last: F64) -> None:
        """Apply the pending run of blank-dominated frames, and then the rows `last`
        [T, V] of this chunk (fast path)."""
        run = self._blank_rows(*last)
        self.blanks = []
        if len(run):
            self.beams = self._after(run)
            self.frames += len(run)

    def _blank_rows(self, *more: F64) -> F64:
        runs = [r for r in (*self.blanks, *more) if len(r)]
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
            self._frozen = _Frozen(node, words + more, text + tree.texts(np.array([node]), top)[0])

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

    def _texts(self, nodes: I64) -> list[str]:
        """Beams' texts (trailing spaces included)."""
        top, _, text = self._frozen
        return [text + below for below in self.tree.texts(nodes, top)]

    def partial(self) -> Hypothesis:
        """The best hypothesis so far; `stable` is the length of its whole words that every
        beam shares (the frozen point), which no later frame can change: a prefix of every
        later partial's stable text and of the final text."""
        if self.finished:
            raise RuntimeError("this stream was finalized; start() a new one")
        beams, score = self._current(), self.tree.cols["score"]
        total = np.logaddexp(beams.pb, beams.pnb)
        best = int(np.argmax(total + score[beams.nodes]))
        node = int(beams.nodes[best])
        text = self._texts(beams.nodes[best : best + 1])[0].rstrip()
        stable = len(self._frozen.text.rstrip())
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
        nodes = self.beams.nodes
        total = np.logaddexp(self.beams.pb, self.beams.pnb)
        sides, lms = self.scorer.finals(self.tree, nodes)
        merged: dict[str, tuple[float, float, float, int]] = {}
        beams = zip(nodes.tolist(), total.tolist(), sides.tolist(), lms.tolist(), strict=True)
        for (node, acoustic, side, lm), text in zip(beams, self._texts(nodes), strict=True):
            text = text.rstrip()
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
        chars, clogp = cols["char"][path], cols["clogp"][path]
        gaps = [-1, *np.flatnonzero(chars == space).tolist(), len(path)]
        spans = [(a + 1, b) for a, b in itertools.pairwise(gaps) if b > a + 1]
        if not spans:
            return ()
        # the mean as np.mean takes it; exp as numpy's (it rounds unlike the C library's)
        confs = np.exp([array_sum(clogp[a:b]) / (b - a) for a, b in spans]).tolist()
        chars_, frames = chars.tolist(), cols["frame"][path].tolist()
        return tuple(
            Word(self.alphabet.decode(chars_[a:b]), frames[a] * fs, (frames[b - 1] + 1) * fs, c)
            for (a, b), c in zip(spans, confs, strict=True)
        )


def penalise_blank(log_probs: F64, penalty: float) -> F64:
    """A copy of log posteriors [T, V] with `penalty` taken off the blank's (index 0) and each
    frame renormalised: the same as lowering the blank's logit before the softmax, so each
    frame is still a distribution and frames are changed independently (chunking-invariant)."""
    out = log_probs.copy()
    out[:, 0] -= penalty
    out -= np.logaddexp.reduce(out, axis=1, keepdims=True)
    return out


class _Frozen(NamedTuple):
    """A word boundary every beam descends from: what is above it can no longer change."""

    node: int
    words: tuple[Word, ...]
    text: str  # the text down to and including node


@functools.cache
def warm_up() -> None:
    """Compile the search's kernels, or load them from numba's on-disk cache, once per
    process (BeamSearchDecoder does it when built), so that no stream's first frames pay
    for it: seconds the first time on a machine, tens of milliseconds after that."""
    alphabet = Alphabet((" ", "a", "b"))
    shown = "_aa_ b__ab  _a__________b"  # words, spaces, and a run of blank frames
    lp = np.full((len(shown), alphabet.size), np.log(0.1))
    for t, symbol in enumerate(shown):
        lp[t, 0 if symbol == "_" else alphabet.id_of(symbol)] = np.log(0.7)
    lp[13:23], lp[13:23, 0] = np.log(1e-4), 0.0  # frames the blank dominates
    lp -= np.logaddexp.reduce(lp, axis=1, keepdims=True)
    config = DecoderConfig(beam_width=4, cutoff_prob=0.999, commit_s=0.1)  # commits at frame 5
    weights = Weights(config.alpha, config.beta, config.unk_penalty, config.prefix_penalty)
    hot = build_hotwords(["ab"], alphabet, config.hotword_boost)
    trie = build_trie(["a", "ab"], alphabet)
    stream = BeamStream(alphabet, config, PrefixScorer(alphabet, weights, None, trie, hot))
    stream.advance(lp[:15])
    stream.partial()
    stream.advance(lp[15:])
    stream.finalize()
