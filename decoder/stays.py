"""The fast path for frames where the blank dominates (DS2 §7.3): no beam is extended, so
a run of such frames only moves each beam's mass between "ends in blank" (pb) and "ends in
its last symbol" (pnb). The run is applied in closed form, with a few numpy operations
over [T, V] and over the beams, whatever its length T.

Per frame t (blank b_t, the beam's last symbol x_t, the space s_t):
    pb' = logaddexp(pb, pnb) + b_t,   pnb' = pnb + x_t
and for a beam ending in a space (a space after a space is absorbed into the prefix):
    pb' = total + b_t,   pnb' = total + s_t,   so total' = total + logaddexp(b_t, s_t).
Unrolled over T frames, with exclusive prefix sums B_j = sum_{t<j} b_t, X_j = sum_{t<j} x_t:
    pnb_T = pnb + X_T,   pb_T = B_T + logaddexp(pb, pnb + logsumexp_{j<T}(X_j - B_j))
(a path stays on the symbol for j frames, then goes to blank and stays there).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from decoder.alphabet import BLANK

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def blank_run(pb: F64, pnb: F64, last: I64, space: int, lp: F64) -> tuple[F64, F64]:
    """(pb, pnb) of beams [B] ending in symbols `last` [B] after the frames lp [T, V]."""
    t = lp.shape[0]
    excl = np.zeros_like(lp)  # excl[j] = sum of lp[:j], per symbol
    np.cumsum(lp[:-1], axis=0, out=excl[1:])
    d = excl - excl[:, BLANK : BLANK + 1]  # X_j - B_j for every symbol
    top = d.max(axis=0)  # >= 0: row 0 is all zeros, so this is finite
    lse = top + np.log(np.exp(d - top).sum(axis=0))  # [V]
    blanks = excl[-1, BLANK] + lp[-1, BLANK]  # B_T
    totals = excl[-1] + lp[-1]  # X_T per symbol
    new_pb = blanks + np.logaddexp(pb, pnb + lse[last])
    new_pnb = pnb + totals[last]
    at_space = last == space
    if at_space.any():  # the root, and beams after a space
        both = np.logaddexp(lp[:, BLANK], lp[:, space])
        before = both[: t - 1].sum() + np.logaddexp(pb[at_space], pnb[at_space])
        new_pb[at_space] = before + lp[-1, BLANK]
        new_pnb[at_space] = before + lp[-1, space]
    return new_pb, new_pnb
