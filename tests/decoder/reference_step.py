"""The search's frame step as plain numpy (how decoder/step.py did it before it was
compiled): the reference the compiled kernels must match bit for bit.

It works on the same PrefixTree and PrefixScorer, through their columns, and reads the
LM side exactly as the compiled step does; only the loops are numpy calls over
[beams x candidates] instead of compiled ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from decoder.alphabet import BLANK
from decoder.kernels import AVG_WORD
from decoder.prefixes import PrefixTree
from decoder.scorer import PrefixScorer
from decoder.step import Beams, Limits, best

NEG_INF = -np.inf
A = np.ndarray


@dataclass
class _Extensions:
    """Every beam x candidate extension of one frame [B, k]."""

    mass: np.ndarray  # log mass entering the child (-inf: impossible or merged into a stay)
    child: np.ndarray  # its node id, -1 while not built
    score: np.ndarray  # its non-acoustic score (LM side)
    pending: dict[str, np.ndarray]  # columns of the unbuilt plain children
    row: np.ndarray  # [B, k] -> row in `pending` (-1: none)
    token_rows: np.ndarray  # the unbuilt extensions that complete a token: beams
    token_cols: np.ndarray  # and candidate columns


def reference_step(
    tree: PrefixTree,
    scorer: PrefixScorer,
    beams: Beams,
    lp: np.ndarray,
    cand: np.ndarray,
    frame: int,
    limits: Limits,
) -> Beams:
    """decoder.step.step, in numpy."""
    nodes, pb, pnb = beams.nodes, beams.pb, beams.pnb
    space = tree.alphabet.space
    last = tree.cols["char"][nodes]
    total = np.logaddexp(pb, pnb)
    at_space = last == space
    stay_pb = total + lp[BLANK]
    stay_pnb = np.where(at_space, total + lp[space], pnb + lp[last])
    mass = np.where(cand == last[:, None], pb[:, None], total[:, None]) + lp[cand]
    mass[at_space[:, None] & (cand == space)] = NEG_INF
    child = tree.kids[nodes[:, None], cand[None, :]].astype(np.int64)
    _merge_into_stays(tree, nodes, child, mass, stay_pnb, lp, frame)
    ext = _score(tree, scorer, nodes, cand, mass, child)
    stay_q = np.logaddexp(stay_pb, stay_pnb) + tree.cols["score"][nodes]
    _score_tokens(tree, scorer, nodes, cand, ext, stay_q, limits)
    q = np.concatenate([stay_q, (mass + ext.score).ravel()])
    keep = best(q, limits)
    return _take(tree, nodes, stay_pb, stay_pnb, ext, cand, keep, lp, frame)


def _merge_into_stays(
    tree: PrefixTree, nodes: A, child: A, mass: A, stay_pnb: A, lp: A, frame: int
) -> None:
    slot = tree.slot
    slot[nodes] = np.arange(len(nodes))
    target = np.where(child >= 0, slot[child], -1)
    slot[nodes] = -1
    hi, hk = np.nonzero(target >= 0)
    if hi.size:
        j, m = target[hi, hk], mass[hi, hk]
        stay_pnb[j] = np.logaddexp(stay_pnb[j], m)
        _stamp(tree, nodes[j], m, lp, frame)
        mass[hi, hk] = NEG_INF


def _score(
    tree: PrefixTree, scorer: PrefixScorer, nodes: A, cand: A, mass: A, child: A
) -> _Extensions:
    score = np.zeros(mass.shape)
    built = child >= 0
    score[built] = tree.cols["score"][child[built]]
    ui, uk = np.nonzero(~built & (mass > NEG_INF))
    lm = scorer.is_boundary[cand[uk]]
    p = np.flatnonzero(~lm)
    row = np.full(mass.shape, -1, dtype=np.int64)
    pending = _extend(scorer, tree, nodes[ui[p]], cand[uk[p]])
    score[ui[p], uk[p]] = pending["score"]
    row[ui[p], uk[p]] = np.arange(p.size)
    b = np.flatnonzero(lm)
    return _Extensions(mass, child, score, pending, row, ui[b], uk[b])


def _score_tokens(
    tree: PrefixTree,
    scorer: PrefixScorer,
    nodes: A,
    cand: A,
    ext: _Extensions,
    stay_q: A,
    limits: Limits,
) -> None:
    bi, bk = ext.token_rows, ext.token_cols
    if not bi.size:
        return
    known = ext.mass + ext.score
    known[bi, bk] = NEG_INF
    known = np.concatenate([stay_q, known.ravel()])
    cut = known.max() - limits.score_threshold
    if known.size > limits.beam_width:
        kth = np.partition(known, known.size - limits.beam_width)[known.size - limits.beam_width]
        cut = max(cut, np.nextafter(kth, NEG_INF))
    upper = ext.mass[bi, bk] + _token_bound(scorer, tree, nodes[bi])
    need = upper > cut
    ext.score[bi[~need], bk[~need]] = NEG_INF
    bi, bk = bi[need], bk[need]
    if bi.size:
        ids = _boundary(scorer, tree, nodes[bi], cand[bk])
        ext.child[bi, bk] = ids
        ext.score[bi, bk] = tree.cols["score"][ids]


def _take(
    tree: PrefixTree,
    nodes: A,
    stay_pb: A,
    stay_pnb: A,
    ext: _Extensions,
    cand: A,
    keep: A,
    lp: A,
    frame: int,
) -> Beams:
    n = len(nodes)
    stays = keep < n
    bi, kj = np.divmod(keep[~stays] - n, cand.size)
    child = ext.child[bi, kj]
    new = np.flatnonzero(child < 0)
    if new.size:
        rows = ext.row[bi[new], kj[new]]
        cols = {key: col[rows] for key, col in ext.pending.items()}
        child[new] = _add_many(tree, nodes[bi[new]], cand[kj[new]], **cols)
    out = np.empty(keep.size, dtype=np.int64)
    out[stays], out[~stays] = nodes[keep[stays]], child
    pb = np.full(keep.size, NEG_INF)
    pb[stays] = stay_pb[keep[stays]]
    pnb = np.empty(keep.size)
    pnb[stays], pnb[~stays] = stay_pnb[keep[stays]], ext.mass[bi, kj]
    _stamp(tree, child, pnb[~stays], lp, frame)
    return Beams(out, pb, pnb)


def _stamp(tree: PrefixTree, nodes: A, entry: A, lp: A, frame: int) -> None:
    cols = tree.cols
    better = entry > cols["entry"][nodes]
    nodes = nodes[better]
    cols["entry"][nodes] = entry[better]
    cols["frame"][nodes] = frame
    cols["clogp"][nodes] = lp[cols["char"][nodes]]


def _add_many(tree: PrefixTree, parents: A, chars: A, **given: Any) -> A:
    """New children of `parents` by `chars`; columns not given are the parent's."""
    n = len(parents)
    tree.reserve(n)
    ids = np.arange(tree.size, tree.size + n, dtype=np.int64)
    cols = tree.cols
    for key, col in cols.items():
        col[ids] = given[key] if key in given else col[parents]
    cols["parent"][ids], cols["char"][ids] = parents, chars
    cols["depth"][ids] = cols["depth"][parents] + 1
    cols["frame"][ids], cols["entry"][ids] = -1, -np.inf
    tree.kids[parents, chars] = ids
    tree.size += n
    return ids


def _extend(scorer: PrefixScorer, tree: PrefixTree, parents: A, chars: A) -> dict[str, A]:
    cols = tree.cols
    w = cols["w"][parents]
    h2 = scorer.hot.trie.next[cols["h"][parents], chars].astype(np.int64)
    w2 = np.zeros_like(w) if scorer.unigrams is None else scorer.unigrams.next[w, chars]
    w2 = w2.astype(np.int64)
    wlen2 = cols["wlen"][parents] + 1
    scale = np.maximum(1.0, wlen2 / AVG_WORD)
    dead = scorer.weights.prefix_penalty * scale + scorer.unigram_look[-1]
    look2 = np.where(w2 >= 0, scorer.unigram_look[w2], dead)
    pen2 = np.where(h2 > 0, 0.0, look2)
    hotb2 = scorer.hot.partial[h2]
    old = cols["score"][parents] - cols["pen"][parents] - cols["hotb"][parents]
    return {
        "score": old + pen2 + hotb2,
        "w": w2,
        "wlen": wlen2,
        "h": h2,
        "pen": pen2,
        "hotb": hotb2,
    }


def _boundary(scorer: PrefixScorer, tree: PrefixTree, parents: A, chars: A) -> A:
    cols, hot = tree.cols, scorer.hot
    end = scorer._token_ends(tree, parents, chars)
    h2 = hot.trie.next[cols["h"][parents], chars].astype(np.int64)
    done = (chars == scorer.alphabet.space) & (h2 < 0)
    bank = np.where(done, hot.full[cols["h"][parents]], 0.0)
    h2 = np.where(done, 0, h2)
    hotb2 = hot.partial[h2]
    base = cols["score"][parents] - cols["pen"][parents] - cols["hotb"][parents]
    ids = _add_many(
        tree,
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
    tree.cols["lmnode"][ids] = ids  # a fresh view: _add_many may have grown the tree
    tree.states.update(zip(ids.tolist(), end.states, strict=True))
    return ids


def _token_bound(scorer: PrefixScorer, tree: PrefixTree, parents: A) -> A:
    wts, hot = scorer.weights, scorer.hot
    if wts.alpha < 0:
        return np.full(len(parents), np.inf)
    cols = tree.cols
    base = cols["score"][parents] - cols["pen"][parents] - cols["hotb"][parents]
    return base + (wts.beta + hot.full.max() + hot.partial.max())


def reference_blank_run(pb: A, pnb: A, last: A, space: int, lp: A) -> tuple[A, A]:
    """decoder.stays.blank_run, in numpy."""
    t = lp.shape[0]
    excl = np.zeros_like(lp)
    np.cumsum(lp[:-1], axis=0, out=excl[1:])
    d = excl - excl[:, BLANK : BLANK + 1]
    top = d.max(axis=0)
    lse = top + np.log(np.exp(d - top).sum(axis=0))
    blanks = excl[-1, BLANK] + lp[-1, BLANK]
    totals = excl[-1] + lp[-1]
    new_pb = blanks + np.logaddexp(pb, pnb + lse[last])
    new_pnb = pnb + totals[last]
    at_space = last == space
    if at_space.any():
        both = np.logaddexp(lp[:, BLANK], lp[:, space])
        before = both[: t - 1].sum() + np.logaddexp(pb[at_space], pnb[at_space])
        new_pb[at_space] = before + lp[-1, BLANK]
        new_pnb[at_space] = before + lp[-1, space]
    return new_pb, new_pnb
