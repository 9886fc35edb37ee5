"""One frame of the prefix beam search where some symbols may extend the beams.

The beams are arrays (`Beams`); a frame works over all beams x candidate symbols [B, k]:
stay (blank or repeat), extend, merge the extensions that land on a live beam, score the
new prefixes, keep the best. Those loops are compiled (decoder/kernels.py); between them
Python asks the LM about the prefixes that complete a word for the first time in the
stream, but only those whose best possible score could still make the cut.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from decoder.kernels import EXT_SCORE, MASS, STAY_Q, extend, take
from decoder.prefixes import PrefixTree
from decoder.scorer import PrefixScorer

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
_SELECT = np.zeros(0, dtype=np.int64)  # `take`: choose the beams yourself


class Beams(NamedTuple):
    """The live prefixes: node ids [B] and the log mass of their paths ending in a blank
    (pb) and in their last symbol (pnb). A tuple: one is made per frame."""

    nodes: I64
    pb: F64
    pnb: F64


@dataclass(frozen=True)
class Limits:
    """The pruning of a frame's result (DecoderConfig's beam_width and score_threshold)."""

    beam_width: int
    score_threshold: float


def step(
    tree: PrefixTree,
    scorer: PrefixScorer,
    beams: Beams,
    lp: F64,
    cand: I64,
    frame: int,
    limits: Limits,
) -> Beams:
    """The beams after frame `frame` with log-probs lp [V], extending by symbols `cand`."""
    tree.reserve(len(beams.nodes) * len(cand))  # each beam x symbol adds one node at most
    hot, width, threshold = scorer.hot, limits.beam_width, limits.score_threshold
    stays, ef, ei, tok = extend(
        tree.ints, tree.floats, tree.kids, tree.slot, beams.nodes, beams.pb, beams.pnb,
        lp, cand, frame, scorer.alphabet.space, scorer.is_boundary, scorer.unigram_next,
        scorer.unigram_look, hot.trie.next, hot.partial, scorer.weights.prefix_penalty, width,
        threshold,
        scorer.bound_extra,
    )  # fmt: skip
    if tok.shape[1]:
        scorer.boundary(tree, tok, ef, ei)
    args = (tree.ints, tree.floats, tree.kids, tree.size, beams.nodes, cand, lp, frame)
    nodes, pb, pnb, size = take(*args, stays, ef, ei, width, threshold, _SELECT)
    if size < 0:  # ties: let numpy choose, as it always did
        keep = best(np.concatenate([stays[STAY_Q], ef[MASS] + ef[EXT_SCORE]]), limits)
        if not keep.size:
            return Beams(keep, np.zeros(0), np.zeros(0))
        nodes, pb, pnb, size = take(*args, stays, ef, ei, width, threshold, keep)
    tree.size = size
    return Beams(nodes, pb, pnb)


def best(q: F64, limits: Limits) -> I64:
    """Indices of the best `beam_width` scores within `score_threshold` of the best,
    best first. Used where ties decide, since np.argpartition orders tied scores its own
    way (decoder/kernels.py `select` chooses the same beams everywhere else)."""
    keep = np.flatnonzero(q > q.max() - limits.score_threshold)
    width = limits.beam_width
    if keep.size > width:
        keep = keep[np.argpartition(-q[keep], width - 1)[:width]]
    return keep[np.argsort(-q[keep], kind="stable")]
