"""The compiled loops of one frame of the prefix beam search (decoder/step.py drives them).

A frame used to be ~80 numpy calls over [beams x candidates], and their per-call overhead,
not the arithmetic, was its cost. Here each phase is one compiled loop over the same
arrays, doing the same floating-point operations in the same order (so the search is the
same, bit for bit):

- `extend`: stays, extension masses, merges into live beams, the scores of plain letters
  (trie lookups), and the boundary extensions whose upper bound could still make the cut;
- `add_boundary`: the children of those, once Python has asked the LM about them;
- `take`: the best beams within the threshold, best first, building the kept children;
- `committed`: the beams that agree with the best one on everything older than a frame;
- `spell`, `path`, `common_ancestor`: walks up the tree, for texts and word timings;
- `mark_ancestors`: the walk up that compacting the tree needs (decoder/prefixes.py).

The prefix tree's columns are defined here (`INT_COLUMNS`, `FLOAT_COLUMNS`), as columns of
two matrices [nodes, columns], because numba's cache only notices changes to a kernel's own
file (decoder/jit.py). A node's fields sit side by side: the kernels visit nodes at random.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from decoder.jit import kernel, logaddexp

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]

# the prefix tree's columns (decoder/prefixes.py says what they hold): tree.ints[:, PARENT]...
INT_COLUMNS = ("parent", "char", "depth", "count", "lmnode", "w", "wlen", "h", "frame")
FLOAT_COLUMNS = ("score", "lm", "pen", "hotb", "entry", "clogp")
PARENT, CHAR, DEPTH, COUNT, LMNODE, W, WLEN, H, FRAME = range(9)
SCORE, LM, PEN, HOTB, ENTRY, CLOGP = range(6)
# a frame's arrays: stays [3, B], extensions ef [4, B*k], ei [3, B*k], boundary ones tok [3, n]
STAY_PB, STAY_PNB, STAY_Q = range(3)
MASS, EXT_SCORE, EXT_PEN, EXT_HOTB = range(4)  # pen and hotb: of an unbuilt plain child
CHILD, EXT_W, EXT_H = range(3)  # CHILD -1: not built; w and h: of an unbuilt plain child
TOK_EXT, TOK_PARENT, TOK_CHAR = range(3)  # TOK_EXT: flat index i * k + j into ef/ei

AVG_WORD = 6.0  # characters; longer impossible partial words pay proportionally more
NEG_INF = -math.inf


@kernel
def _row(rows: int, state: int) -> int:
    """A trie state as a table row: the dead state -1 is the table's last row."""
    return state if state >= 0 else rows - 1


@kernel
def _base(floats: F64, node: int) -> float:
    """A prefix's score less its partial-word penalty and tentative hotword bonus: what a
    child's own penalty, bonus or completed token is added to."""
    return floats[node, SCORE] - floats[node, PEN] - floats[node, HOTB]  # type: ignore[no-any-return]


@kernel
def stamp(ints: I64, floats: F64, node: int, entry: float, lp: F64, frame: int) -> None:
    """Time a prefix's last symbol at the frame where entering it was most probable
    (the best path's choice), with that frame's posterior as its confidence."""
    if entry > floats[node, ENTRY]:
        floats[node, ENTRY] = entry
        ints[node, FRAME] = frame
        floats[node, CLOGP] = lp[ints[node, CHAR]]


@kernel
def _new_child(ints: I64, floats: F64, kids: I32, node: int, parent: int, char: int) -> None:
    """Node `node` as the child of `parent` by `char`; columns the caller does not set are
    inherited from the parent."""
    ints[node] = ints[parent]
    floats[node] = floats[parent]
    ints[node, PARENT], ints[node, CHAR] = parent, char
    ints[node, DEPTH] = ints[parent, DEPTH] + 1
    ints[node, FRAME], floats[node, ENTRY] = -1, NEG_INF
    kids[parent, char] = node


@kernel
def extend(
    ints: I64,
    floats: F64,
    kids: I32,
    slot: I64,
    nodes: I64,
    pb: F64,
    pnb: F64,
    lp: F64,
    cand: I64,
    frame: int,
    space: int,
    is_boundary: Bools,
    unigram_next: I32,
    unigram_look: F64,
    hot_next: I32,
    hot_partial: F64,
    prefix_penalty: float,
    width: int,
    threshold: float,
    bound_extra: float,
) -> tuple[F64, F64, I64, I64]:
    """Beams [B] x candidates cand [k] of frame `frame` with log-probs lp [V]: returns
    (stays, ef, ei, tok) (see the row names above). Merges into live beams happen here,
    their stays and timings updated in place; `tok` lists the unbuilt boundary extensions
    that need an LM lookup, which `add_boundary` then builds."""
    stays, ef, ei = _masses(ints, floats, kids, slot, nodes, pb, pnb, lp, cand, frame, space)
    tables = (is_boundary, unigram_next, unigram_look, hot_next, hot_partial, prefix_penalty)
    tok = _score(ints, floats, nodes, cand, stays, ef, ei, *tables)
    tok = _bound_tokens(floats, stays, ef, tok, width, threshold, bound_extra)
    return stays, ef, ei, tok


@kernel
def _masses(
    ints: I64,
    floats: F64,
    kids: I32,
    slot: I64,
    nodes: I64,
    pb: F64,
    pnb: F64,
    lp: F64,
    cand: I64,
    frame: int,
    space: int,
) -> tuple[F64, F64, I64]:
    """Stay masses (blank, or repeat of the last symbol) and extension masses; an extension
    that lands on a live beam (beam j = beam i + c) adds its mass to beam j's pnb instead
    of making a second copy of the prefix."""
    b, k = nodes.size, cand.size
    stays = np.empty((3, b))
    ef = np.zeros((4, b * k))
    ei = np.full((3, b * k), -1, dtype=np.int64)
    total = np.empty(b)
    for i in range(b):
        last = ints[nodes[i], CHAR]
        total[i] = logaddexp(pb[i], pnb[i])
        stays[STAY_PB, i] = total[i] + lp[0]
        # a space after a space (or at the start) is absorbed: it keeps the prefix
        stays[STAY_PNB, i] = total[i] + lp[space] if last == space else pnb[i] + lp[last]
        slot[nodes[i]] = i
    for i in range(b):
        last = ints[nodes[i], CHAR]
        for j in range(k):
            f, c = i * k + j, cand[j]
            m = (pb[i] if c == last else total[i]) + lp[c]
            if last == space and c == space:
                m = NEG_INF
            child = kids[nodes[i], c]
            ei[CHILD, f] = child
            if child >= 0 and slot[child] >= 0:
                t = slot[child]
                stays[STAY_PNB, t] = logaddexp(stays[STAY_PNB, t], m)
                stamp(ints, floats, child, m, lp, frame)
                m = NEG_INF
            ef[MASS, f] = m
    for i in range(b):
        slot[nodes[i]] = -1
    return stays, ef, ei


@kernel
def _score(
    ints: I64,
    floats: F64,
    nodes: I64,
    cand: I64,
    stays: F64,
    ef: F64,
    ei: I64,
    is_boundary: Bools,
    unigram_next: I32,
    unigram_look: F64,
    hot_next: I32,
    hot_partial: F64,
    prefix_penalty: float,
) -> I64:
    """Stay scores; extension scores where the child exists; the columns and scores of the
    unbuilt plain children (the parent's score with its partial-word penalty, or look-ahead,
    and tentative hotword bonus replaced by the child's); and the list of unbuilt boundary
    extensions (score 0 for now). A hotword's prefix pays neither penalty nor look-ahead."""
    b, k = nodes.size, cand.size
    tok = np.empty((3, b * k), dtype=np.int64)
    n = 0
    for i in range(b):
        node = nodes[i]
        stays[STAY_Q, i] = logaddexp(stays[STAY_PB, i], stays[STAY_PNB, i]) + floats[node, SCORE]
        old = _base(floats, node)
        scale = max(1.0, (ints[node, WLEN] + 1) / AVG_WORD)
        for j in range(k):
            f, c = i * k + j, cand[j]
            if ei[CHILD, f] >= 0:
                ef[EXT_SCORE, f] = floats[ei[CHILD, f], SCORE]
            elif ef[MASS, f] > NEG_INF and is_boundary[c]:
                tok[TOK_EXT, n], tok[TOK_PARENT, n], tok[TOK_CHAR, n] = f, node, c
                n += 1
            elif ef[MASS, f] > NEG_INF:
                w2 = unigram_next[_row(unigram_next.shape[0], ints[node, W]), c]
                h2 = hot_next[_row(hot_next.shape[0], ints[node, H]), c]
                if h2 > 0:
                    pen = 0.0
                elif w2 >= 0:
                    pen = unigram_look[w2]
                else:  # no unigram's prefix: the least unigram's look-ahead, and the penalty
                    pen = prefix_penalty * scale + unigram_look[unigram_look.size - 1]
                hotb = hot_partial[_row(hot_partial.size, h2)]
                ei[EXT_W, f], ei[EXT_H, f], ef[EXT_PEN, f], ef[EXT_HOTB, f] = w2, h2, pen, hotb
                ef[EXT_SCORE, f] = old + pen + hotb
    return tok[:, :n].copy()


@kernel
def _bound_tokens(
    floats: F64,
    stays: F64,
    ef: F64,
    tok: I64,
    width: int,
    threshold: float,
    bound_extra: float,
) -> I64:
    """The boundary extensions worth an LM lookup: those whose score's upper bound could
    still make the cut, which is at least the width-th best, and the threshold below the
    best, of the scores known already. The others get score -inf: whatever the LM said,
    they could not survive this frame. `bound_extra` is what a boundary can add at most
    (inf: no bound)."""
    n, b = tok.shape[1], stays.shape[1]
    if n == 0:
        return tok
    known = np.empty(b + ef.shape[1])
    known[:b] = stays[STAY_Q]
    known[b:] = ef[MASS] + ef[EXT_SCORE]
    for t in range(n):
        known[b + tok[TOK_EXT, t]] = NEG_INF
    cut = known.max() - threshold
    if known.size > width:
        kth = np.partition(known, known.size - width)[known.size - width]
        cut = max(cut, np.nextafter(kth, NEG_INF))
    kept = 0
    for t in range(n):
        f, node = tok[TOK_EXT, t], tok[TOK_PARENT, t]
        base = _base(floats, node)
        bound = math.inf if bound_extra == math.inf else base + bound_extra
        if ef[MASS, f] + bound > cut:
            tok[:, kept] = tok[:, t]
            kept += 1
        else:
            ef[EXT_SCORE, f] = NEG_INF
    return tok[:, :kept].copy()


@kernel
def add_boundary(
    ints: I64,
    floats: F64,
    kids: I32,
    size: int,
    tok: I64,
    lms: F64,
    known: Bools,
    ef: F64,
    ei: I64,
    space: int,
    hot_next: I32,
    hot_ends: Bools,
    hot_partial: F64,
    hot_full: F64,
    alpha: float,
    beta: float,
    unk_penalty: float,
) -> int:
    """Build the boundary children `tok` lists as nodes size, size + 1, ..., given the LM's
    ln p of the tokens they complete (lms) and whether it knows them; returns the new size.
    A hotword phrase that a space completes banks its full bonus and restarts its match."""
    for t in range(tok.shape[1]):
        f, parent, c = tok[TOK_EXT, t], tok[TOK_PARENT, t], tok[TOK_CHAR, t]
        h = _row(hot_next.shape[0], ints[parent, H])
        unk = 0.0 if (known[t] or hot_ends[h]) else unk_penalty
        h2 = hot_next[h, c]
        done = c == space and h2 < 0
        bank = hot_full[h] if done else 0.0
        h2 = 0 if done else h2
        hotb = hot_partial[_row(hot_partial.size, h2)]
        base = _base(floats, parent)
        node = size + t
        _new_child(ints, floats, kids, node, parent, c)
        floats[node, SCORE] = base + (alpha * lms[t] + beta + unk) + bank + hotb
        floats[node, LM] = floats[parent, LM] + lms[t]
        ints[node, COUNT] = ints[parent, COUNT] + 1
        ints[node, LMNODE], ints[node, W], ints[node, WLEN], ints[node, H] = node, 0, 0, h2
        floats[node, PEN], floats[node, HOTB] = 0.0, hotb
        ei[CHILD, f], ef[EXT_SCORE, f] = node, floats[node, SCORE]
    return size + tok.shape[1]


@kernel
def take(
    ints: I64,
    floats: F64,
    kids: I32,
    size: int,
    nodes: I64,
    cand: I64,
    lp: F64,
    frame: int,
    stays: F64,
    ef: F64,
    ei: I64,
    width: int,
    threshold: float,
    keep: I64,
) -> tuple[I64, F64, F64, int]:
    """The new beams (nodes, pb, pnb) and the tree's new size: the stays and extensions
    `keep` lists (indices into [stays, extensions]), or if `keep` is empty, `select`'s
    choice (size -1 and no beams where `select` leaves the choice to numpy)."""
    b, k = nodes.size, cand.size
    if keep.size == 0:
        q = np.empty(b + ef.shape[1])
        q[:b] = stays[STAY_Q]
        q[b:] = ef[MASS] + ef[EXT_SCORE]
        keep = select(q, width, threshold)
        if keep.size == 0:
            return nodes[:0].copy(), stays[0, :0].copy(), stays[0, :0].copy(), -1
    out, pb, pnb = np.empty(keep.size, dtype=np.int64), np.empty(keep.size), np.empty(keep.size)
    for r in range(keep.size):
        e = keep[r]
        if e < b:
            out[r], pb[r], pnb[r] = nodes[e], stays[STAY_PB, e], stays[STAY_PNB, e]
            continue
        f = e - b
        child = ei[CHILD, f]
        if child < 0:  # a plain child, kept: build it
            child, parent = size, nodes[f // k]
            size += 1
            _new_child(ints, floats, kids, child, parent, cand[f % k])
            floats[child, SCORE], floats[child, PEN] = ef[EXT_SCORE, f], ef[EXT_PEN, f]
            floats[child, HOTB] = ef[EXT_HOTB, f]
            ints[child, W], ints[child, H] = ei[EXT_W, f], ei[EXT_H, f]
            ints[child, WLEN] = ints[parent, WLEN] + 1
        out[r], pb[r], pnb[r] = child, NEG_INF, ef[MASS, f]
        stamp(ints, floats, child, ef[MASS, f], lp, frame)
    return out, pb, pnb, size


@kernel
def select(q: F64, width: int, threshold: float) -> I64:
    """Indices of the best `width` scores within `threshold` of the best, best first, ties
    in index order; empty where a tie straddles the width-th place or lies among the kept,
    since the numpy selection this replaces (np.argpartition) ordered those its own way, and
    the caller then asks it (decoder/step.py `best`)."""
    idx = np.flatnonzero(q > q.max() - threshold)
    neg = -q[idx]
    if idx.size <= width:
        return idx[np.argsort(neg, kind="mergesort")]
    part = np.partition(neg, width)  # part[width] is the (width + 1)-th best
    worst = part[:width].max()
    if worst == part[width]:
        return idx[:0]
    chosen = idx[neg <= worst]
    keep: I64 = chosen[np.argsort(-q[chosen], kind="mergesort")]
    for r in range(width - 1):
        if q[keep[r]] == q[keep[r + 1]]:
            return idx[:0]
    return keep


@kernel
def spell(ints: I64, codes: I32, nodes: I64, lengths: I64) -> tuple[I32, I64]:
    """The last `lengths` symbols of prefixes `nodes` as code points (codes: symbol id ->
    code point), one text after the other, and where each text ends."""
    ends = np.cumsum(lengths)
    out = np.empty(ends[-1] if ends.size else 0, dtype=np.int32)
    for t in range(nodes.size):
        node = nodes[t]
        for e in range(ends[t] - 1, ends[t] - 1 - lengths[t], -1):
            out[e] = codes[ints[node, CHAR]]
            node = ints[node, PARENT]
    return out, ends


@kernel
def committed(ints: I64, nodes: I64, before: int) -> I64:
    """Indices of the beams `nodes` [B] (best first) that descend from the commit point: the
    deepest node of the best beam's path entered at or before frame `before`."""
    point = nodes[0]
    while point > 0 and ints[point, FRAME] > before:
        point = ints[point, PARENT]
    depth = ints[point, DEPTH]
    keep = np.empty(nodes.size, dtype=np.int64)
    n = 0
    for i in range(nodes.size):
        up = nodes[i]
        while ints[up, DEPTH] > depth:
            up = ints[up, PARENT]
        if up == point:
            keep[n] = i
            n += 1
    return keep[:n]


@kernel
def common_ancestor(ints: I64, nodes: I64) -> int:
    """The deepest node that is the common ancestor of `nodes` [>= 1] (or one of them)."""
    a: int = nodes[0]
    for t in range(1, nodes.size):
        b = nodes[t]
        while ints[a, DEPTH] > ints[b, DEPTH]:
            a = ints[a, PARENT]
        while ints[b, DEPTH] > ints[a, DEPTH]:
            b = ints[b, PARENT]
        while a != b:
            a, b = ints[a, PARENT], ints[b, PARENT]
    return a


@kernel
def path(ints: I64, node: int, top: int) -> I64:
    """Node ids from below `top` (an ancestor, or the root) down to `node`."""
    n, up = 0, node
    while up != top and up > 0:
        n, up = n + 1, ints[up, PARENT]
    out = np.empty(n, dtype=np.int64)
    for i in range(n - 1, -1, -1):
        out[i], node = node, ints[node, PARENT]
    return out


@kernel
def mark_ancestors(ints: I64, nodes: I64, keep: Bools) -> None:
    """Set `keep` on `nodes` and all their ancestors (each node visited once)."""
    for t in range(nodes.size):
        up = nodes[t]
        while up >= 0 and not keep[up]:
            keep[up] = True
            up = ints[up, PARENT]
