"""The fast path for frames where the blank dominates (DS2 §7.3): no beam is extended, so
a run of such frames only moves each beam's mass between "ends in blank" (pb) and "ends in
its last symbol" (pnb). The run is applied in closed form, whatever its length T.

Per frame t (blank b_t, the beam's last symbol x_t, the space s_t):
    pb' = logaddexp(pb, pnb) + b_t,   pnb' = pnb + x_t
and for a beam ending in a space (a space after a space is absorbed into the prefix):
    pb' = total + b_t,   pnb' = total + s_t,   so total' = total + logaddexp(b_t, s_t).
Unrolled over T frames, with exclusive prefix sums B_j = sum_{t<j} b_t, X_j = sum_{t<j} x_t:
    pnb_T = pnb + X_T,   pb_T = B_T + logaddexp(pb, pnb + logsumexp_{j<T}(X_j - B_j))
(a path stays on the symbol for j frames, then goes to blank and stays there).

The loops are compiled; the exponentials and logarithms over [T, V] stay numpy's (whose
vectorised exp and log round differently from the C library's in the last bit), so the
result is the same, bit for bit, as it was when all of this was numpy.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from decoder.alphabet import BLANK
from decoder.jit import array_sum, kernel, logaddexp

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def blank_run(pb: F64, pnb: F64, last: I64, space: int, lp: F64) -> tuple[F64, F64]:
    """(pb, pnb) of beams [B] ending in symbols `last` [B] after the frames lp [T, V]."""
    shifted, top, before_last = _exponents(lp)
    lse = top + np.log(np.exp(shifted).sum(axis=0))  # logsumexp_{j<T}(X_j - B_j), per symbol
    return _apply(pb, pnb, last, space, lp, before_last, lse)


@kernel
def _exponents(lp: F64) -> tuple[F64, F64, F64]:
    """(X_j - B_j - max_j, max_j, X_{T-1}) per symbol: the terms of the logsumexp, shifted
    by their maximum (>= 0: row 0 is all zeros), and the sums of the rows but the last."""
    t, v = lp.shape
    excl = np.zeros((t, v))  # excl[j] = sum of lp[:j], per symbol (as np.cumsum adds)
    if t > 1:
        excl[1] = lp[0]
    for j in range(2, t):
        excl[j] = excl[j - 1] + lp[j - 1]
    d = excl - excl[:, BLANK : BLANK + 1]
    top = np.empty(v)
    for s in range(v):
        top[s] = d[:, s].max()
    return d - top, top, excl[t - 1].copy()


@kernel
def _apply(
    pb: F64, pnb: F64, last: I64, space: int, lp: F64, before_last: F64, lse: F64
) -> tuple[F64, F64]:
    t = lp.shape[0]
    blanks = before_last[BLANK] + lp[t - 1, BLANK]  # B_T
    new_pb, new_pnb = np.empty(pb.size), np.empty(pb.size)
    both = 0.0  # the root, and beams after a space: sum_{t<T-1} logaddexp(b_t, s_t)
    if (last == space).any():
        pairs = np.empty(t - 1)
        for j in range(t - 1):
            pairs[j] = logaddexp(lp[j, BLANK], lp[j, space])
        both = array_sum(pairs)
    for i in range(pb.size):
        if last[i] == space:
            before = both + logaddexp(pb[i], pnb[i])
            new_pb[i], new_pnb[i] = before + lp[t - 1, BLANK], before + lp[t - 1, space]
        else:
            new_pb[i] = blanks + logaddexp(pb[i], pnb[i] + lse[last[i]])
            new_pnb[i] = pnb[i] + (before_last[last[i]] + lp[t - 1, last[i]])
    return new_pb, new_pnb
