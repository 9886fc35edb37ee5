"""One frame of the prefix beam search where some symbols may extend the beams.

The beams are arrays (`Beams`); a frame is a fixed sequence of numpy operations over all
beams x candidate symbols [B, k]: stay (blank or repeat), extend, merge the extensions
that land on a live beam, score the new prefixes, keep the best. Python loops run only
over the LM lookups of prefixes that complete a word for the first time in the stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from decoder.alphabet import BLANK
from decoder.prefixes import PrefixTree
from decoder.scorer import PrefixScorer

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
NEG_INF = -np.inf


@dataclass(frozen=True)
class Beams:
    """The live prefixes: node ids [B] and the log mass of their paths ending in a blank
    (pb) and in their last symbol (pnb)."""

    nodes: I64
    pb: F64
    pnb: F64


@dataclass(frozen=True)
class Limits:
    """The pruning of a frame's result (DecoderConfig's beam_width and score_threshold)."""

    beam_width: int
    score_threshold: float


@dataclass
class _Extensions:
    """Every beam x candidate extension of one frame [B, k]."""

    mass: F64  # log mass entering the child (-inf: impossible or merged into a stay)
    child: I64  # its node id, -1 while not built
    score: F64  # its non-acoustic score (LM side)
    pending: dict[str, npt.NDArray[np.generic]]  # columns of the unbuilt plain children
    row: I64  # [B, k] -> row in `pending` (-1: none)
    token_rows: I64  # the unbuilt extensions that complete a token: beams
    token_cols: I64  # and candidate columns


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
    nodes, pb, pnb = beams.nodes, beams.pb, beams.pnb
    space = tree.alphabet.space
    last = tree.cols["char"][nodes]
    total = np.logaddexp(pb, pnb)
    at_space = last == space
    stay_pb = total + lp[BLANK]
    # a space after a space (or at the start) is absorbed: it keeps the prefix
    stay_pnb = np.where(at_space, total + lp[space], pnb + lp[last])
    mass = np.where(cand == last[:, None], pb[:, None], total[:, None]) + lp[cand]
    mass[at_space[:, None] & (cand == space)] = NEG_INF
    child = tree.children(nodes[:, None], cand[None, :])
    _merge_into_stays(tree, nodes, child, mass, stay_pnb, lp, frame)
    ext = _score(tree, scorer, nodes, cand, mass, child)
    stay_q = np.logaddexp(stay_pb, stay_pnb) + tree.cols["score"][nodes]
    _score_tokens(tree, scorer, nodes, cand, ext, stay_q, limits)
    q = np.concatenate([stay_q, (mass + ext.score).ravel()])
    keep = _best(q, limits)
    return _take(tree, nodes, stay_pb, stay_pnb, ext, cand, keep, lp, frame)


def _merge_into_stays(
    tree: PrefixTree, nodes: I64, child: I64, mass: F64, stay_pnb: F64, lp: F64, frame: int
) -> None:
    """An extension that lands on a live beam (beam j = beam i + c) adds its mass to beam
    j's pnb instead of making a second copy of the prefix."""
    slot = tree.slot
    slot[nodes] = np.arange(len(nodes))
    target = np.where(child >= 0, slot[child], -1)
    slot[nodes] = -1
    hi, hk = np.nonzero(target >= 0)
    if hi.size:
        j, m = target[hi, hk], mass[hi, hk]
        stay_pnb[j] = np.logaddexp(stay_pnb[j], m)
        stamp(tree, nodes[j], m, lp, frame)
        mass[hi, hk] = NEG_INF


def _score(
    tree: PrefixTree, scorer: PrefixScorer, nodes: I64, cand: I64, mass: F64, child: I64
) -> _Extensions:
    """LM-side scores of every possible extension: read from the tree where the child
    exists, computed but not built yet for a plain letter (most of them are pruned). Those
    that complete a token and are not built yet are left for `_score_tokens` (score 0)."""
    score = np.zeros(mass.shape)
    built = child >= 0
    score[built] = tree.cols["score"][child[built]]
    ui, uk = np.nonzero(~built & (mass > NEG_INF))
    lm = scorer.is_boundary[cand[uk]]
    p = np.flatnonzero(~lm)
    row = np.full(mass.shape, -1, dtype=np.int64)
    pending = scorer.extend(tree, nodes[ui[p]], cand[uk[p]])
    score[ui[p], uk[p]] = pending["score"]
    row[ui[p], uk[p]] = np.arange(p.size)
    b = np.flatnonzero(lm)
    return _Extensions(mass, child, score, pending, row, ui[b], uk[b])


def _score_tokens(
    tree: PrefixTree,
    scorer: PrefixScorer,
    nodes: I64,
    cand: I64,
    ext: _Extensions,
    stay_q: F64,
    limits: Limits,
) -> None:
    """Build (with an LM lookup each) the unbuilt extensions that complete a token, but
    only those whose score's upper bound could still make the cut: the cut is at least
    the beam_width-th best, and the threshold below the best, of the scores known
    already. The others could not survive this frame whatever the LM said."""
    bi, bk = ext.token_rows, ext.token_cols
    if not bi.size:
        return
    known = ext.mass + ext.score
    known[bi, bk] = NEG_INF
    known = np.concatenate([stay_q, known.ravel()])
    best = known.max()
    cut = best - limits.score_threshold
    if known.size > limits.beam_width:
        kth = np.partition(known, known.size - limits.beam_width)[known.size - limits.beam_width]
        cut = max(cut, np.nextafter(kth, NEG_INF))
    upper = ext.mass[bi, bk] + scorer.token_bound(tree, nodes[bi])
    need = upper > cut
    ext.score[bi[~need], bk[~need]] = NEG_INF
    bi, bk = bi[need], bk[need]
    if bi.size:
        ids = scorer.boundary(tree, nodes[bi], cand[bk])
        ext.child[bi, bk] = ids
        ext.score[bi, bk] = tree.cols["score"][ids]


def _best(q: F64, limits: Limits) -> I64:
    """Indices of the best `beam_width` scores within `score_threshold` of the best,
    best first."""
    keep = np.flatnonzero(q > q.max() - limits.score_threshold)
    width = limits.beam_width
    if keep.size > width:
        keep = keep[np.argpartition(-q[keep], width - 1)[:width]]
    return keep[np.argsort(-q[keep], kind="stable")]


def _take(
    tree: PrefixTree,
    nodes: I64,
    stay_pb: F64,
    stay_pnb: F64,
    ext: _Extensions,
    cand: I64,
    keep: I64,
    lp: F64,
    frame: int,
) -> Beams:
    """The kept stays and extensions as the new beams, building the kept children."""
    n = len(nodes)
    stays = keep < n
    bi, kj = np.divmod(keep[~stays] - n, cand.size)
    child = ext.child[bi, kj]
    new = np.flatnonzero(child < 0)
    if new.size:
        rows = ext.row[bi[new], kj[new]]
        cols = {key: col[rows] for key, col in ext.pending.items()}
        child[new] = tree.add_many(nodes[bi[new]], cand[kj[new]], **cols)
    out = np.empty(keep.size, dtype=np.int64)
    out[stays], out[~stays] = nodes[keep[stays]], child
    pb = np.full(keep.size, NEG_INF)
    pb[stays] = stay_pb[keep[stays]]
    pnb = np.empty(keep.size)
    pnb[stays], pnb[~stays] = stay_pnb[keep[stays]], ext.mass[bi, kj]
    stamp(tree, child, pnb[~stays], lp, frame)
    return Beams(out, pb, pnb)


def stamp(tree: PrefixTree, nodes: I64, entry: F64, lp: F64, frame: int) -> None:
    """Time a prefix's last symbol at the frame where entering it was most probable
    (the best path's choice), with that frame's posterior as its confidence."""
    cols = tree.cols
    better = entry > cols["entry"][nodes]
    nodes = nodes[better]
    cols["entry"][nodes] = entry[better]
    cols["frame"][nodes] = frame
    cols["clogp"][nodes] = lp[cols["char"][nodes]]
